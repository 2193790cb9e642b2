// The POSIX file system behind FileSystem::current() (file_system.hpp).
#include "io/file_system.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace tandem {

namespace fs = std::filesystem;

namespace {

std::error_code last_error() { return {errno, std::system_category()}; }

class PosixWritableFile final : public WritableFile {
 public:
  explicit PosixWritableFile(int fd) : fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::error_code append(std::string_view bytes) override {
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return last_error();
      if (n == 0) return {EIO, std::system_category()};
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    return {};
  }

  std::error_code sync() override { return ::fsync(fd_) == 0 ? std::error_code() : last_error(); }

  std::error_code close() override {
    const int fd = fd_;
    fd_ = -1;
    // Linux releases the descriptor even when close() reports an error: never retry it.
    return ::close(fd) == 0 ? std::error_code() : last_error();
  }

 private:
  int fd_;
};

std::error_code open_file(const fs::path& path, int flags, mode_t mode,
                          std::unique_ptr<WritableFile>& file) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return last_error();
  file = std::make_unique<PosixWritableFile>(fd);
  return {};
}

std::error_code sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return last_error();
  std::error_code result;
  if (::fsync(fd) != 0) result = last_error();
  ::close(fd);
  return result;
}

class PosixFileSystem final : public FileSystem {
 public:
  std::error_code create_new(const fs::path& path, std::unique_ptr<WritableFile>& file) override {
    return open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0666, file);
  }
  std::error_code open_append(const fs::path& path, std::unique_ptr<WritableFile>& file) override {
    // Never through a symbolic link, never blocking on a FIFO (ELOOP, ENXIO instead).
    return open_file(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644, file);
  }
  std::error_code sync_file(const fs::path& path) override { return sync_path(path, O_RDONLY); }
  std::error_code rename(const fs::path& from, const fs::path& to) override {
    return ::rename(from.c_str(), to.c_str()) == 0 ? std::error_code() : last_error();
  }
  std::error_code sync_folder(const fs::path& folder) override {
    return sync_path(folder, O_RDONLY | O_DIRECTORY);
  }
  void remove(const fs::path& path) noexcept override { ::unlink(path.c_str()); }
};

std::atomic<FileSystem*>& installed() {
  static std::atomic<FileSystem*> fs{nullptr};
  return fs;
}

}  // namespace

FileSystem& FileSystem::posix() {
  static PosixFileSystem* const fs = new PosixFileSystem;  // never destroyed: used until exit
  return *fs;
}

FileSystem& FileSystem::current() {
  FileSystem* fs = installed().load(std::memory_order_acquire);
  return fs ? *fs : posix();
}

ScopedFileSystem::ScopedFileSystem(FileSystem& fs)
    : previous_(installed().exchange(&fs, std::memory_order_acq_rel)) {}

ScopedFileSystem::~ScopedFileSystem() { installed().store(previous_, std::memory_order_release); }

}  // namespace tandem
