// Helpers for the data-module tests: gzip files through zlib, IDX file bytes, the text of the
// DataError a reader throws.
//
// The test executable does not link zlib itself (only libtandem does), so zlib's functions are
// looked up at run time in the libz that libtandem already loaded.
#pragma once

#include <dlfcn.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tandem/error.hpp"

namespace tandem::test {

#define TANDEM_TEST_STR2(x) #x
#define TANDEM_TEST_STR(x) TANDEM_TEST_STR2(x)  // expands zlib's gzopen -> gzopen64 renames

struct Zlib {
  decltype(&::gzopen) open = nullptr;
  decltype(&::gzread) read = nullptr;
  decltype(&::gzwrite) write = nullptr;
  decltype(&::gzclose) close = nullptr;

  static const Zlib& get() {
    static const Zlib z = [] {
      Zlib r;
      r.open = reinterpret_cast<decltype(r.open)>(dlsym(RTLD_DEFAULT, TANDEM_TEST_STR(gzopen)));
      r.read = reinterpret_cast<decltype(r.read)>(dlsym(RTLD_DEFAULT, TANDEM_TEST_STR(gzread)));
      r.write = reinterpret_cast<decltype(r.write)>(dlsym(RTLD_DEFAULT, TANDEM_TEST_STR(gzwrite)));
      r.close = reinterpret_cast<decltype(r.close)>(dlsym(RTLD_DEFAULT, TANDEM_TEST_STR(gzclose)));
      if (!r.open || !r.read || !r.write || !r.close)
        throw std::runtime_error("zlib functions not found in the process");
      return r;
    }();
    return z;
  }
};

/// Writes `bytes` gzip-compressed to `path`.
inline void write_gz(const std::filesystem::path& path, const std::string& bytes) {
  const Zlib& z = Zlib::get();
  gzFile f = z.open(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path.string());
  if (!bytes.empty() && z.write(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
                            static_cast<int>(bytes.size()))
    throw std::runtime_error("gzwrite failed for " + path.string());
  z.close(f);
}

/// The first `max` decompressed bytes of a gzip file.
inline std::string read_gz(const std::filesystem::path& path, std::size_t max) {
  const Zlib& z = Zlib::get();
  gzFile f = z.open(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot read " + path.string());
  std::string out(max, '\0');
  const int n = z.read(f, out.data(), static_cast<unsigned>(max));
  z.close(f);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

/// An IDX file: 00 00 <type> <ndims>, big-endian dims, then `payload` (already big-endian).
inline std::string idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims,
                             const std::string& payload) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((d >> shift) & 0xff));
  return out + payload;
}

/// The message of the DataError `f` throws, or "(no DataError)".
inline std::string data_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

}  // namespace tandem::test
