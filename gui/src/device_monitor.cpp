#include "device_monitor.hpp"

#include <QMetaObject>
#include <QStringList>

#include "engine_locator.hpp"

namespace tandem::gui {

namespace {

constexpr int kTerminateWaitMs = 2000;        // SIGTERM first: the engine ends --watch cleanly
constexpr int kKillWaitMs = 1000;             // then SIGKILL, which cannot be ignored
constexpr qsizetype kMaxLineBytes = 1 << 20;  // a device report is ~1 KiB per GPU
constexpr qsizetype kStderrKeepBytes = 8192;
constexpr int kStderrTailLines = 5;

}  // namespace

DeviceMonitor::DeviceMonitor(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
  process_->setStandardInputFile(QProcess::nullDevice());
  connect(process_, &QProcess::readyReadStandardOutput, this, &DeviceMonitor::read_stdout);
  connect(process_, &QProcess::readyReadStandardError, this, &DeviceMonitor::read_stderr);
  connect(process_, &QProcess::finished, this, &DeviceMonitor::on_finished);
  connect(process_, &QProcess::errorOccurred, this, &DeviceMonitor::on_error);
}

DeviceMonitor::~DeviceMonitor() {
  stop();
  // Whatever the child does now must not reach this half-destroyed object.
  disconnect(process_, nullptr, this, nullptr);
}

void DeviceMonitor::start() {
  if (is_running()) return;
  stdout_buffer_.clear();
  stderr_buffer_.clear();
  stopping_ = false;
  engine_ = engine_path();
  if (engine_.isEmpty()) {
    report_failure(
        QStringLiteral("Cannot show live device readings: %1.").arg(engine_missing_message()));
    return;
  }
  process_->setProgram(engine_);
  process_->setArguments(
      {QStringLiteral("devices"), QStringLiteral("--json"), QStringLiteral("--watch")});
  process_->start(QIODevice::ReadOnly);
}

void DeviceMonitor::stop() {
  if (process_->state() == QProcess::NotRunning) return;
  stopping_ = true;
  process_->terminate();
  if (!process_->waitForFinished(kTerminateWaitMs)) {
    process_->kill();
    process_->waitForFinished(kKillWaitMs);
  }
  stdout_buffer_.clear();
}

bool DeviceMonitor::is_running() const {
  return process_->state() != QProcess::NotRunning;
}

void DeviceMonitor::feed_line(const QByteArray& line) {
  const QByteArray trimmed = line.trimmed();
  if (trimmed.isEmpty()) return;
  std::optional<DeviceSnapshot> parsed = parse_device_line(trimmed);
  if (!parsed) {
    ++skipped_line_count_;
    return;
  }
  ++snapshot_count_;
  Q_EMIT snapshot(*parsed);
}

void DeviceMonitor::read_stdout() {
  const QByteArray data = process_->readAllStandardOutput();
  if (stopping_) return;  // the readings of a monitor being stopped are no longer wanted
  stdout_buffer_ += data;
  qsizetype start = 0;
  for (qsizetype newline = stdout_buffer_.indexOf('\n', start); newline >= 0;
       newline = stdout_buffer_.indexOf('\n', start)) {
    feed_line(stdout_buffer_.mid(start, newline - start));
    start = newline + 1;
  }
  stdout_buffer_.remove(0, start);
  if (stdout_buffer_.size() > kMaxLineBytes) {
    // No newline in sight: not the engine's output. The rest of this line, once its newline
    // arrives, fails to parse and is counted again; that is fine.
    stdout_buffer_.clear();
    ++skipped_line_count_;
  }
}

void DeviceMonitor::read_stderr() {
  stderr_buffer_ += process_->readAllStandardError();
  if (stderr_buffer_.size() > kStderrKeepBytes)
    stderr_buffer_.remove(0, stderr_buffer_.size() - kStderrKeepBytes);
}

void DeviceMonitor::on_finished(int exit_code, QProcess::ExitStatus status) {
  if (stopping_) return;
  read_stdout();
  read_stderr();
  if (!stdout_buffer_.trimmed().isEmpty()) ++skipped_line_count_;  // a truncated last line
  stdout_buffer_.clear();
  const QString command = QStringLiteral("`%1 devices --json --watch`").arg(engine_);
  QString message = status == QProcess::CrashExit
                        ? QStringLiteral("Live device readings stopped: %1 crashed.").arg(command)
                        : QStringLiteral("Live device readings stopped: %1 exited with code %2.")
                              .arg(command)
                              .arg(exit_code);
  const QString tail = stderr_tail();
  if (!tail.isEmpty()) message += '\n' + tail;
  report_failure(message);
}

void DeviceMonitor::on_error(QProcess::ProcessError error) {
  // Crashes arrive through finished() too; read and write errors and waitFor* timeouts are not
  // the end of the child.
  if (error != QProcess::FailedToStart || stopping_) return;
  report_failure(
      QStringLiteral("Cannot show live device readings: the engine %1 did not start (%2).")
          .arg(engine_, process_->errorString()));
}

void DeviceMonitor::report_failure(const QString& message) {
  // Queued, so that failed() never fires inside start() and a caller can connect after it.
  // The context object drops the call if this monitor is destroyed first.
  QMetaObject::invokeMethod(
      this, [this, message] { Q_EMIT failed(message); }, Qt::QueuedConnection);
}

QString DeviceMonitor::stderr_tail() const {
  QStringList lines;
  for (const QByteArray& line : stderr_buffer_.split('\n')) {
    const QString text = QString::fromUtf8(line).trimmed();
    if (!text.isEmpty()) lines << text;
  }
  if (lines.size() > kStderrTailLines) lines = lines.mid(lines.size() - kStderrTailLines);
  return lines.join('\n');
}

}  // namespace tandem::gui
