#include "live_run_panel.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>

namespace tandem::gui {

namespace {

// One run: train, validation. Compared runs, replicas, devices: one colour each (Tableau 10).
const QColor kTrain("#1f77b4"), kVal("#ff7f0e");
const QList<QColor> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const QList<QColor>& kReplicaColors = kPalette;

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
      compare_label_(new QLabel),
      stop_comparing_(new QPushButton("Stop comparing")),
      comparison_(new RunComparisonTable),
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
  compare_label_->hide();
  compare_label_->setTextFormat(Qt::RichText);
  compare_label_->setWordWrap(true);
  stop_comparing_->hide();
  stop_comparing_->setToolTip("Show the first run alone again");
  comparison_->hide();

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
  auto* hint = new QLabel(
      "Drag: zoom · Ctrl+wheel: zoom x · Shift+drag: pan · double-click: "
      "all · right-click: log scale, export");
  hint->setEnabled(false);  // secondary text, in the palette's disabled shade
  hint->setWordWrap(true);  // wraps in a narrow window rather than widening it
  hint->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  controls->addWidget(hint, 1);
  // While comparing: which runs, in which colours (wraps rather than widening the window).
  auto* comparing = new QHBoxLayout;
  comparing->addWidget(compare_label_, 1);
  comparing->addWidget(stop_comparing_, 0, Qt::AlignTop);

  grid_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(chart_area_);

  // While comparing, the hyperparameter table sits above the charts (the user sets the split).
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(comparison_);
  split->addWidget(scroll);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 3);
  split->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(header);
  layout->addLayout(controls);
  layout->addLayout(comparing);
  layout->addWidget(split, 1);

  connect(stop_action_, &QAction::triggered, this, &LiveRunPanel::stop_requested);
  connect(stop_, &QPushButton::clicked, stop_action_, &QAction::trigger);
  connect(axis_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_x_axis(static_cast<XAxis>(i)); });
  connect(log_y_, &QCheckBox::toggled, this, &LiveRunPanel::set_log_y);
  connect(smoothing_slider_, &QSlider::valueChanged, this,
          [this](int v) { set_smoothing(v / 1000.0); });
  connect(stop_comparing_, &QPushButton::clicked, this, [this] { set_compared({}); });
  connect(&timer_, &QTimer::timeout, this, &LiveRunPanel::refresh);
  timer_.start(250);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 3));
  update_header();
}

void LiveRunPanel::set_run(RunHistory* run, bool live) {
  run_ = run;
  live_ = live;
  compared_.clear();  // a comparison never outlives the run it was made with
  update_comparison();
  layout_key_.clear();
  refresh();
}

void LiveRunPanel::set_compared(const QList<RunHistory*>& others) {
  compared_.clear();
  for (RunHistory* r : others)
    if (r && r != run_) compared_.push_back(r);
  update_comparison();
  layout_key_.clear();
  refresh();
}

QList<RunHistory*> LiveRunPanel::compared() const {
  QList<RunHistory*> out;
  for (const QPointer<RunHistory>& r : compared_)
    if (r) out << r.data();
  return out;
}

QList<RunHistory*> LiveRunPanel::shown_runs() const {
  QList<RunHistory*> out;
  if (run_) out << run_.data();
  return out + compared();
}

QColor LiveRunPanel::run_color(int k) {
  return kPalette[k % kPalette.size()];
}

namespace {

// Labels of `runs`: the name where it is unique among them; else (runs of one config share its
// name) the start time, local, after the name unless `short_form`. Labels still the same (copies
// of a run) are numbered from the second on.
QStringList labels_of(const QList<RunHistory*>& runs, bool short_form) {
  QStringList names;
  for (const RunHistory* r : runs) names << (r->name().isEmpty() ? QString("run") : r->name());
  QStringList out;
  for (qsizetype i = 0; i < runs.size(); ++i) {
    const QDateTime started = QDateTime::fromString(runs[i]->started_at(), Qt::ISODateWithMs);
    if (names.count(names[i]) == 1 || !started.isValid()) {
      out << names[i];
      continue;
    }
    const QString time = started.toLocalTime().toString("HH:mm:ss");
    out << (short_form ? time : names[i] + " " + time);
  }
  for (qsizetype i = 0; i < out.size(); ++i)
    if (out.indexOf(out[i]) < i) out[i] += QString(" #%1").arg(i + 1);
  return out;
}

}  // namespace

QStringList LiveRunPanel::run_labels() const {
  return labels_of(shown_runs(), false);
}

QStringList LiveRunPanel::legend_labels() const {
  return labels_of(shown_runs(), true);
}

// The comparison's header line and table, from the runs as they are now.
void LiveRunPanel::update_comparison() {
  const bool on = comparing() && run_;
  compare_label_->setVisible(on);
  stop_comparing_->setVisible(on);
  comparison_->setVisible(on);
  if (!on) return;
  const QList<RunHistory*> runs = shown_runs();
  const QStringList labels = run_labels();
  QStringList names;
  QList<ComparedRun> rows;
  qint64 revision = 0;
  for (qsizetype k = 0; k < runs.size(); ++k) {
    const RunHistory* r = runs[k];
    names << QString("<span style='color:%1'>&#9632;</span> %2")
                 .arg(run_color(static_cast<int>(k)).name(), labels[k].toHtmlEscaped());
    rows << ComparedRun{labels[k],        run_color(static_cast<int>(k)),
                        r->config(),      r->last_epoch_logs(),
                        r->status_text(), r->epoch(),
                        r->epochs()};
    revision += r->revision();
  }
  compare_label_->setText(
      QString("Comparing %1 runs: %2 (validation dashed)").arg(runs.size()).arg(names.join(", ")));
  comparison_->set_runs(rows);
  // The table as tall as its rows (the user may make it smaller); the charts get the rest.
  comparison_->setMaximumHeight(comparison_->content_height());
  compared_revision_ = revision;
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
  for (const RunHistory* r : shown_runs()) seconds = std::max(seconds, r->elapsed_seconds());
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
  for (const RunHistory* r : shown_runs()) {
    parts << r->metric_names().join(',') << QString::number(r->replica_labels().size())
          << QString::number(r->utilisation_devices().size())
          << QString::number(r->loss_scale().has_value());
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
  const QString x_title = by_epoch ? "epoch"
                          : wall   ? "wall time (" + wall_unit_name_ + ")"
                                   : "step";
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

  const QList<RunHistory*> runs = shown_runs();
  const QStringList labels = legend_labels();
  const bool comparing = runs.size() > 1;
  QStringList metrics;
  for (const RunHistory* r : runs)
    for (const QString& m : r->metric_names())
      if (!metrics.contains(m)) metrics << m;
  // The loss first, then the metrics in the order the engine reports them.
  if (metrics.removeAll("loss") > 0) metrics.prepend("loss");

  auto series_of = [by_epoch, on_x](const QString& key) {
    return [key, by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series(key) : on_x(r, r.batch_series(key));
    };
  };
  // One run: train blue, validation orange. Compared runs: a colour per run, validation dashed.
  auto metric_lines = [&](const QString& metric) {
    QList<ChartLine> lines;
    for (qsizetype k = 0; k < runs.size(); ++k) {
      const QColor color = run_color(static_cast<int>(k));
      // Compared: the legend names each run once (its train line; "validation dashed" is said
      // above the charts), in its short form so that it does not squeeze the chart.
      lines.push_back({runs[k], comparing ? labels[k] : "train", comparing ? color : kTrain, false,
                       true, series_of(metric)});
      lines.push_back({runs[k], comparing ? labels[k] + " val" : "validation",
                       comparing ? color : kVal, comparing, false, series_of("val_" + metric),
                       !comparing});
    }
    return lines;
  };
  // A quantity with one line per run.
  auto run_lines = [&](const QString& label,
                       const std::function<QList<QPointF>(const RunHistory&)>& points) {
    QList<ChartLine> lines;
    for (qsizetype k = 0; k < runs.size(); ++k)
      lines.push_back({runs[k], comparing ? labels[k] : label,
                       comparing ? run_color(static_cast<int>(k)) : kTrain, false, false, points});
    return lines;
  };

  for (const QString& metric : metrics) {
    auto* chart = new_chart(metric, false);
    chart->set_lines(metric_lines(metric));
    charts_.push_back(chart);
  }
  {
    auto* chart = new_chart("learning rate", false);
    auto lr = [by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series("lr") : on_x(r, r.learning_rate_series());
    };
    chart->set_lines(run_lines("lr", lr));
    charts_.push_back(chart);
  }
  {
    auto* chart = new_chart("samples/s", false);
    auto sps = [by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series("samples_per_sec") : on_x(r, r.samples_per_sec_series());
    };
    chart->set_lines(run_lines("samples/s", sps));
    charts_.push_back(chart);
  }
  // Dynamic loss scaling: the scale moves by powers of two, so on a log axis.
  if (std::any_of(runs.begin(), runs.end(),
                  [](const RunHistory* r) { return r->loss_scale().has_value(); })) {
    auto* chart = new_chart("loss scale", false);
    auto scale = [by_epoch, on_x](const RunHistory& r) {
      return by_epoch ? r.epoch_series("loss_scale") : on_x(r, r.loss_scale_series());
    };
    chart->set_lines(run_lines("loss scale", scale));
    chart->set_y_scale(MetricChart::YScale::log);
    charts_.push_back(chart);
  }
  if (!run_->utilisation_devices().isEmpty()) {
    auto* chart = new_chart("device utilisation (%)", true);
    QList<ChartLine> lines;
    const QStringList devices = run_->utilisation_devices();
    for (int i = 0; i < devices.size(); ++i)
      lines.push_back({run_, devices[i], kReplicaColors[i % kReplicaColors.size()], false, false,
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

void LiveRunPanel::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() != QEvent::PaletteChange) return;
  // Not now: Qt is still handing the palette to the charts this would delete.
  layout_key_.clear();
  QMetaObject::invokeMethod(this, &LiveRunPanel::refresh, Qt::QueuedConnection);
}

void LiveRunPanel::refresh() {
  if (axis_ == XAxis::wall_time) choose_wall_unit();
  const QString key = layout_key();
  if (key != layout_key_) {
    layout_key_ = key;
    rebuild_charts();
  }
  for (MetricChart* c : charts_) c->refresh();
  if (comparing()) {
    qint64 revision = 0;
    for (const RunHistory* r : shown_runs()) revision += r->revision();
    if (revision != compared_revision_) update_comparison();
  }
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
  QString plan = run_->device_plan();
  if (!run_->pipeline_text().isEmpty()) plan += " in " + run_->pipeline_text();
  if (run_->world_size() > 1)
    parts << QString("%1 processes × %2").arg(run_->world_size()).arg(plan);
  else if (!plan.isEmpty())
    parts << plan;
  if (run_->epochs() > 0) parts << QString("epoch %1/%2").arg(run_->epoch()).arg(run_->epochs());
  parts << QString("step %1").arg(run_->step());
  if (auto eta = run_->eta_seconds()) parts << "ETA " + format_duration(*eta);
  const QLocale locale;
  if (auto sps = run_->samples_per_sec())
    parts << QString("%1 samples/s").arg(locale.toString(*sps, 'f', 0));
  if (auto lr = run_->learning_rate()) parts << QString("lr %1").arg(*lr, 0, 'g', 4);
  if (auto scale = run_->loss_scale())
    parts << QString("loss scale %1 (%2 skipped)")
                 .arg(*scale, 0, 'g', 4)
                 .arg(run_->skipped_steps());
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
