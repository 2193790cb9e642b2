#include "data/npz_archive.hpp"

#include <unzip.h>

#include <algorithm>
#include <memory>

#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem::data {

namespace {

constexpr int kStored = 0, kDeflated = 8;
constexpr std::size_t kInflateChunk = std::size_t{16} << 20;

struct ZipCloser {
  void operator()(void* zip) const { unzClose(zip); }
};
using Zip = std::unique_ptr<void, ZipCloser>;

[[noreturn]] void archive_error(const std::string& file, const std::string& why) {
  throw DataError("cannot read '" + file + "': " + why);
}

Zip open_zip(const std::string& file) {
  if (const std::string why = not_a_regular_file(file); !why.empty()) archive_error(file, why);
  Zip zip(unzOpen64(file.c_str()));
  if (!zip) archive_error(file, "not a .npz file (not a readable zip archive)");
  return zip;
}

// The current member's name and header.
std::string current_name(void* zip, unz_file_info64* info, const std::string& file) {
  char name[1024];
  if (unzGetCurrentFileInfo64(zip, info, name, sizeof name, nullptr, 0, nullptr, 0) != UNZ_OK)
    archive_error(file, "a corrupt zip directory");
  return name;
}

std::string array_name(const std::string& member) {
  constexpr std::string_view kSuffix = ".npy";
  if (member.size() > kSuffix.size() &&
      member.compare(member.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return member.substr(0, member.size() - kSuffix.size());
  return member;
}

std::vector<std::uint8_t> inflate_current(void* zip, std::uint64_t size, const std::string& what) {
  // In chunks: a directory that promises more than the data holds fails having allocated no more
  // than the data gave.
  std::vector<std::uint8_t> out;
  while (out.size() < size) {
    const std::size_t at = out.size();
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(kInflateChunk, size - at));
    out.resize(at + want);
    const int got = unzReadCurrentFile(zip, out.data() + at, static_cast<unsigned>(want));
    if (got < 0 || static_cast<std::size_t>(got) != want)
      throw DataError(what + " is corrupt (its data ends before the size the archive gives)");
  }
  std::uint8_t extra;
  if (unzReadCurrentFile(zip, &extra, 1) != 0)
    throw DataError(what + " is corrupt (more data than the size the archive gives)");
  return out;
}

}  // namespace

std::vector<std::string> npz_array_names(const std::string& file) {
  Zip zip = open_zip(file);
  std::vector<std::string> names;
  for (int r = unzGoToFirstFile(zip.get()); r == UNZ_OK; r = unzGoToNextFile(zip.get())) {
    unz_file_info64 info{};
    names.push_back(array_name(current_name(zip.get(), &info, file)));
  }
  return names;
}

NpzMember read_npz_member(const std::string& file, const std::string& name) {
  Zip zip = open_zip(file);
  const std::string what = "'" + file + "': array '" + name + "'";
  if (unzLocateFile(zip.get(), (name + ".npy").c_str(), 1) != UNZ_OK) {
    std::string have;
    for (const std::string& n : npz_array_names(file))
      have += (have.empty() ? "'" : ", '") + n + "'";
    archive_error(file,
                  "has no array '" + name + "' (it has " + (have.empty() ? "none" : have) + ")");
  }
  const std::vector<std::string> names = npz_array_names(file);
  if (std::count(names.begin(), names.end(), name) > 1)
    throw DataError(what + " is in the archive " +
                    std::to_string(std::count(names.begin(), names.end(), name)) +
                    " times; which one is meant is unclear (NumPy's np.load takes the last, a zip "
                    "reader the first): write the archive again with np.savez");
  unz_file_info64 info{};
  current_name(zip.get(), &info, file);
  if (info.flag & 1) throw DataError(what + " is encrypted");
  if (info.compression_method != kStored && info.compression_method != kDeflated)
    throw DataError(what + " is compressed with method " + std::to_string(info.compression_method) +
                    " (this reads stored and deflated)");
  if (unzOpenCurrentFile(zip.get()) != UNZ_OK) throw DataError(what + " cannot be opened");
  NpzMember m;
  m.name = name;
  m.size = info.uncompressed_size;
  if (info.compression_method == kStored) {
    if (info.compressed_size != info.uncompressed_size)
      throw DataError(what + " is corrupt (stored, yet its sizes differ)");
    m.stored = true;
    m.offset = unzGetCurrentFileZStreamPos64(zip.get());
    unzCloseCurrentFile(zip.get());
    return m;
  }
  m.inflated = inflate_current(zip.get(), m.size, what);
  if (unzCloseCurrentFile(zip.get()) == UNZ_CRCERROR)
    throw DataError(what + " is corrupt (its CRC does not match)");
  return m;
}

}  // namespace tandem::data
