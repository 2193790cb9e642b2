#include "run_follower.hpp"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "run_folder.hpp"
#include "run_history.hpp"

namespace tandem::gui {

RunFollower::RunFollower(const QString& run_dir, qint64 offset, RunHistory* run, int interval_ms,
                         QObject* parent)
    : QObject(parent),
      path_(QDir(run_dir).filePath("events.jsonl")),
      run_dir_(run_dir),
      offset_(offset),
      run_(run) {
  connect(&timer_, &QTimer::timeout, this, &RunFollower::poll);
  timer_.start(interval_ms);
}

void RunFollower::poll() {
  // Whether the engine still holds its lock, asked before reading: what it wrote before letting
  // go is in the file by then.
  const std::optional<bool> engine_running = engine_running_in(run_dir_);
  QFile file(path_);
  if (!QFileInfo(path_).isFile() || !file.open(QIODevice::ReadOnly) || file.size() < offset_) {
    stop();  // replaced or truncated: no longer the stream that was read
    return;
  }
  file.seek(offset_);
  const QByteArray bytes = file.readAll();
  offset_ += bytes.size();
  const QList<Event> events = parser_.feed(bytes);
  if (!events.isEmpty()) run_->apply_all(events);
  const RunHistory::Status status = run_->status();
  if (status != RunHistory::Status::running && status != RunHistory::Status::waiting) {
    stop();  // run_finished or run_failed
    return;
  }
  if (engine_running != std::optional<bool>(true)) {
    run_->mark_ended_abnormally(
        "interrupted: the engine ended without finishing (killed or crashed); resume from its "
        "last checkpoint");
    stop();
  }
}

void RunFollower::stop() {
  if (!timer_.isActive()) return;
  timer_.stop();
  Q_EMIT ended();
}

}  // namespace tandem::gui
