#include "io/run_folder_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
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
  // Not through a symbolic link (the pid written below would truncate its target), nor
  // blocking on a FIFO.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0)
    throw RunError("cannot create the run folder's lock " + file.string() + ": " +
                   std::strerror(errno) +
                   (errno == ELOOP ? " (it is a symbolic link: remove it)" : ""));
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw RunError("the run folder's lock " + file.string() + " is not a regular file: remove it");
  }
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

namespace {

// The writer's pid in ".<name>.tmp-<pid>-<n>", or 0 when `name` is not such a file.
pid_t temporary_writer(const std::string& name) {
  const std::size_t tag = name.rfind(".tmp-");
  if (name.empty() || name[0] != '.' || tag == std::string::npos || tag == 0) return 0;
  const std::string rest = name.substr(tag + 5);
  const std::size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos) return 0;
  pid_t pid = 0;
  for (std::size_t i = 0; i < dash; ++i) {
    if (rest[i] < '0' || rest[i] > '9' || pid > 1000000000) return 0;
    pid = pid * 10 + (rest[i] - '0');
  }
  return pid;
}

int remove_dead_writers_files(const std::filesystem::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const pid_t pid = temporary_writer(entry.path().filename().string());
    if (pid <= 0 || !entry.is_regular_file(ec)) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace

int remove_stray_temporaries(const std::filesystem::path& folder) {
  int removed = remove_dead_writers_files(folder);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
    // Its own subfolders only: not through a symbolic link to another folder.
    if (entry.is_directory(ec) && !entry.is_symlink(ec))
      removed += remove_dead_writers_files(entry.path());
  return removed;
}

}  // namespace tandem
