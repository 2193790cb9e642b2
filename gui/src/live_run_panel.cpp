#include "live_run_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QVBoxLayout>

namespace tandem::gui {

namespace {

// Train, validation; the overlaid run's train, validation.
const QColor kTrain("#1f77b4"), kVal("#ff7f0e"), kOtherTrain("#2ca02c"), kOtherVal("#9467bd");
const QList<QColor> kReplicaColors = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

}  // namespace

LiveRunPanel::LiveRunPanel(QWidget* parent)
    : QWidget(parent),
      title_(new QLabel("No run")),
      status_(new QLabel),
      progress_(new QProgressBar),
      stop_(new QPushButton("Stop")),
      axis_box_(new QComboBox),
      log_y_(new QCheckBox("Log y")),
      smoothing_slider_(new QSlider(Qt::Horizontal)),
      smoothing_label_(new QLabel),
      overlay_label_(new QLabel),
      clear_overlay_(new QPushButton("Remove overlay")),
      chart_area_(new QWidget),
      grid_(new QGridLayout(chart_area_)) {
  QFont title_font = title_->font();
  title_font.setPointSizeF(title_font.pointSizeF() * 1.3);
  title_font.setBold(true);
  title_->setFont(title_font);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setWordWrap(true);
  progress_->setFormat("epoch %p%");
  progress_->setMaximumWidth(220);
  stop_->setToolTip("Stop the run: the engine saves a resumable checkpoint and exits (Ctrl+.)");
  stop_action_ = new QAction("S&top (saves a checkpoint)", this);
  stop_action_->setShortcut(QKeySequence("Ctrl+."));
  set_stop_enabled(false);
  axis_box_->addItem("Per batch (step)");
  axis_box_->addItem("Per epoch");
  axis_box_->addItem("Wall time");
  log_y_->setToolTip("Log-scale y on every chart (a chart's right-click menu switches its own)");
  smoothing_slider_->setRange(0, 999);
  smoothing_slider_->setValue(600);
  smoothing_slider_->setMaximumWidth(220);
  smoothing_slider_->setToolTip("Smoothing of per-batch curves (TensorBoard's debiased EMA)");
  smoothing_label_->setMinimumWidth(40);
  overlay_label_->hide();
  clear_overlay_->hide();

  auto* header = new QHBoxLayout;
  auto* titles = new QVBoxLayout;
  titles->addWidget(title_);
  titles->addWidget(status_);
  header->addLayout(titles, 1);
  header->addWidget(progress_);
  header->addWidget(stop_);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("X axis:"));
  controls->addWidget(axis_box_);
  controls->addSpacing(16);
  controls->addWidget(new QLabel("Smoothing:"));
  controls->addWidget(smoothing_slider_);
  controls->addWidget(smoothing_label_);
  controls->addSpacing(16);
  controls->addWidget(log_y_);
  controls->addSpacing(16);
  controls->addWidget(overlay_label_);
  controls->addWidget(clear_overlay_);
  controls->addStretch(1);

  grid_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(chart_area_);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(header);
  layout->addLayout(controls);
  layout->addWidget(scroll, 1);

  connect(stop_action_, &QAction::triggered, this, &LiveRunPanel::stop_requested);
  connect(stop_, &QPushButton::clicked, stop_action_, &QAction::trigger);
  connect(axis_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_x_axis(static_cast<XAxis>(i)); });
  connect(log_y_, &QCheckBox::toggled, this, &LiveRunPanel::set_log_y);
  connect(smoothing_slider_, &QSlider::valueChanged, this,
          [this](int v) { set_smoothing(v / 1000.0); });
  connect(clear_overlay_, &QPushButton::clicked, this, [this] { set_overlay(nullptr); });
  connect(&timer_, &QTimer::timeout, this, &LiveRunPanel::refresh);
  timer_.start(250);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 3));
  update_header();
}

void LiveRunPanel::set_run(RunHistory* run, bool live) {
  run_ = run;
  live_ = live;
  layout_key_.clear();
  refresh();
}

void LiveRunPanel::set_overlay(RunHistory* other) {
  overlay_ = other;
  const bool on = other != nullptr;
  overlay_label_->setVisible(on);
  clear_overlay_->setVisible(on);
  if (on)
    overlay_label_->setText(QString("Compared with <b>%1</b> (dashed)")
                                .arg(QFileInfo(other->run_dir()).fileName().toHtmlEscaped()));
  layout_key_.clear();
  refresh();
}

void LiveRunPanel::set_x_axis(XAxis axis) {
  if (axis == axis_) return;
  axis_ = axis;
  axis_box_->setCurrentIndex(static_cast<int>(axis));
  layout_key_.clear();
  refresh();
}

void LiveRunPanel::set_smoothing(double weight) {
  smoothing_ = std::clamp(weight, 0.0, 0.999);
  const int v = static_cast<int>(std::lround(smoothing_ * 1000));
  if (smoothing_slider_->value() != v) smoothing_slider_->setValue(v);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 3));
  for (MetricChart* c : charts_) c->set_smoothing(axis_ != XAxis::epoch ? smoothing_ : 0);
}

void LiveRunPanel::set_log_y(bool on) {
  if (log_y_->isChecked() != on) log_y_->setChecked(on);  // comes back here through toggled
  for (MetricChart* c : charts_)
    c->set_y_scale(on ? MetricChart::YScale::log : MetricChart::YScale::linear);
}

void LiveRunPanel::choose_wall_unit() {
  double seconds = 0;
  for (const RunHistory* r : {run_.data(), overlay_.data()})
    if (r) seconds = std::max(seconds, r->elapsed_seconds());
  if (seconds < 3 * 60) {
    wall_unit_ = 1;
    wall_unit_name_ = "s";
  } else if (seconds < 3 * 3600) {
    wall_unit_ = 60;
    wall_unit_name_ = "min";
  } else {
    wall_unit_ = 3600;
    wall_unit_name_ = "h";
  }
}

void LiveRunPanel::set_stop_enabled(bool enabled) {
  stop_->setEnabled(enabled);
  stop_action_->setEnabled(enabled);
}

MetricChart* LiveRunPanel::chart(const QString& title) const {
  for (MetricChart* c : charts_)
    if (c->title() == title) return c;
  return nullptr;
}

QString LiveRunPanel::layout_key() const {
  QStringList parts;
  for (const RunHistory* r : {run_.data(), overlay_.data()}) {
    if (!r) {
      parts << "-";
      continue;
    }
    parts << r->metric_names().join(',') << QString::number(r->replica_labels().size())
          << QString::number(r->utilisation_devices().size());
  }
  parts << QString::number(static_cast<int>(axis_));
  if (axis_ == XAxis::wall_time) parts << wall_unit_name_;
  return parts.join('|');
}

void LiveRunPanel::rebuild_charts() {
  for (MetricChart* c : charts_) delete c;
  charts_.clear();
  if (!run_) return;
  const bool by_epoch = axis_ == XAxis::epoch;
  const bool wall = axis_ == XAxis::wall_time;
  const double unit = wall_unit_;
  const QString x_title = by_epoch ? "epoch" : wall ? "wall time (" + wall_unit_name_ + ")" : "step";
  // Step-indexed points on this panel's x axis (step, or wall time since the run began).
  auto on_x = [wall, unit](const RunHistory& r, QList<QPointF> step_points) {
    if (!wall) return step_points;
    QList<QPointF> timed = r.at_wall_time(step_points);
    for (QPointF& p : timed) p.setX(p.x() / unit);
    return timed;
  };
  auto step_to_x = [on_x](const RunHistory& r, qint64 step) {
    const QList<QPointF> p = on_x(r, {QPointF(static_cast<double>(step), 0)});
    return p.isEmpty() ? static_cast<double>(step) : p[0].x();
  };
  auto new_chart = [&](const QString& title, bool per_step_only) {
    auto* chart = new MetricChart(title, per_step_only && by_epoch ? "step" : x_title, nullptr,
                                  by_epoch && !per_step_only);
    if (per_step_only || !by_epoch)
      chart->set_markers(run_, false, step_to_x);
    else
      chart->set_markers(run_, true);
    return chart;
  };

  QStringList metrics = run_->metric_names();
  if (overlay_)
    for (const QString& m : overlay_->metric_names())
      if (!metrics.contains(m)) metrics << m;
  // The loss first, then the metrics in the order the engine reports them.
  if (metrics.removeAll("loss") > 0) metrics.prepend("loss");

  auto series_of = [by_epoch, on_x](const QString& key) {
    return [key, by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series(key) : on_x(r, r.batch_series(key));
    };
  };
  auto lines_for = [&](const QString& key, const QString& label, bool smoothed) {
    QList<ChartLine> lines;
    const bool val = key.startsWith("val_");
    lines.push_back({run_, label, val ? kVal : kTrain, false, smoothed && !val, series_of(key)});
    if (overlay_)
      lines.push_back({overlay_, label + " (overlay)", val ? kOtherVal : kOtherTrain, true,
                       smoothed && !val, series_of(key)});
    return lines;
  };

  for (const QString& metric : metrics) {
    auto* chart = new_chart(metric, false);
    QList<ChartLine> lines = lines_for(metric, "train", true);
    lines.append(lines_for("val_" + metric, "validation", false));
    chart->set_lines(lines);
    charts_.push_back(chart);
  }
  {
    auto* chart = new_chart("learning rate", false);
    QList<ChartLine> lines;
    auto lr = [by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series("lr") : on_x(r, r.learning_rate_series());
    };
    lines.push_back({run_, "lr", kTrain, false, false, lr});
    if (overlay_) lines.push_back({overlay_, "lr (overlay)", kOtherTrain, true, false, lr});
    chart->set_lines(lines);
    charts_.push_back(chart);
  }
  {
    auto* chart = new_chart("samples/s", false);
    QList<ChartLine> lines;
    auto sps = [by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series("samples_per_sec") : on_x(r, r.samples_per_sec_series());
    };
    lines.push_back({run_, "samples/s", kTrain, false, false, sps});
    if (overlay_) lines.push_back({overlay_, "samples/s (overlay)", kOtherTrain, true, false, sps});
    chart->set_lines(lines);
    charts_.push_back(chart);
  }
  if (!run_->utilisation_devices().isEmpty()) {
    auto* chart = new_chart("device utilisation (%)", true);
    QList<ChartLine> lines;
    const QStringList devices = run_->utilisation_devices();
    for (int i = 0; i < devices.size(); ++i)
      lines.push_back(
          {run_, devices[i], kReplicaColors[i % kReplicaColors.size()], false, false,
           [device = devices[i], on_x](const RunHistory& r) {
             return on_x(r, r.utilisation(device));
           }});
    chart->set_lines(lines);
    charts_.push_back(chart);
  }
  if (!run_->replica_labels().isEmpty()) {
    auto* chart = new_chart("replica step time (ms)", true);
    QList<ChartLine> lines;
    const QStringList labels = run_->replica_labels();
    for (int i = 0; i < labels.size(); ++i)
      lines.push_back({run_, "replica " + labels[i], kReplicaColors[i % kReplicaColors.size()],
                       false, true,
                       [i, on_x](const RunHistory& r) { return on_x(r, r.replica_step_ms(i)); }});
    chart->set_lines(lines);
    charts_.push_back(chart);
  }
  const int columns = 2;
  for (int i = 0; i < charts_.size(); ++i) {
    charts_[i]->setMinimumHeight(260);
    charts_[i]->set_smoothing(by_epoch ? 0 : smoothing_);
    if (log_y_->isChecked()) charts_[i]->set_y_scale(MetricChart::YScale::log);
    grid_->addWidget(charts_[i], i / columns, i % columns);
  }
}

void LiveRunPanel::refresh() {
  if (axis_ == XAxis::wall_time) choose_wall_unit();
  const QString key = layout_key();
  if (key != layout_key_) {
    layout_key_ = key;
    rebuild_charts();
  }
  for (MetricChart* c : charts_) c->refresh();
  update_header();
}

QString LiveRunPanel::status_line() const {
  return status_->text();
}

void LiveRunPanel::update_header() {
  if (!run_) {
    title_->setText("No run");
    status_->setText("Start a run from the Launch panel, or open one from the Runs panel.");
    progress_->setValue(0);
    set_stop_enabled(false);
    return;
  }
  title_->setText(run_->name().isEmpty() ? QString("Run") : run_->name());
  QStringList parts;
  parts << run_->status_text();
  if (run_->world_size() > 1)
    parts << QString("%1 processes × %2").arg(run_->world_size()).arg(run_->device_plan());
  else if (!run_->device_plan().isEmpty())
    parts << run_->device_plan();
  if (run_->epochs() > 0) parts << QString("epoch %1/%2").arg(run_->epoch()).arg(run_->epochs());
  parts << QString("step %1").arg(run_->step());
  if (auto eta = run_->eta_seconds()) parts << "ETA " + format_duration(*eta);
  const QLocale locale;
  if (auto sps = run_->samples_per_sec())
    parts << QString("%1 samples/s").arg(locale.toString(*sps, 'f', 0));
  if (auto lr = run_->learning_rate()) parts << QString("lr %1").arg(*lr, 0, 'g', 4);
  const QJsonObject logs = run_->last_epoch_logs();
  for (const char* key : {"loss", "val_loss", "accuracy", "val_accuracy"})
    if (logs.value(key).isDouble())
      parts << QString("%1 %2").arg(key).arg(logs.value(key).toDouble(), 0, 'f', 4);
  status_->setText(parts.join("  ·  "));
  const int steps = run_->steps_per_epoch();
  progress_->setRange(0, std::max(steps, 1));
  progress_->setValue(std::min(run_->batch(), std::max(steps, 1)));
  set_stop_enabled(live_ && run_->status() == RunHistory::Status::running);
}

}  // namespace tandem::gui
