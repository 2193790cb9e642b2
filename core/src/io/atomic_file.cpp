// Atomic file replacement: temporary file, fsync, rename, fsync of the folder (atomic_file.hpp).
#include "tandem/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tandem/error.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const fs::path& target) {
  return target.parent_path().empty() ? fs::path(".") : target.parent_path();
}

// ".<name>.tmp-<pid>-<n>": unique in this process by the counter, across processes by the pid.
fs::path temp_name(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "." + std::string.
  std::string name = ".";
  name.append(target.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
  name.append("-").append(std::to_string(counter++));
  return folder_of(target) / name;
}

std::string quoted(const fs::path& path) {
  std::string out = "'";
  out.append(path.string()).append("'");
  return out;
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  if (target_.filename().empty() || target_.filename() == "." || target_.filename() == "..")
    throw RunError("cannot write " + quoted(target_) + ": the path names no file");
  // A temporary name left behind by a process that died with the same pid is skipped (O_EXCL).
  for (int attempt = 0;; ++attempt) {
    temp_ = temp_name(target_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    if (errno != EEXIST || attempt == 100) {
      const int error = errno;
      temp_.clear();  // nothing of ours to remove
      fail("cannot create a temporary file in " + quoted(folder_of(target_)), error);
    }
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const std::string& step, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  throw RunError("cannot write " + quoted(target_) + ": " + step + ": " + std::strerror(error));
}

void AtomicFile::write(std::string_view bytes) {
  if (committed_ || temp_.empty())
    throw std::logic_error("AtomicFile::write after commit or failure: " + target_.string());
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      fail("cannot write the temporary file " + quoted(temp_), error);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (committed_ || temp_.empty())
    throw std::logic_error("AtomicFile::commit after commit or failure: " + target_.string());
  if (fd_ >= 0) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
      const int error = errno;
      fail("cannot close the temporary file " + quoted(temp_), error);
    }
  }
  // Reopened by name: whoever wrote the content may have replaced the file we created.
  const int fd = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    fail("cannot reopen the temporary file " + quoted(temp_), error);
  }
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail("cannot flush the temporary file " + quoted(temp_) + " to disk", error);
  }
  ::close(fd);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int error = errno;
    fail("cannot rename the temporary file " + quoted(temp_) + " over it", error);
  }
  committed_ = true;

  // The rename is on disk once the folder is: until then a crash may bring back the old file.
  const fs::path folder = folder_of(target_);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int error = dir < 0 ? errno : 0;
  if (dir >= 0) {
    if (::fsync(dir) != 0) error = errno;
    ::close(dir);
  }
  if (error != 0 && error != EINVAL && error != ENOTSUP)
    throw RunError(quoted(target_) + " was written but its folder " + quoted(folder) +
                   " cannot be flushed to disk: " + std::strerror(error));
}

void write_file_atomically(const fs::path& target, std::string_view bytes) {
  AtomicFile file(target);
  file.write(bytes);
  file.commit();
}

}  // namespace tandem
