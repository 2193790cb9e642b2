// One `tandem train` child process: its event stream (stdout) feeds a RunHistory, its stderr is
// the log. A crash of the child never takes the dashboard down: it becomes a failed run.
#pragma once

#include <csignal>

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTimer>

#include "event_stream.hpp"
#include "run_history.hpp"

namespace tandem::gui {

/// How often a run the dashboard launches samples device utilisation (`--device-stats`).
inline constexpr int kDeviceStatsSeconds = 2;

struct TrainLaunch {
  QString config_path;    // the run config file (relative data paths resolve against its folder)
  QString run_dir;        // passed as --run-dir when not empty
  QString resume;         // a checkpoint or run folder for --resume; empty: a new run
  QStringList overrides;  // --set KEY=VALUE
  QString devices;        // --devices PLAN when not empty
  int processes = 1;      // > 1: under `mpirun -np N` (rank 0's event stream is read)
};

/// `tandem train`'s exit code for a run stopped by SIGINT/SIGTERM with a resumable checkpoint.
inline constexpr int kStoppedExit = 130;

/// The MPI launcher for multi-process runs: $TANDEM_MPIRUN, else `mpirun` on PATH; empty if none.
QString mpirun_path();

/// What an engine that failed said, from its stderr lines: the last one that reports an error
/// ("tandem: error: ..."), else the last one that is not CLI11's "Run with --help for more
/// information." hint (its usage errors say what is wrong on the line before); empty for none.
QString engine_error_line(const QStringList& stderr_lines);

/// Owns the child process and the RunHistory it fills. Lives on the GUI thread.
class EngineRun : public QObject {
  Q_OBJECT
 public:
  explicit EngineRun(QObject* parent = nullptr);
  /// Stops a child that still runs (the stop signal, then SIGKILL after a short wait).
  ~EngineRun() override;

  /// Starts `tandem train`. Returns false (and sets error()) when the engine cannot be found or
  /// started.
  bool start(const TrainLaunch& launch);
  /// Asks the engine to stop: SIGINT (SIGUSR1 to mpirun, which forwards it to every rank), so it
  /// finishes the batch, saves a resumable checkpoint and exits; SIGTERM after `grace_ms` and
  /// SIGKILL `grace_ms` later if it does not.
  void stop(int grace_ms = 60000);
  bool running() const { return process_.state() != QProcess::NotRunning; }
  qint64 pid() const { return process_.processId(); }

  RunHistory* history() { return &history_; }
  QString error() const { return error_; }
  QStringList arguments() const { return arguments_; }
  QString program() const { return program_; }
  /// The stream's skipped lines so far (partial lines, other schema versions...).
  QList<StreamIssue> stream_issues() const { return parser_.issues(); }
  std::optional<int> exit_code() const { return exit_code_; }

 Q_SIGNALS:
  /// A line the engine wrote on stderr.
  void log_line(const QString& line);
  /// The child ended; `summary` says how in one line (for the log and the status bar).
  void ended(int exit_code, bool crashed, const QString& summary);

 private:
  void read_stdout();
  void read_stderr();
  void on_finished(int exit_code, QProcess::ExitStatus status);

  QProcess process_;
  EventStreamParser parser_;
  RunHistory history_;
  QByteArray stderr_pending_;
  QStringList stderr_tail_;
  QString program_, error_;
  QStringList arguments_;
  QTimer escalate_;
  int escalation_ = 0;
  int stop_signal_ = SIGINT;  // SIGUSR1 for a run under mpirun (set by start())
  std::optional<int> exit_code_;
};

}  // namespace tandem::gui
