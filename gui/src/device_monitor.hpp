// Live device readings from the engine: runs `<engine> devices --json --watch` as a child
// process and turns each line it prints (one per second) into a DeviceSnapshot.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QString>

#include "device_snapshot.hpp"

namespace tandem::gui {

/// Lives in, and must only be used from, the thread that created it (the GUI thread): the
/// QProcess it owns delivers its output through that thread's event loop. At most one child runs
/// at a time; the destructor stops it, so the child never outlives the monitor.
class DeviceMonitor : public QObject {
  Q_OBJECT

 public:
  explicit DeviceMonitor(QObject* parent = nullptr);
  /// Stops the child (blocks up to about 3 s if the engine ignores SIGTERM).
  ~DeviceMonitor() override;

  DeviceMonitor(const DeviceMonitor&) = delete;
  DeviceMonitor& operator=(const DeviceMonitor&) = delete;

  /// Finds the engine (engine_path()) and starts it; does nothing while a child is running.
  /// Failures (no engine, cannot start) are reported through failed(), always asynchronously.
  void start();
  /// Sends SIGTERM, waits up to 2 s, then kills the child. Emits no failed() for this exit.
  /// Blocks until the child is gone; does nothing when none runs.
  void stop();
  bool is_running() const;

  /// Handles one line of engine output (the trailing newline optional). A device report emits
  /// snapshot(); an empty line is ignored; anything else (not JSON, another object, a truncated
  /// line) is counted in skipped_line_count() and otherwise ignored. Public for tests.
  void feed_line(const QByteArray& line);

  int snapshot_count() const { return snapshot_count_; }
  int skipped_line_count() const { return skipped_line_count_; }

 Q_SIGNALS:
  /// One reading, about every second while running.
  void snapshot(const tandem::gui::DeviceSnapshot& snapshot);
  /// The engine is missing, could not start, or ended without stop(). `message` is one plain
  /// sentence, followed by the last lines of the engine's stderr when it wrote any.
  void failed(const QString& message);

 private:
  void read_stdout();
  void read_stderr();
  void on_finished(int exit_code, QProcess::ExitStatus status);
  void on_error(QProcess::ProcessError error);
  void report_failure(const QString& message);
  QString stderr_tail() const;

  QProcess* process_;         // owned (child QObject); reused by each start()
  QString engine_;            // the binary of the current or last run
  QByteArray stdout_buffer_;  // output after the last complete line
  QByteArray stderr_buffer_;  // the last few KiB of stderr of the current run
  bool stopping_ = false;     // stop() is ending the child: its exit is not a failure
  int snapshot_count_ = 0;
  int skipped_line_count_ = 0;
};

}  // namespace tandem::gui
