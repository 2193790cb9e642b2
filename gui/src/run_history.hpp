// Everything the dashboard knows about one run, rebuilt from its event stream: the live run of a
// child engine and a finished run read back from <run_dir>/events.jsonl are the same model.
#pragma once

#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QObject>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <optional>

#include "event_stream.hpp"

namespace tandem::gui {

/// One `checkpoint_saved` event.
struct CheckpointRecord {
  QString time;  // UTC, ISO 8601
  int epoch = 0;
  qint64 step = 0;
  QString monitor;              // empty when the checkpoint monitors nothing
  std::optional<double> value;  // the monitored value
  bool best = false;
  QString target;  // template or meta
  qint64 bytes = 0;
  QString path;    // absolute
  QString reason;  // epoch, batch, final, interrupted, ...
  bool resumable = false;
};

/// A callback's decision or a checkpoint, as the charts mark it and the Log tells it.
struct RunMarker {
  qint64 step = 0;  // the optimizer step it came after
  int epoch = 0;    // 1-based
  QString kind;     // checkpoint_saved, early_stopping, reduce_lr_on_plateau, backup_saved, ...
  QString text;     // one line: "reduce_lr_on_plateau: learning rate 0.001 → 0.0005 (val_loss 0.41)"
};

/// Series and state of one run. Points are appended as events arrive and never dropped: the
/// charts decimate what they show. Lives on the GUI thread; not thread-safe.
class RunHistory : public QObject {
  Q_OBJECT
 public:
  enum class Status { waiting, running, finished, stopped, failed };

  explicit RunHistory(QObject* parent = nullptr);

  /// Applies one event (unknown ones are ignored) and emits updated().
  void apply(const Event& event);
  /// Applies many events and emits updated() once.
  void apply_all(const QList<Event>& events);
  /// The engine process ended without a run_finished / run_failed event (it crashed or was
  /// killed): the run becomes failed with `reason`.
  void mark_ended_abnormally(const QString& reason);
  /// This history's engine process failed (a non-zero exit that is no signal's stop): the run
  /// is failed with `reason`, whatever the stream said before — a resumed run starts from the
  /// stream of its earlier part, which may have finished.
  void mark_failed(const QString& reason);
  /// The stream was read from `folder`, which may not be the folder it names (a copied or moved
  /// run): the run folder and the checkpoints inside it become `folder`'s, so that no action on
  /// this run reaches another run's files.
  void relocate(const QString& folder);

  QString name() const { return name_; }
  QString run_dir() const { return run_dir_; }
  QJsonObject config() const { return config_; }
  QJsonObject devices() const { return devices_; }
  QString started_at() const { return started_at_; }
  Status status() const { return status_; }
  /// "running", "finished", "stopped: <reason>", "failed: <error>".
  QString status_text() const;
  QString error() const { return error_; }
  QString stop_reason() const { return stop_reason_; }
  int epoch() const { return epoch_; }
  int epochs() const { return epochs_; }
  int batch() const { return batch_; }
  int steps_per_epoch() const { return steps_per_epoch_; }
  qint64 step() const { return step_; }
  std::optional<double> learning_rate() const { return lr_; }
  std::optional<double> samples_per_sec() const { return samples_per_sec_; }
  qint64 parameters() const { return parameters_; }
  /// Processes (MPI ranks) of the run, and each one's device plan ("cpu:2").
  int world_size() const { return world_size_; }
  QString device_plan() const { return device_plan_; }
  /// The run's pipeline ("2 stages × 4 micro-batches (1f1b)"), or empty without one.
  QString pipeline_text() const { return pipeline_text_; }
  /// What each device of the run holds (run_started's placement), one line per device:
  /// "cpu worker 1 · stage 1: drop, middle, out · 9,153,101 parameters · 180.1 MiB".
  QStringList placement_lines() const { return placement_lines_; }

  /// Metric names without the val_ prefix, in order of first appearance ("loss", "accuracy").
  QStringList metric_names() const { return metric_names_; }
  /// Per-batch values of a training metric against the global step: each batch's own value,
  /// recovered from the running epoch means the engine reports (Keras semantics). val_ keys hold
  /// the validation values at the step that ended each epoch.
  QList<QPointF> batch_series(const QString& key) const { return batch_points_.value(key); }
  /// Per-epoch values against the 1-based epoch; keys include val_ ones.
  QList<QPointF> epoch_series(const QString& key) const { return epoch_points_.value(key); }
  QList<QPointF> learning_rate_series() const { return lr_series_; }     // x = step
  QList<QPointF> samples_per_sec_series() const { return throughput_; }  // x = step
  /// A loss-scaled optimizer's scale after each step (x = step; empty without loss scaling), the
  /// last one, and the steps skipped for non-finite gradients so far (docs/config.md, Loss
  /// scaling).
  QList<QPointF> loss_scale_series() const { return loss_scale_series_; }
  std::optional<double> loss_scale() const { return loss_scale_; }
  qint64 skipped_steps() const { return skipped_steps_; }
  /// replica_stats: step time (ms) of each replica against the step; labels "0: cpu", ...; a
  /// pipeline's replica gives one series per stage instead ("0/1: cpu worker 1", replica 0's
  /// stage 1: the time that stage's worker computed).
  QStringList replica_labels() const { return replica_labels_; }
  QList<QPointF> replica_step_ms(int replica) const { return replica_ms_.value(replica); }
  QList<CheckpointRecord> checkpoints() const { return checkpoints_; }
  /// device_stats: utilisation (%) against the step, per device ("cpu", "cuda:0", ...), in order
  /// of first appearance.
  QStringList utilisation_devices() const { return utilisation_devices_; }
  QList<QPointF> utilisation(const QString& device) const { return utilisation_.value(device); }
  /// Epoch logs of the last finished epoch (train and val_).
  QJsonObject last_epoch_logs() const { return last_epoch_logs_; }
  /// Checkpoints and callback decisions, in stream order.
  QList<RunMarker> markers() const { return markers_; }
  /// Seconds left until the last epoch ends, from the pace of this run so far (its epochs'
  /// durations once one has ended, validation included; its batches' before); nullopt while it
  /// is not running or the pace is not known yet.
  std::optional<double> eta_seconds() const;

  /// `step_points` (x = optimizer step) against wall-clock seconds since the run first started
  /// instead: each step at the time its batch ended (interpolated between batches; a resumed run's
  /// pause included, as the clock saw it). Steps before the first batch map to its time.
  QList<QPointF> at_wall_time(const QList<QPointF>& step_points) const;
  /// Wall-clock seconds from the run's first start to its last batch (0 before one).
  double elapsed_seconds() const { return clock_.isEmpty() ? 0 : clock_.back().y(); }

  /// Counts every applied event; charts compare it to know when to redraw.
  qint64 revision() const { return revision_; }

 Q_SIGNALS:
  void updated();
  void checkpoint_added(const tandem::gui::CheckpointRecord& record);
  void marker_added(const tandem::gui::RunMarker& marker);

 private:
  void apply_one(const Event& event);
  void note_metric(const QString& key);
  void on_batch_ended(const QJsonObject& f, const QString& time);
  void add_marker(const QString& kind, const QString& text, const QJsonObject& fields);
  void on_replica_stats(const QJsonObject& f);

  QString name_, run_dir_, started_at_, error_, stop_reason_, device_plan_, pipeline_text_;
  QStringList placement_lines_;
  QJsonObject config_, devices_, last_epoch_logs_;
  Status status_ = Status::waiting;
  int epoch_ = 0, epochs_ = 0, batch_ = 0, steps_per_epoch_ = 0;
  qint64 step_ = 0, parameters_ = 0;
  int world_size_ = 1;
  std::optional<double> lr_, samples_per_sec_, loss_scale_;
  qint64 skipped_steps_ = 0;
  QStringList metric_names_;
  QMap<QString, QList<QPointF>> batch_points_, epoch_points_;
  QList<QPointF> lr_series_, throughput_, loss_scale_series_;
  QStringList replica_labels_;
  QMap<int, QList<QPointF>> replica_ms_;
  int last_epoch_ended_ = 0;
  QMap<int, QJsonObject> epoch_logs_;  // each ended epoch's logs, of the timeline shown
  // Drops the step-indexed points at x >= `from` (a resumed run's timeline replaces them).
  void rewind_steps(double from);
  QList<CheckpointRecord> checkpoints_;
  QStringList utilisation_devices_;
  QMap<QString, QList<QPointF>> utilisation_;
  // Running epoch means of the previous batch and the samples they cover, to recover each
  // batch's own value.
  QJsonObject previous_means_;
  double samples_in_epoch_ = 0, batch_size_ = 0;
  bool means_known_ = false;
  QList<RunMarker> markers_;
  // Pace of this run segment (since its run_started): the first and last batch seen (time and
  // batches done since the run began), and the duration of each epoch that ended.
  QDateTime first_batch_time_, last_batch_time_;
  qint64 first_batch_done_ = 0, last_batch_done_ = 0;
  QList<double> epoch_seconds_;  // per whole epoch of this segment (a resumed one scaled up)
  int epoch_resumed_at_ = 0;     // the batch the current epoch was resumed at (0: from its start)
  // (step, seconds since clock_origin_) of each batch, in step order.
  QDateTime clock_origin_;
  QList<QPointF> clock_;
  qint64 revision_ = 0;
};

/// A duration as people read it: "45 s", "4 min 12 s", "2 h 05 min".
QString format_duration(double seconds);

/// Parses a checkpoint_saved event's fields.
CheckpointRecord checkpoint_record(const QJsonObject& fields);

}  // namespace tandem::gui
