// EventSink: the versioned JSON-lines event stream (docs/design.md contract 6).
//
// Every line carries "schema": 1, "event" and "time" (UTC, ISO 8601 with milliseconds). Each line
// is written with a single write() call and flushed, so a run that dies leaves at most a partial
// last line. Thread-safe: emit() may be called from any thread.
//
// Ownership: a sink owns its file (closed when the sink goes); the trainer owns the run's sink and
// a callback borrows it through its context for the duration of a hook.
#pragma once

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"

namespace tandem {

inline constexpr int kEventSchemaVersion = 1;

class TANDEM_EXPORT EventSink {
 public:
  EventSink() = default;
  ~EventSink();
  EventSink(const EventSink&) = delete;
  EventSink& operator=(const EventSink&) = delete;

  /// Appends to `path` (created with its folder). Throws RunError when it cannot be opened.
  void open_file(const std::filesystem::path& path);
  /// Also writes every event to standard output (`--events -`).
  void also_stdout(bool enabled) { to_stdout_ = enabled; }

  /// Writes {"schema": 1, "event": name, "time": now, ...fields}.
  void emit(const std::string& event, const nlohmann::json& fields = nlohmann::json::object());

  /// Now as the events' "time" records it: "2026-11-21T05:36:00.123Z" (UTC, ISO 8601 with
  /// milliseconds). For plugins that stamp their own records the same way (the engine itself
  /// uses util/utc_time.hpp).
  static std::string utc_now();

 private:
  std::mutex mutex_;
  int fd_ = -1;
  bool to_stdout_ = false;
};

}  // namespace tandem
