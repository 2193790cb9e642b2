#include "tandem/event_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tandem/error.hpp"
#include "util/utc_time.hpp"

namespace tandem {

namespace {

void write_all(int fd, const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the stream is best effort once training runs; never kill a run over it
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

EventSink::~EventSink() {
  if (fd_ >= 0) ::close(fd_);
}

void EventSink::open_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw RunError("cannot open the event stream " + path.string() + ": " + std::strerror(errno));
  // A run that was killed may have left a partial last line: start on a fresh line so that
  // the partial one stays a single skippable line instead of merging with the next event.
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, size - 1) == 1 && last != '\n') write_all(fd, "\n");
  }
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string EventSink::utc_now() { return detail::utc_now(); }

void EventSink::emit(const std::string& event, const nlohmann::json& fields) {
  nlohmann::json line = {
      {"schema", kEventSchemaVersion}, {"event", event}, {"time", detail::utc_now()}};
  for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  // Invalid UTF-8 in a user string must not break the stream: replace it.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) write_all(fd_, text);
  if (to_stdout_) write_all(STDOUT_FILENO, text);
}

}  // namespace tandem
