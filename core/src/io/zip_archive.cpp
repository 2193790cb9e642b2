#include "io/zip_archive.hpp"

#include <unzip.h>
#include <zlib.h>

#include <algorithm>
#include <memory>

#include "io/random_access_file.hpp"
#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem {

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

Zip open_zip(const std::string& file, const std::string& kind) {
  if (const std::string why = not_a_regular_file(file); !why.empty()) archive_error(file, why);
  Zip zip(unzOpen64(file.c_str()));
  if (!zip) archive_error(file, "not " + kind + " (not a readable zip archive)");
  return zip;
}

// The current member's name and header.
std::string current_name(void* zip, unz_file_info64* info, const std::string& file) {
  char name[1024];
  if (unzGetCurrentFileInfo64(zip, info, name, sizeof name, nullptr, 0, nullptr, 0) != UNZ_OK)
    archive_error(file, "a corrupt zip directory");
  return name;
}

std::vector<std::string> names_in(void* zip, const std::string& file) {
  std::vector<std::string> names;
  for (int r = unzGoToFirstFile(zip); r == UNZ_OK; r = unzGoToNextFile(zip)) {
    unz_file_info64 info{};
    names.push_back(current_name(zip, &info, file));
  }
  return names;
}

std::vector<std::uint8_t> inflate_current(void* zip, std::uint64_t size, const std::string& what) {
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

std::vector<std::string> zip_member_names(const std::string& file, const std::string& kind) {
  Zip zip = open_zip(file, kind);
  return names_in(zip.get(), file);
}

std::optional<ZipMember> find_zip_member(const std::string& file, const std::string& kind,
                                         const std::string& name, std::string what) {
  Zip zip = open_zip(file, kind);
  what = "'" + file + "': " + (what.empty() ? "member '" + name + "'" : what);
  const std::vector<std::string> names = names_in(zip.get(), file);
  const auto copies = std::count(names.begin(), names.end(), name);
  if (copies == 0) return std::nullopt;
  if (copies > 1)
    throw DataError(what + " is in the archive " + std::to_string(copies) +
                    " times; which one is meant is unclear (Python's zipfile and NumPy take the "
                    "last, a zip reader the first): write the archive again");
  if (unzLocateFile(zip.get(), name.c_str(), 1) != UNZ_OK)
    throw DataError(what + " cannot be located (a corrupt zip directory)");
  unz_file_info64 info{};
  current_name(zip.get(), &info, file);
  if (info.flag & 1) throw DataError(what + " is encrypted");
  if (info.compression_method != kStored && info.compression_method != kDeflated)
    throw DataError(what + " is compressed with method " + std::to_string(info.compression_method) +
                    " (this reads stored and deflated)");
  if (unzOpenCurrentFile(zip.get()) != UNZ_OK) throw DataError(what + " cannot be opened");
  ZipMember m;
  m.name = name;
  m.size = info.uncompressed_size;
  m.crc = static_cast<std::uint32_t>(info.crc);
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

std::vector<std::uint8_t> zip_member_bytes(const std::string& file, ZipMember member) {
  if (!member.stored) return std::move(member.inflated);
  const RandomAccessFile in(file);
  if (member.offset > in.size() || member.size > in.size() - member.offset)
    throw DataError("'" + file + "': member '" + member.name +
                    "' is corrupt (it ends past the end of the archive)");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(member.size));
  if (!bytes.empty()) in.read(member.offset, bytes.size(), bytes.data());
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, bytes.data(), bytes.size());
  if (static_cast<std::uint32_t>(crc) != member.crc)
    throw DataError("'" + file + "': member '" + member.name +
                    "' is corrupt (its CRC does not match)");
  return bytes;
}

}  // namespace tandem
