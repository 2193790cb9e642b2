#include "live_run_panel.hpp"

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
          [this](int i) { set_x_axis(i == 0 ? XAxis::step : XAxis::epoch); });
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
  axis_box_->setCurrentIndex(axis == XAxis::step ? 0 : 1);
  layout_key_.clear();
  refresh();
}

void LiveRunPanel::set_smoothing(double weight) {
  smoothing_ = std::clamp(weight, 0.0, 0.999);
  const int v = static_cast<int>(std::lround(smoothing_ * 1000));
  if (smoothing_slider_->value() != v) smoothing_slider_->setValue(v);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 3));
  for (MetricChart* c : charts_) c->set_smoothing(axis_ == XAxis::step ? smoothing_ : 0);
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
  return parts.join('|');
}

void LiveRunPanel::rebuild_charts() {
  for (MetricChart* c : charts_) delete c;
  charts_.clear();
  if (!run_) return;
  const bool by_step = axis_ == XAxis::step;
  const QString x_title = by_step ? "step" : "epoch";

  QStringList metrics = run_->metric_names();
  if (overlay_)
    for (const QString& m : overlay_->metric_names())
      if (!metrics.contains(m)) metrics << m;
  // The loss first, then the metrics in the order the engine reports them.
  if (metrics.removeAll("loss") > 0) metrics.prepend("loss");

  auto series_of = [by_step](const QString& key) {
    return [key, by_step](const RunHistory& r) {
      return by_step ? r.batch_series(key) : r.epoch_series(key);
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
    auto* chart = new MetricChart(metric, x_title);
    QList<ChartLine> lines = lines_for(metric, "train", true);
    lines.append(lines_for("val_" + metric, "validation", false));
    chart->set_lines(lines);
    chart->set_markers(run_, !by_step);
    charts_.push_back(chart);
  }
  {
    auto* chart = new MetricChart("learning rate", x_title);
    QList<ChartLine> lines;
    auto lr = [by_step](const RunHistory& r) {
      return by_step ? r.learning_rate_series() : r.epoch_series("lr");
    };
    lines.push_back({run_, "lr", kTrain, false, false, lr});
    if (overlay_) lines.push_back({overlay_, "lr (overlay)", kOtherTrain, true, false, lr});
    chart->set_lines(lines);
    chart->set_markers(run_, !by_step);
    charts_.push_back(chart);
  }
  {
    auto* chart = new MetricChart("samples/s", x_title);
    QList<ChartLine> lines;
    auto sps = [by_step](const RunHistory& r) {
      return by_step ? r.samples_per_sec_series() : r.epoch_series("samples_per_sec");
    };
    lines.push_back({run_, "samples/s", kTrain, false, false, sps});
    if (overlay_) lines.push_back({overlay_, "samples/s (overlay)", kOtherTrain, true, false, sps});
    chart->set_lines(lines);
    chart->set_markers(run_, !by_step);
    charts_.push_back(chart);
  }
  if (!run_->utilisation_devices().isEmpty()) {
    auto* chart = new MetricChart("device utilisation (%)", "step");
    QList<ChartLine> lines;
    const QStringList devices = run_->utilisation_devices();
    for (int i = 0; i < devices.size(); ++i)
      lines.push_back(
          {run_, devices[i], kReplicaColors[i % kReplicaColors.size()], false, false,
           [device = devices[i]](const RunHistory& r) { return r.utilisation(device); }});
    chart->set_lines(lines);
    chart->set_markers(run_, false);  // per step whatever the axis choice
    charts_.push_back(chart);
  }
  if (!run_->replica_labels().isEmpty()) {
    auto* chart = new MetricChart("replica step time (ms)", "step");
    QList<ChartLine> lines;
    const QStringList labels = run_->replica_labels();
    for (int i = 0; i < labels.size(); ++i)
      lines.push_back({run_, "replica " + labels[i], kReplicaColors[i % kReplicaColors.size()],
                       false, true, [i](const RunHistory& r) { return r.replica_step_ms(i); }});
    chart->set_lines(lines);
    chart->set_markers(run_, false);  // per step whatever the axis choice
    charts_.push_back(chart);
  }
  const int columns = 2;
  for (int i = 0; i < charts_.size(); ++i) {
    charts_[i]->setMinimumHeight(260);
    charts_[i]->set_smoothing(by_step ? smoothing_ : 0);
    grid_->addWidget(charts_[i], i / columns, i % columns);
  }
}

void LiveRunPanel::refresh() {
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
