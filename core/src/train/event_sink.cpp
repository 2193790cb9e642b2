#include "tandem/event_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "io/file_system.hpp"
#include "tandem/error.hpp"
#include "util/regular_file.hpp"
#include "util/utc_time.hpp"

namespace tandem {

namespace {

void write_to_stdout(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a reader that went away never stops a run
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Whether the file at `path` is non-empty and its last byte is not a newline (a run that was
// killed mid-line).
bool ends_mid_line(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return false;
  in.seekg(-1, std::ios::end);
  char last = '\n';
  return in.get(last) && last != '\n';
}

}  // namespace

EventSink::EventSink() = default;
EventSink::~EventSink() = default;

void EventSink::open_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  // An existing stream must be a file of its own: a symbolic link would append elsewhere, and a
  // FIFO or a device would block the run or take the events (open_append follows neither).
  if (std::filesystem::is_symlink(path, ec))
    throw RunError("cannot open the event stream " + path.string() +
                   ": it is a symbolic link, and the stream is written only as a file of its own");
  if (std::filesystem::exists(path, ec))
    if (const std::string why = not_a_regular_file(path); !why.empty())
      throw RunError("cannot open the event stream " + path.string() + ": it " + why);
  std::unique_ptr<WritableFile> file;
  if (const std::error_code error = FileSystem::current().open_append(path, file))
    throw RunError("cannot open the event stream " + path.string() + ": " + error.message());
  // A run that was killed may have left a partial last line: start on a fresh line so that
  // the partial one stays a single skippable line instead of merging with the next event.
  if (ends_mid_line(path)) {
    if (const std::error_code error = file->append("\n"))
      throw RunError("cannot write to the event stream " + path.string() + ": " + error.message());
  }
  std::lock_guard lock(mutex_);
  path_ = path;
  file_ = std::move(file);
}

std::string EventSink::utc_now() { return detail::utc_now(); }

void EventSink::emit(const std::string& event, const nlohmann::json& fields) {
  nlohmann::json line = {
      {"schema", kEventSchemaVersion}, {"event", event}, {"time", detail::utc_now()}};
  for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  // Invalid UTF-8 in a user string must not break the stream: replace it.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mutex_);
  if (to_stdout_) write_to_stdout(text);
  if (!file_) return;
  if (const std::error_code error = file_->append(text)) {
    file_.reset();
    throw RunError("cannot write to the event stream " + path_.string() + ": " + error.message() +
                   " (from '" + event + "' on, events are not in the file)");
  }
}

}  // namespace tandem
