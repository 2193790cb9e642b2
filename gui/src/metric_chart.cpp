#include "metric_chart.hpp"

#include <QChart>
#include <QCursor>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

#include "series_math.hpp"

namespace tandem::gui {

namespace {

constexpr int kPointsVisibleBelow = 40;

void set_range_with_round_ticks(QValueAxis* axis, double low, double high) {
  axis->setRange(low, high);
  const double rough = (high - low) / 5;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= rough) {
      step = m * power;
      break;
    }
  axis->setTickType(QValueAxis::TicksDynamic);
  axis->setTickAnchor(0);
  axis->setTickInterval(step);
}

}  // namespace

MetricChart::MetricChart(const QString& title, const QString& x_title, QWidget* parent)
    : QChartView(parent),
      title_(title),
      x_axis_(new QValueAxis),
      y_axis_(new QValueAxis),
      markers_(new QScatterSeries) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setAnimationOptions(QChart::NoAnimation);
  x_axis_->setTitleText(x_title);
  x_axis_->setLabelFormat("%g");
  y_axis_->setLabelFormat("%.4g");
  chart->addAxis(x_axis_, Qt::AlignBottom);
  chart->addAxis(y_axis_, Qt::AlignLeft);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(260, 200);
  // Checkpoints and callback decisions: small grey triangles along the top edge.
  markers_->setMarkerShape(QScatterSeries::MarkerShapeTriangle);
  markers_->setMarkerSize(9);
  markers_->setColor(QColor("#555555"));
  markers_->setBorderColor(Qt::transparent);
  chart->addSeries(markers_);
  markers_->attachAxis(x_axis_);
  markers_->attachAxis(y_axis_);
  connect(markers_, &QScatterSeries::hovered, this, [this](const QPointF& point, bool entered) {
    if (entered)
      QToolTip::showText(QCursor::pos(), marker_text_at(point.x()), this);
    else
      QToolTip::hideText();
  });
}

void MetricChart::set_markers(QPointer<RunHistory> run, bool by_epoch) {
  marker_run_ = run;
  markers_by_epoch_ = by_epoch;
  refresh(true);
}

QString MetricChart::marker_text_at(double x) const {
  const auto it = marker_texts_.constFind(x);
  if (it == marker_texts_.constEnd()) return {};
  return QString("%1 %2\n%3")
      .arg(markers_by_epoch_ ? "epoch" : "step")
      .arg(x, 0, 'g', 12)
      .arg(it->join('\n'));
}

void MetricChart::place_markers() {
  marker_texts_.clear();
  if (const RunHistory* run = marker_run_.data())
    for (const RunMarker& m : run->markers())
      marker_texts_[markers_by_epoch_ ? m.epoch : static_cast<double>(m.step)] << m.text;
  QList<QPointF> points;
  // Just inside the top edge, so that the whole triangle shows.
  const double top = y_axis_->max() - 0.04 * (y_axis_->max() - y_axis_->min());
  for (auto it = marker_texts_.constBegin(); it != marker_texts_.constEnd(); ++it)
    if (it.key() >= x_axis_->min() && it.key() <= x_axis_->max()) points.push_back({it.key(), top});
  markers_->replace(points);
}

void MetricChart::set_lines(const QList<ChartLine>& lines) {
  for (Slot& s : lines_) {
    if (s.raw) {
      chart()->removeSeries(s.raw);
      delete s.raw;
    }
    chart()->removeSeries(s.main);
    delete s.main;
  }
  lines_.clear();
  revisions_.clear();
  for (const ChartLine& line : lines) {
    Slot slot;
    slot.line = line;
    slot.main = new QLineSeries;
    slot.main->setName(line.label);
    QPen pen(line.color);
    pen.setWidthF(1.8);
    if (line.dashed) pen.setStyle(Qt::DashLine);
    slot.main->setPen(pen);
    if (line.smoothed) {
      slot.raw = new QLineSeries;
      QColor faint = line.color;
      faint.setAlphaF(0.25);
      QPen raw_pen(faint);
      raw_pen.setWidthF(1.0);
      if (line.dashed) raw_pen.setStyle(Qt::DashLine);
      slot.raw->setPen(raw_pen);
      chart()->addSeries(slot.raw);
      slot.raw->attachAxis(x_axis_);
      slot.raw->attachAxis(y_axis_);
    }
    chart()->addSeries(slot.main);
    slot.main->attachAxis(x_axis_);
    slot.main->attachAxis(y_axis_);
    lines_.push_back(slot);
    revisions_.push_back(-1);
  }
  // Only the main lines get a legend entry (not the faint raw lines, not the markers).
  for (QLegendMarker* marker : chart()->legend()->markers())
    marker->setVisible(marker->series()->name().size() > 0);
  refresh(true);
}

void MetricChart::set_smoothing(double weight) {
  if (weight == smoothing_) return;
  smoothing_ = weight;
  refresh(true);
}

int MetricChart::max_drawn_points() const {
  return std::max(200, 2 * std::max(width(), 400));
}

void MetricChart::refresh(bool force) {
  bool changed = force;
  if (const RunHistory* run = marker_run_.data(); run && run->revision() != marker_revision_) {
    marker_revision_ = run->revision();
    changed = true;
  }
  for (qsizetype i = 0; i < lines_.size(); ++i) {
    const RunHistory* run = lines_[i].line.run.data();
    const qint64 revision = run ? run->revision() : -2;
    if (revision != revisions_[i]) changed = true;
    revisions_[i] = revision;
  }
  if (!changed) return;
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
  double y_min = x_min, y_max = -x_min;
  const int max_points = max_drawn_points();
  for (Slot& slot : lines_) {
    const RunHistory* run = slot.line.run.data();
    const QList<QPointF> full = run ? slot.line.points(*run) : QList<QPointF>{};
    slot.history = full.size();
    const bool smoothing = slot.line.smoothed && smoothing_ > 0;
    const QList<QPointF> shown = decimate(smoothing ? smooth(full, smoothing_) : full, max_points);
    slot.main->replace(shown);
    // A series of a few points (per epoch, a short run, device samples) shows them: a single
    // point would draw no line at all.
    slot.main->setPointsVisible(shown.size() <= kPointsVisibleBelow);
    if (slot.raw) slot.raw->replace(smoothing ? decimate(full, max_points) : QList<QPointF>{});
    for (const QPointF& p : smoothing ? decimate(full, max_points) : shown) {
      if (!std::isfinite(p.y())) continue;
      x_min = std::min(x_min, p.x());
      x_max = std::max(x_max, p.x());
      y_min = std::min(y_min, p.y());
      y_max = std::max(y_max, p.y());
    }
  }
  if (!std::isfinite(x_min)) {
    x_axis_->setRange(0, 1);
    y_axis_->setRange(0, 1);
    place_markers();
    return;
  }
  if (x_max <= x_min) x_max = x_min + 1;
  double pad = (y_max - y_min) * 0.05;
  if (pad <= 0) pad = std::max(std::abs(y_max) * 0.05, 1e-6);
  // The data fills the plot; ticks sit at round values (1, 2 or 5 times a power of ten). A
  // quantity that is never negative keeps 0 as its floor.
  set_range_with_round_ticks(x_axis_, x_min, x_max);
  const double low = y_min >= 0 ? std::max(0.0, y_min - pad) : y_min - pad;
  set_range_with_round_ticks(y_axis_, low, y_max + pad);
  place_markers();
}

int MetricChart::drawn_points(int line) const {
  return static_cast<int>(lines_.at(line).main->count());
}

qsizetype MetricChart::history_points(int line) const {
  return lines_.at(line).history;
}

QLineSeries* MetricChart::series(int line) const {
  return lines_.at(line).main;
}

}  // namespace tandem::gui
