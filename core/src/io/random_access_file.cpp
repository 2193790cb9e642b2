#include "io/random_access_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem {

namespace {

struct stat stat_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw DataError("cannot read '" + path + "': " + std::strerror(errno));
  return st;
}

}  // namespace

RandomAccessFile::RandomAccessFile(const std::string& path) : path_(path) {
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw DataError("cannot read '" + path + "': " + why);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  try {
    const struct stat st = stat_of(fd_, path_);
    size_ = static_cast<std::uint64_t>(st.st_size);
    modified_ = st.st_mtim;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

RandomAccessFile::~RandomAccessFile() {
  ::close(fd_);
}

void RandomAccessFile::check_unchanged() const {
  const struct stat st = stat_of(fd_, path_);
  if (static_cast<std::uint64_t>(st.st_size) != size_ || st.st_mtim.tv_sec != modified_.tv_sec ||
      st.st_mtim.tv_nsec != modified_.tv_nsec)
    throw_changed(static_cast<std::uint64_t>(st.st_size));
}

void RandomAccessFile::read(std::uint64_t offset, std::size_t count, void* out) const {
  if (offset > size_ || count > size_ - offset)
    throw DataError("'" + path_ + "': bytes " + std::to_string(offset) + " to " +
                    std::to_string(offset + count) + " lie past its end (" + std::to_string(size_) +
                    " bytes)");
  auto* to = static_cast<char*>(out);
  while (count > 0) {
    const ssize_t got = ::pread(fd_, to, count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw DataError("cannot read '" + path_ + "': " + std::strerror(errno));
    if (got == 0) throw_changed(static_cast<std::uint64_t>(stat_of(fd_, path_).st_size));
    to += got;
    offset += static_cast<std::uint64_t>(got);
    count -= static_cast<std::size_t>(got);
  }
}

void RandomAccessFile::throw_changed(std::uint64_t now_size) const {
  throw DataError("'" + path_ + "' changed while Tandem was reading it (" + std::to_string(size_) +
                  " bytes when opened, " + std::to_string(now_size) +
                  " now): samples are read from the file as the run goes, so write new data to "
                  "a new file, or to a temporary one renamed over this one, not into this one");
}

}  // namespace tandem
