// EventSink: the versioned JSON-lines event stream (docs/design.md contract 6).
//
// Every line carries "schema": 1, "event" and "time" (UTC, ISO 8601 with milliseconds). Each line
// is written with a single write() call and flushed, so a run that dies leaves at most a partial
// last line. Thread-safe: emit() may be called from any thread.
//
// A line that cannot be written to the file (a full disk, an I/O error) is an error of the run:
// emit() throws RunError naming the file, and the sink writes nothing more to it (so that the
// run's last events, run_failed included, still reach standard output when it is on). Writes go
// through the engine's file-system seam (core/src/io/file_system.hpp).
//
// Ownership: a sink owns its file (closed when the sink goes); the trainer owns the run's sink and
// a callback borrows it through its context for the duration of a hook.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"

namespace tandem {

inline constexpr int kEventSchemaVersion = 1;

class WritableFile;  // the engine's file-system seam: opaque to plugins

class TANDEM_EXPORT EventSink {
 public:
  EventSink();
  ~EventSink();
  EventSink(const EventSink&) = delete;
  EventSink& operator=(const EventSink&) = delete;

  /// Appends to `path` (created with its folder). Throws RunError when it cannot be opened.
  void open_file(const std::filesystem::path& path);
  /// Also writes every event to standard output (`--events -`).
  void also_stdout(bool enabled) { to_stdout_ = enabled; }

  /// Writes {"schema": 1, "event": name, "time": now, ...fields}. Throws RunError when the line
  /// cannot be written to the file (once: later events skip the file); standard output is best
  /// effort (a reader that went away never stops a run).
  void emit(const std::string& event, const nlohmann::json& fields = nlohmann::json::object());

  /// Now as the events' "time" records it: "2026-11-21T05:36:00.123Z" (UTC, ISO 8601 with
  /// milliseconds). For plugins that stamp their own records the same way (the engine itself
  /// uses util/utc_time.hpp).
  static std::string utc_now();

 private:
  std::mutex mutex_;
  std::filesystem::path path_;
  std::unique_ptr<WritableFile> file_;  // null before open_file() and after a failed write
  bool to_stdout_ = false;
};

}  // namespace tandem
