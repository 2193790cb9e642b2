#include "io/run_folder_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "tandem/error.hpp"

namespace tandem {

namespace {

// The whole file, for writing (the type F_GETLK tests against: any lock conflicts with it).
struct flock whole_file(short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 0;
  return l;
}

std::optional<pid_t> holder_of(int fd) {
  struct flock l = whole_file(F_WRLCK);
  if (::fcntl(fd, F_GETLK, &l) != 0 || l.l_type == F_UNLCK) return std::nullopt;
  return l.l_pid;
}

}  // namespace

RunFolderLock::RunFolderLock(const std::filesystem::path& folder) {
  const std::filesystem::path file = folder / kRunFolderLockName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw RunError("cannot create the run folder's lock " + file.string() + ": " +
                   std::strerror(errno));
  struct flock l = whole_file(F_WRLCK);
  if (::fcntl(fd_, F_SETLK, &l) != 0) {
    const int error = errno;
    const std::optional<pid_t> other = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error == EAGAIN || error == EACCES)
      throw ConfigError("--run-dir", "the run folder " + folder.string() +
                                         " is in use by another tandem process" +
                                         (other ? " (pid " + std::to_string(*other) + ")" : "") +
                                         "; give another --run-dir, or wait for that run to end");
    throw RunError("cannot lock " + file.string() + ": " + std::strerror(error));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // The pid is for people reading the file; the lock itself is what counts, so a failed
  // write is let pass.
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace tandem
