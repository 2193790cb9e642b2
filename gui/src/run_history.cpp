#include "run_history.hpp"

#include <algorithm>
#include <cmath>

#include <QDir>
#include <QJsonArray>
#include <QLocale>

namespace tandem::gui {

namespace {

std::optional<double> number(const QJsonValue& v) {
  if (v.isDouble()) return v.toDouble();
  return std::nullopt;
}

QString base_metric(const QString& key) {
  return key.startsWith("val_") ? key.mid(4) : key;
}

// A value as the Log shows it: 4 significant digits, "n/a" for null (a non-finite value).
QString shown(const QJsonValue& v) {
  return v.isDouble() ? QString::number(v.toDouble(), 'g', 4) : QString("n/a");
}

// "monitor value" when the event names a monitor, else "".
QString monitored(const QJsonObject& f, const char* value_key = "value") {
  const QString monitor = f.value("monitor").toString();
  return monitor.isEmpty() ? QString() : monitor + " " + shown(f.value(value_key));
}

// The one-line account of a callback event, or "" for events that are not decisions.
QString marker_text(const QString& name, const QJsonObject& f) {
  if (name == "checkpoint_saved") {
    const QString file = f.value("path").toString().section('/', -1);
    QStringList details;
    if (const QString m = monitored(f); !m.isEmpty()) details << m;
    if (f.value("best").toBool()) details << "best";
    if (f.contains("reason")) details << f.value("reason").toString();
    return "checkpoint " + file + (details.isEmpty() ? "" : " (" + details.join(", ") + ")");
  }
  if (name == "early_stopping") {
    if (f.value("action").toString() == "restore_best_weights")
      return QString("early_stopping: restored the weights of epoch %1 (%2)")
          .arg(f.value("best_epoch").toInt())
          .arg(monitored(f, "best"));
    return "early_stopping: stop — " +
           f.value("message").toString(f.value("reason").toString("no reason given"));
  }
  if (name == "reduce_lr_on_plateau")
    return QString("reduce_lr_on_plateau: learning rate %1 → %2 (%3)")
        .arg(shown(f.value("old_lr")), shown(f.value("new_lr")), monitored(f));
  if (name == "backup_saved") return "backup saved: " + f.value("path").toString().section('/', -1);
  if (name == "backup_restored")
    return QString("backup restored: resuming at epoch %1, batch %2")
        .arg(f.value("epoch").toInt())
        .arg(f.value("batch").toInt());
  if (name == "stopped") return "stopped: " + f.value("reason").toString();
  return {};
}

// "cpu worker 1" for a CPU device of a plan (its number in the plan), else the device.
QString device_label(const QJsonObject& device) {
  const QString name = device.value("device").toString();
  return name == "cpu" ? QString("cpu worker %1").arg(device.value("index").toInt()) : name;
}

QString pipeline_text_of(const QJsonObject& pipeline) {
  if (pipeline.isEmpty()) return {};
  const QJsonValue stages = pipeline.value("stages");
  const int count = stages.isArray() ? static_cast<int>(stages.toArray().size()) : stages.toInt(1);
  return QString("%1 stages × %2 micro-batches (%3)")
      .arg(count)
      .arg(pipeline.value("microbatches").toInt(1))
      .arg(pipeline.value("schedule").toString());
}

QStringList placement_lines_of(const QJsonArray& placement) {
  QStringList lines;
  const QLocale locale;
  for (const QJsonValue& v : placement) {
    const QJsonObject d = v.toObject();
    QStringList layers;
    for (const QJsonValue& l : d.value("layers").toArray()) layers << l.toString();
    const double mib =
        d.value("memory").toObject().value("total").toDouble() / (1024.0 * 1024.0);
    lines << QString("%1 · replica %2 · stage %3: %4 · %5 parameters · %6 MiB")
                 .arg(device_label(d))
                 .arg(d.value("replica").toInt())
                 .arg(d.value("stage").toInt())
                 .arg(layers.join(", "))
                 .arg(locale.toString(d.value("parameters").toInteger()))
                 .arg(mib, 0, 'f', 1);
  }
  return lines;
}

}  // namespace

QString format_duration(double seconds) {
  const auto s = static_cast<qint64>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return QString("%1 s").arg(s);
  if (s < 3600) return QString("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
  return QString("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QChar('0'));
}

CheckpointRecord checkpoint_record(const QJsonObject& f) {
  CheckpointRecord r;
  r.time = f.value("time").toString();
  r.epoch = f.value("epoch").toInt();
  r.step = f.value("step").toInteger();
  r.monitor = f.value("monitor").toString();
  r.value = number(f.value("value"));
  r.best = f.value("best").toBool();
  r.target = f.value("target").toString("template");
  r.bytes = f.value("bytes").toInteger();
  r.path = f.value("path").toString();
  r.reason = f.contains("reason") ? f.value("reason").toString() : f.value("trigger").toString();
  // The engine's own model.h5 (final, interrupted, the step before a diverged loss, the steps
  // before a failure) resumes.
  r.resumable = f.value("resumable")
                    .toBool(r.reason == "final" || r.reason == "interrupted" ||
                            r.reason == "diverged" || r.reason == "failed");
  return r;
}

RunHistory::RunHistory(QObject* parent) : QObject(parent) {}

QString RunHistory::status_text() const {
  switch (status_) {
    case Status::waiting:
      return "waiting";
    case Status::running:
      return "running";
    case Status::finished:
      return stop_reason_.isEmpty() ? "finished" : "finished: " + stop_reason_;
    case Status::stopped:
      return "stopped: " + stop_reason_;
    case Status::failed:
      return "failed: " + error_;
  }
  return {};
}

void RunHistory::apply(const Event& event) {
  apply_one(event);
  Q_EMIT updated();
}

void RunHistory::apply_all(const QList<Event>& events) {
  for (const Event& e : events) apply_one(e);
  if (!events.isEmpty()) Q_EMIT updated();
}

void RunHistory::mark_ended_abnormally(const QString& reason) {
  if (status_ == Status::finished || status_ == Status::failed || status_ == Status::stopped)
    return;
  status_ = Status::failed;
  error_ = reason;
  ++revision_;
  Q_EMIT updated();
}

void RunHistory::mark_failed(const QString& reason) {
  status_ = Status::failed;
  error_ = reason;
  ++revision_;
  Q_EMIT updated();
}

void RunHistory::relocate(const QString& folder) {
  const QString from = QDir::cleanPath(run_dir_);
  const QString to = QDir::cleanPath(QDir(folder).absolutePath());
  if (from.isEmpty() || from == to) return;
  for (CheckpointRecord& c : checkpoints_)
    if (c.path.startsWith(from + "/")) c.path = to + c.path.mid(from.size());
  run_dir_ = to;
  ++revision_;
  Q_EMIT updated();
}

void RunHistory::note_metric(const QString& key) {
  if (key == "lr") return;
  const QString base = base_metric(key);
  if (!metric_names_.contains(base)) metric_names_.push_back(base);
}

namespace {

// Drops the points at x >= `from` (a series runs in x order).
void drop_from(QList<QPointF>& series, double from) {
  while (!series.isEmpty() && series.back().x() >= from) series.pop_back();
}

}  // namespace

void RunHistory::rewind_steps(double from) {
  for (auto& s : batch_points_) drop_from(s, from);
  for (auto& s : replica_ms_) drop_from(s, from);
  drop_from(lr_series_, from);
  drop_from(throughput_, from);
  drop_from(loss_scale_series_, from);
  drop_from(clock_, from);
  for (auto& s : utilisation_) drop_from(s, from);
  markers_.removeIf([from](const RunMarker& m) { return static_cast<double>(m.step) >= from; });
}

QList<QPointF> RunHistory::at_wall_time(const QList<QPointF>& step_points) const {
  QList<QPointF> out;
  if (clock_.isEmpty()) return out;
  out.reserve(step_points.size());
  for (const QPointF& p : step_points) {
    const auto after = std::lower_bound(clock_.begin(), clock_.end(), p.x(),
                                        [](const QPointF& c, double x) { return c.x() < x; });
    double seconds;
    if (after == clock_.begin())
      seconds = after->y();
    else if (after == clock_.end())
      seconds = clock_.back().y();
    else if (after->x() == p.x())
      seconds = after->y();
    else {
      const QPointF& before = *(after - 1);
      seconds = before.y() + (p.x() - before.x()) / (after->x() - before.x()) *
                                 (after->y() - before.y());
    }
    out.push_back({seconds, p.y()});
  }
  return out;
}

void RunHistory::add_marker(const QString& kind, const QString& text, const QJsonObject& f) {
  // The event's own step and epoch when it has them (the checkpoint plugin publishes a few
  // batches after it saved), else where the run is.
  const int epoch = f.value("epoch").toInt();
  RunMarker marker{f.value("step").isDouble() ? f.value("step").toInteger() : step_,
                   epoch > 0 ? epoch : epoch_, kind, text};
  markers_.push_back(marker);
  Q_EMIT marker_added(marker);
}

std::optional<double> RunHistory::eta_seconds() const {
  if (status_ != Status::running || epochs_ <= 0 || steps_per_epoch_ <= 0) return std::nullopt;
  const qint64 total = static_cast<qint64>(epochs_) * steps_per_epoch_;
  const qint64 left = std::max<qint64>(0, total - last_batch_done_);
  if (!epoch_seconds_.isEmpty()) {
    double sum = 0;
    for (double s : epoch_seconds_) sum += s;
    return left * (sum / epoch_seconds_.size()) / steps_per_epoch_;
  }
  const qint64 batches = last_batch_done_ - first_batch_done_;
  if (batches <= 0 || !first_batch_time_.isValid()) return std::nullopt;
  const double seconds = first_batch_time_.msecsTo(last_batch_time_) / 1000.0;
  return seconds > 0 ? std::optional<double>(left * seconds / batches) : std::nullopt;
}

void RunHistory::on_batch_ended(const QJsonObject& f, const QString& time) {
  batch_ = f.value("batch").toInt();
  const qint64 before_step = step_;
  step_ = f.value("step").toInteger();
  // A resumed run continues from its checkpoint's step: what the stream holds from there on
  // (the part after that checkpoint, abandoned) gives way to the resumed timeline.
  if (step_ <= before_step) rewind_steps(static_cast<double>(step_));
  epoch_ = f.value("epoch").toInt(epoch_);
  const double size = f.value("size").toDouble();
  const double x = static_cast<double>(step_);
  const QJsonObject means = f.value("logs").toObject();
  const double before = samples_in_epoch_;
  samples_in_epoch_ += size;
  for (auto it = means.begin(); it != means.end(); ++it) {
    if (!it.value().isDouble()) continue;  // null: a non-finite value
    note_metric(it.key());
    const double mean = it.value().toDouble();
    double own = mean;
    // mean_b * n_b = mean_{b-1} * n_{b-1} + value_b * size_b (sample-weighted epoch means).
    if (means_known_ && previous_means_.value(it.key()).isDouble() && size > 0)
      own = (mean * samples_in_epoch_ - previous_means_.value(it.key()).toDouble() * before) / size;
    if (std::isfinite(own)) batch_points_[it.key()].push_back({x, own});
  }
  previous_means_ = means;
  means_known_ = true;
  lr_ = number(f.value("lr"));
  if (lr_) lr_series_.push_back({x, *lr_});
  samples_per_sec_ = number(f.value("samples_per_sec"));
  if (samples_per_sec_) throughput_.push_back({x, *samples_per_sec_});
  if (auto scale = number(f.value("loss_scale"))) {
    loss_scale_ = scale;
    loss_scale_series_.push_back({x, *scale});
    skipped_steps_ = f.value("skipped_steps").toInteger(skipped_steps_);
  }
  const qint64 done = static_cast<qint64>(std::max(epoch_ - 1, 0)) * steps_per_epoch_ + batch_;
  const QDateTime at = QDateTime::fromString(time, Qt::ISODateWithMs);
  if (at.isValid()) {
    if (!clock_origin_.isValid()) clock_origin_ = at;
    clock_.push_back({x, clock_origin_.msecsTo(at) / 1000.0});
    if (!first_batch_time_.isValid()) {
      first_batch_time_ = at;
      first_batch_done_ = done;
    }
    last_batch_time_ = at;
  }
  last_batch_done_ = done;
}

void RunHistory::on_replica_stats(const QJsonObject& f) {
  const double x = f.value("step").toDouble();
  int series = 0;  // one per replica, or per stage of a pipeline
  for (const QJsonValue& r : f.value("replicas").toArray()) {
    const QJsonObject o = r.toObject();
    const int replica = o.value("replica").toInt();
    const QString rank = world_size_ > 1 ? QString(", rank %1").arg(o.value("rank").toInt()) : "";
    const auto add = [&](const QString& label, const QJsonValue& seconds) {
      while (replica_labels_.size() <= series) replica_labels_.push_back({});
      replica_labels_[series] = label + rank;
      if (auto secs = number(seconds)) replica_ms_[series].push_back({x, *secs * 1000.0});
      ++series;
    };
    const QJsonArray stages = o.value("stages").toArray();
    if (stages.isEmpty()) add(QString("%1: %2").arg(replica).arg(o.value("device").toString()),
                              o.value("step_seconds"));
    for (int s = 0; s < stages.size(); ++s) {
      const QJsonObject stage = stages[s].toObject();
      add(QString("%1/%2: %3").arg(replica).arg(s).arg(device_label(stage)),
          stage.value("step_seconds"));
    }
  }
}

void RunHistory::apply_one(const Event& event) {
  ++revision_;
  const QJsonObject& f = event.fields;
  const QString& name = event.name;
  if (name == "run_started") {
    name_ = f.value("name").toString();
    run_dir_ = f.value("run_dir").toString();
    config_ = f.value("config").toObject();
    devices_ = f.value("devices").toObject();
    parameters_ = f.value("parameters").toInteger();
    world_size_ = f.value("world_size").toInt(1);
    device_plan_ = devices_.value("plan").toString();
    pipeline_text_ = pipeline_text_of(config_.value("pipeline").toObject());
    placement_lines_ = placement_lines_of(f.value("placement").toArray());
    batch_size_ = f.value("batch_size").toDouble(config_.value("batch_size").toDouble());
    started_at_ = event.time();
    if (!clock_origin_.isValid())
      clock_origin_ = QDateTime::fromString(started_at_, Qt::ISODateWithMs);
    epochs_ = config_.value("epochs").toInt();
    status_ = Status::running;
    // A new segment of the run (a resume): its own pace.
    first_batch_time_ = last_batch_time_ = QDateTime();
    epoch_seconds_.clear();
  } else if (name == "epoch_started") {
    epoch_ = f.value("epoch").toInt();
    epochs_ = f.value("epochs").toInt(epochs_);
    steps_per_epoch_ = f.value("steps").toInt();
    batch_ = f.value("resumed_at_batch").toInt();
    epoch_resumed_at_ = batch_;
    if (epoch_ <= last_epoch_ended_) {  // a resume redoes this epoch: the epochs from it give way
      for (auto& series : epoch_points_) drop_from(series, epoch_);
      last_epoch_ended_ = epoch_ - 1;
      last_epoch_logs_ = epoch_logs_.value(last_epoch_ended_);
    }
    // Each epoch starts its means afresh. A resumed epoch continues means over the batches done
    // before the interruption (all of them full batches); its first batch shows the running mean.
    samples_in_epoch_ = static_cast<double>(batch_) * batch_size_;
    means_known_ = false;
    previous_means_ = {};
    status_ = Status::running;
  } else if (name == "batch_ended") {
    on_batch_ended(f, event.time());
  } else if (name == "epoch_ended") {
    const int before_epoch = last_epoch_ended_;
    epoch_ = f.value("epoch").toInt();
    last_epoch_ended_ = epoch_;
    if (epoch_ <= before_epoch)  // a resumed run redoes this epoch (see on_batch_ended)
      for (auto& series : epoch_points_) drop_from(series, epoch_);
    const QJsonObject logs = f.value("logs").toObject();
    last_epoch_logs_ = logs;
    epoch_logs_[epoch_] = logs;
    for (auto it = logs.begin(); it != logs.end(); ++it) {
      if (!it.value().isDouble()) continue;
      note_metric(it.key());
      epoch_points_[it.key()].push_back({static_cast<double>(epoch_), it.value().toDouble()});
      // On the step axis, validation values sit at the step that ended their epoch.
      if (it.key().startsWith("val_"))
        batch_points_[it.key()].push_back({static_cast<double>(step_), it.value().toDouble()});
    }
    if (auto lr = number(f.value("lr"))) {
      lr_ = lr;
      epoch_points_["lr"].push_back({static_cast<double>(epoch_), *lr});
    }
    if (auto sps = number(f.value("samples_per_sec")))
      epoch_points_["samples_per_sec"].push_back({static_cast<double>(epoch_), *sps});
    if (auto scale = number(f.value("loss_scale")))
      epoch_points_["loss_scale"].push_back({static_cast<double>(epoch_), *scale});
    // A resumed epoch ran only its remaining batches: its time as a whole epoch's, so that the
    // ETA's pace is not twice too fast.
    if (auto seconds = number(f.value("seconds")); seconds && *seconds > 0) {
      const int ran = steps_per_epoch_ - epoch_resumed_at_;
      epoch_seconds_.push_back(ran > 0 && epoch_resumed_at_ > 0 ? *seconds * steps_per_epoch_ / ran
                                                                : *seconds);
    }
  } else if (name == "checkpoint_saved") {
    CheckpointRecord record = checkpoint_record(f);
    checkpoints_.push_back(record);
    Q_EMIT checkpoint_added(record);
    add_marker(name, marker_text(name, f), f);
  } else if (name == "replica_stats") {
    on_replica_stats(f);
  } else if (name == "device_stats") {
    const double x = f.value("step").toDouble();
    auto add = [&](const QString& device, const QJsonValue& percent) {
      if (!percent.isDouble()) return;  // unknown (no NVML, or the first CPU sample)
      if (!utilisation_devices_.contains(device)) utilisation_devices_.push_back(device);
      utilisation_[device].push_back({x, percent.toDouble()});
    };
    add("cpu", f.value("cpu").toObject().value("utilization_percent"));
    for (const QJsonValue& g : f.value("gpus").toArray()) {
      const QJsonObject gpu = g.toObject();
      add(QString("cuda:%1").arg(gpu.value("index").toInt()), gpu.value("utilization_percent"));
    }
  } else if (name == "early_stopping" || name == "reduce_lr_on_plateau" ||
             name == "backup_saved" || name == "backup_restored") {
    add_marker(name, marker_text(name, f), f);
  } else if (name == "stopped") {
    stop_reason_ = f.value("reason").toString();
    add_marker(name, marker_text(name, f), f);
  } else if (name == "run_finished") {
    stop_reason_ = f.value("stop_reason").toString(stop_reason_);
    status_ = f.value("interrupted").toBool() ? Status::stopped : Status::finished;
    if (status_ == Status::stopped && stop_reason_.isEmpty()) stop_reason_ = "interrupted";
  } else if (name == "run_failed") {
    status_ = Status::failed;
    error_ = f.value("error").toString();
  }
}

}  // namespace tandem::gui
