#include "engine_run.hpp"

#include <signal.h>
#include <unistd.h>

#include <QStandardPaths>

#include "engine_locator.hpp"

namespace tandem::gui {

QString engine_error_line(const QStringList& stderr_lines) {
  for (auto it = stderr_lines.crbegin(); it != stderr_lines.crend(); ++it)
    if (it->contains("error")) return it->trimmed();
  for (auto it = stderr_lines.crbegin(); it != stderr_lines.crend(); ++it) {
    const QString line = it->trimmed();
    if (!line.isEmpty() && !line.startsWith("Run with --help")) return line;
  }
  return {};
}

EngineRun::EngineRun(QObject* parent) : QObject(parent) {
  process_.setProcessChannelMode(QProcess::SeparateChannels);
  connect(&process_, &QProcess::readyReadStandardOutput, this, &EngineRun::read_stdout);
  connect(&process_, &QProcess::readyReadStandardError, this, &EngineRun::read_stderr);
  connect(&process_, &QProcess::finished, this, &EngineRun::on_finished);
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    error_ = QString("cannot start %1: %2").arg(program_, process_.errorString());
    history_.mark_failed(error_);
    Q_EMIT ended(-1, true, error_);
  });
  escalate_.setSingleShot(true);
  connect(&escalate_, &QTimer::timeout, this, [this] {
    if (!running()) return;
    if (escalation_ == 0) {
      Q_EMIT log_line("tandem-gui: the engine did not stop; sending SIGTERM");
      process_.terminate();
      escalation_ = 1;
      escalate_.start();
    } else {
      Q_EMIT log_line("tandem-gui: the engine did not stop after SIGTERM; killing it");
      process_.kill();
    }
  });
}

EngineRun::~EngineRun() {
  if (!running()) return;
  disconnect(&process_, nullptr, this, nullptr);
  ::kill(static_cast<pid_t>(process_.processId()), stop_signal_);
  if (!process_.waitForFinished(5000)) {
    process_.kill();
    process_.waitForFinished(2000);
  }
}

QString mpirun_path() {
  const QString from_env = qEnvironmentVariable("TANDEM_MPIRUN");
  if (!from_env.isEmpty()) return from_env;
  return QStandardPaths::findExecutable("mpirun");
}

bool EngineRun::start(const TrainLaunch& launch) {
  program_ = engine_path();
  if (program_.isEmpty()) {
    error_ = engine_missing_message();
    return false;
  }
  arguments_.clear();
  stop_signal_ = launch.processes > 1 ? SIGUSR1 : SIGINT;
  if (launch.processes > 1) {
    // mpirun starts the ranks; rank 0 writes the stream to stdout, and mpirun forwards Stop's
    // SIGUSR1 to every rank (not SIGINT: on that it ends the job itself, SIGKILL a second after
    // its SIGTERM, which may be before rank 0 has saved).
    const QString mpirun = mpirun_path();
    if (mpirun.isEmpty()) {
      error_ = QString(
                   "%1 processes need mpirun (Debian: apt install openmpi-bin), which is not "
                   "on PATH; set TANDEM_MPIRUN to its path")
                   .arg(launch.processes);
      return false;
    }
    arguments_ << "-np" << QString::number(launch.processes) << "--oversubscribe";
    if (::geteuid() == 0) arguments_ << "--allow-run-as-root";
    arguments_ << program_;
    program_ = mpirun;
  }
  arguments_ << "train";
  if (!launch.config_path.isEmpty()) arguments_ << launch.config_path;
  if (!launch.run_dir.isEmpty()) arguments_ << "--run-dir" << launch.run_dir;
  if (!launch.resume.isEmpty()) arguments_ << "--resume" << launch.resume;
  if (!launch.devices.isEmpty()) arguments_ << "--devices" << launch.devices;
  for (const QString& o : launch.overrides) arguments_ << "--set" << o;
  // The stream on stdout; device utilisation every 2 s from the start, so the dashboard's
  // device chart has a curve within seconds (the engine's default is every 10 s).
  arguments_ << "--events"
             << "-"
             << "--device-stats" << QString::number(kDeviceStatsSeconds);
  process_.start(program_, arguments_);
  if (!process_.waitForStarted(10000)) {
    error_ = QString("cannot start %1: %2").arg(program_, process_.errorString());
    return false;
  }
  Q_EMIT log_line("$ " + program_ + " " + arguments_.join(' '));
  return true;
}

void EngineRun::stop(int grace_ms) {
  if (!running()) return;
  Q_EMIT log_line(QString("tandem-gui: sending %1 (the engine saves a resumable checkpoint and "
                          "exits)")
                      .arg(stop_signal_ == SIGINT ? "SIGINT" : "SIGUSR1 to mpirun"));
  ::kill(static_cast<pid_t>(process_.processId()), stop_signal_);
  escalation_ = 0;
  escalate_.setInterval(grace_ms);
  escalate_.start();
}

void EngineRun::read_stdout() {
  history_.apply_all(parser_.feed(process_.readAllStandardOutput()));
}

void EngineRun::read_stderr() {
  stderr_pending_.append(process_.readAllStandardError());
  qsizetype start = 0;
  while (true) {
    const qsizetype newline = stderr_pending_.indexOf('\n', start);
    if (newline < 0) break;
    const QString line = QString::fromUtf8(stderr_pending_.mid(start, newline - start));
    start = newline + 1;
    stderr_tail_.push_back(line);
    if (stderr_tail_.size() > 50) stderr_tail_.pop_front();
    Q_EMIT log_line(line);
  }
  stderr_pending_.remove(0, start);
}

void EngineRun::on_finished(int exit_code, QProcess::ExitStatus status) {
  escalate_.stop();
  read_stdout();
  read_stderr();
  if (!stderr_pending_.isEmpty()) {
    Q_EMIT log_line(QString::fromUtf8(stderr_pending_));
    stderr_tail_.push_back(QString::fromUtf8(stderr_pending_));
    stderr_pending_.clear();
  }
  history_.apply_all(parser_.finish());
  const bool crashed = status == QProcess::CrashExit;
  exit_code_ = crashed ? -1 : exit_code;
  // The engine ends a run stopped by a signal with 130, after its run_finished (interrupted).
  const bool clean = !crashed && (exit_code == 0 || (exit_code == kStoppedExit &&
                                                      history_.status() == RunHistory::Status::stopped));
  QString summary;
  if (crashed) {
    summary = "the engine crashed (" + process_.errorString() + ")";
  } else if (clean) {
    summary = "the engine finished: " + history_.status_text();
  } else {
    summary = QString("the engine exited with code %1").arg(exit_code);
  }
  // A run that never reported its end (a crash, a config error before run_started) becomes a
  // failed run carrying the engine's last words.
  if (!clean) {
    const QString last = engine_error_line(stderr_tail_);
    history_.mark_failed(last.isEmpty() ? summary : summary + ": " + last);
  }
  Q_EMIT ended(exit_code_.value_or(-1), crashed, summary);
}

}  // namespace tandem::gui
