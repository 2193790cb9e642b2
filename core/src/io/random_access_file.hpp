// A regular file read at offsets (pread), for datasets that read their samples from disk as
// training goes instead of loading the file. A file rewritten in place while a run reads it
// (NumPy's np.save truncates and refills the same file) ends in a DataError naming it, never in
// SIGBUS or in samples silently mixed from two versions: every read checks that the file still has
// the size and modification time it had when it was opened. Owns its descriptor until destroyed;
// not copyable; read() and check_unchanged() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class RandomAccessFile {
 public:
  /// Opens `path`. Throws DataError naming it when it is not a regular file or cannot be opened.
  explicit RandomAccessFile(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  /// The size the file had when opened.
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  /// Copies bytes [offset, offset + count) into `out`. DataError naming the file when they lie
  /// past the size it was opened with, when the file has changed since (check_unchanged()), or
  /// on a read error.
  void read(std::uint64_t offset, std::size_t count, void* out) const;

  /// DataError naming the file when its size or modification time is no longer what it was when
  /// it was opened.
  void check_unchanged() const;

 private:
  [[noreturn]] void throw_changed(std::uint64_t now_size) const;

  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  timespec modified_{};
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
