// Following a run that an engine this window did not start is writing (a terminal's `tandem
// train`, another window's): its events.jsonl is read on from where the last read stopped,
// twice a second, and the new events applied to the shown RunHistory, until the stream ends
// (run_finished, run_failed) or the engine's folder lock is released without an end, which
// marks the run interrupted. Only whole lines are applied: a line the engine is still writing
// waits for its newline.
//
// Ownership: borrows `run`, which must outlive the follower (MainWindow drops the follower first).
// Thread-safety: the GUI thread (a QTimer drives it).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include "event_stream.hpp"

namespace tandem::gui {

class RunHistory;

class RunFollower : public QObject {
  Q_OBJECT
 public:
  /// Reads `run_dir`/events.jsonl from byte `offset` on (where the stream's last whole line
  /// ended when `run` was read) every `interval_ms`.
  RunFollower(const QString& run_dir, qint64 offset, RunHistory* run, int interval_ms = 500,
              QObject* parent = nullptr);

  bool following() const { return timer_.isActive(); }
  /// Reads what was appended since the last read (the timer calls it).
  void poll();

 Q_SIGNALS:
  /// The stream ended, or its engine did: nothing more will be read.
  void ended();

 private:
  void stop();

  QString path_, run_dir_;
  qint64 offset_;
  RunHistory* run_;
  EventStreamParser parser_;
  QTimer timer_;
};

}  // namespace tandem::gui
