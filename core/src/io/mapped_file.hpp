// A read-only memory map of a whole regular file: datasets read their rows from it without
// loading the file (the kernel pages in what is touched). Owns the mapping until destroyed;
// not copyable; data() may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class MappedFile {
 public:
  /// Maps `path`. Throws DataError naming it when it is not a regular file or cannot be opened
  /// or mapped. An empty file maps to size() 0 and a null data().
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
