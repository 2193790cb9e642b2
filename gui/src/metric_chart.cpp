#include "metric_chart.hpp"

#include <QChart>
#include <QContextMenuEvent>
#include <QCursor>
#include <QFileDialog>
#include <QFileInfo>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsTextItem>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QPainter>
#include <QPen>
#include <QRegularExpression>
#include <QRubberBand>
#include <QSaveFile>
#include <QScatterSeries>
#include <QSvgGenerator>
#include <QToolTip>
#include <QValueAxis>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "series_math.hpp"
#include "theme.hpp"

namespace tandem::gui {

namespace {

constexpr int kPointsVisibleBelow = 40;
constexpr int kMinDragPixels = 6;
constexpr double kWheelZoomPerNotch = 0.8;  // Ctrl+wheel: 20% closer per notch

bool x_less(const QPointF& p, double x) {
  return p.x() < x;
}

// Index of the point nearest to `x` (points in x order when `sorted`); -1 when empty.
qsizetype nearest_index(const QList<QPointF>& points, double x, bool sorted) {
  if (points.isEmpty()) return -1;
  if (!sorted) {
    qsizetype best = 0;
    for (qsizetype i = 1; i < points.size(); ++i)
      if (std::abs(points[i].x() - x) < std::abs(points[best].x() - x)) best = i;
    return best;
  }
  const auto it = std::lower_bound(points.begin(), points.end(), x, x_less);
  if (it == points.begin()) return 0;
  if (it == points.end()) return points.size() - 1;
  const qsizetype after = it - points.begin();
  return (x - points[after - 1].x() <= points[after].x() - x) ? after - 1 : after;
}

QList<QPointF> positive_only(const QList<QPointF>& points) {
  QList<QPointF> out;
  out.reserve(points.size());
  for (const QPointF& p : points)
    if (p.y() > 0) out.push_back(p);
  return out;
}

// A value as the read-out shows it: 5 significant digits, whole numbers without an exponent.
QString format_value(double v) {
  if (!std::isfinite(v)) return QString::number(v);
  if (std::abs(v) >= 1e4) return QString::number(v, 'f', 0);
  return QString::number(v, 'g', 5);
}

QString csv_field(const QString& text) {
  if (!text.contains(QRegularExpression("[\",\n\r]"))) return text;
  QString quoted = text;
  quoted.replace("\"", "\"\"");
  return "\"" + quoted + "\"";
}

// The range [low, high] scaled by `factor` about `at` (linear, or in log space).
ValueRange scaled(ValueRange r, double factor, double at, bool log) {
  if (log) {
    const double l = std::log10(r.low), h = std::log10(r.high), a = std::log10(at);
    return {std::pow(10.0, a + (l - a) * factor), std::pow(10.0, a + (h - a) * factor)};
  }
  return {at + (r.low - at) * factor, at + (r.high - at) * factor};
}

// Range and ticks changed together without a moment of thousands of ticks (an old small
// interval over a new wide range): fixed ticks while the range and interval change.
void set_axis(QValueAxis* axis, ValueRange range, const AxisTicks& ticks) {
  axis->setTickType(QValueAxis::TicksFixed);
  axis->setRange(range.low, range.high);
  axis->setTickInterval(ticks.interval);
  axis->setTickAnchor(0);
  axis->setLabelFormat(ticks.label_format());
  axis->setTickType(QValueAxis::TicksDynamic);
}

}  // namespace

MetricChart::MetricChart(const QString& title, const QString& x_title, QWidget* parent,
                         bool x_integers)
    : QChartView(parent),
      title_(title),
      x_title_(x_title),
      x_integers_(x_integers),
      x_axis_(new QValueAxis),
      y_linear_(new QValueAxis),
      y_log_(new QLogValueAxis(this)),
      markers_(new QScatterSeries),
      rubber_band_(new QRubberBand(QRubberBand::Rectangle, viewport())),
      cursor_line_(new QGraphicsLineItem),
      readout_back_(new QGraphicsRectItem),
      readout_text_(new QGraphicsTextItem) {
  auto* chart = new QChart;
  // In the shades of the application's palette (light or dark), set before anything is added.
  const bool dark = palette_is_dark();
  chart->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
  chart->setBackgroundBrush(palette().color(QPalette::Base));
  chart->setTitleBrush(palette().color(QPalette::Text));
  chart->legend()->setLabelColor(palette().color(QPalette::Text));
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setAnimationOptions(QChart::NoAnimation);
  x_axis_->setTitleText(x_title);
  y_log_->setBase(10);
  y_log_->setLabelFormat("%g");
  y_log_->setMinorTickCount(-1);
  chart->addAxis(x_axis_, Qt::AlignBottom);
  chart->addAxis(y_linear_, Qt::AlignLeft);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(260, 200);
  setMouseTracking(true);
  setToolTip(QString());
  // Checkpoints and callback decisions: small grey triangles along the top edge.
  markers_->setMarkerShape(QScatterSeries::MarkerShapeTriangle);
  markers_->setMarkerSize(9);
  markers_->setColor(semantic_colors().muted);
  markers_->setBorderColor(Qt::transparent);
  chart->addSeries(markers_);
  markers_->attachAxis(x_axis_);
  markers_->attachAxis(y_linear_);
  connect(markers_, &QScatterSeries::hovered, this, [this](const QPointF& point, bool entered) {
    if (entered)
      QToolTip::showText(QCursor::pos(), marker_text_at(point.x()), this);
    else
      QToolTip::hideText();
  });
  // The read-out, above everything, hidden until the cursor is over the plot.
  QPen cursor_pen(QColor(128, 128, 128, 160));
  cursor_pen.setStyle(Qt::DashLine);
  cursor_line_->setPen(cursor_pen);
  readout_back_->setPen(QPen(QColor(128, 128, 128, 200)));
  QColor back = palette().color(QPalette::ToolTipBase);
  back.setAlpha(235);
  readout_back_->setBrush(back);
  readout_text_->setDefaultTextColor(palette().color(QPalette::ToolTipText));
  for (QGraphicsItem* item :
       std::initializer_list<QGraphicsItem*>{cursor_line_, readout_back_, readout_text_}) {
    item->setZValue(1000);
    item->hide();
    scene()->addItem(item);
  }
  readout_text_->setZValue(1001);
  rubber_band_->hide();
  x_ticks_ = round_ticks(0, 1, 6, x_integers_);
  y_ticks_ = round_ticks(0, 1);
}

QAbstractAxis* MetricChart::y_axis() const {
  return y_scale_ == YScale::log ? static_cast<QAbstractAxis*>(y_log_)
                                 : static_cast<QAbstractAxis*>(y_linear_);
}

void MetricChart::set_markers(QPointer<RunHistory> run, bool by_epoch,
                              std::function<double(const RunHistory&, qint64)> x_of_step) {
  marker_run_ = run;
  markers_by_epoch_ = by_epoch;
  marker_x_of_step_ = std::move(x_of_step);
  refresh(true);
}

QString MetricChart::marker_text_at(double x) const {
  const auto it = marker_texts_.constFind(x);
  if (it == marker_texts_.constEnd()) return {};
  return QString("%1 %2\n%3").arg(x_title_, format_x(x), it->join('\n'));
}

void MetricChart::place_markers() {
  marker_texts_.clear();
  if (const RunHistory* run = marker_run_.data())
    for (const RunMarker& m : run->markers()) {
      const double x = markers_by_epoch_   ? m.epoch
                       : marker_x_of_step_ ? marker_x_of_step_(*run, m.step)
                                           : static_cast<double>(m.step);
      marker_texts_[x] << m.text;
    }
  QList<QPointF> points;
  // Just inside the top edge, so that the whole triangle shows.
  const double top = y_scale_ == YScale::log
                         ? y_view_.high / std::pow(y_view_.high / y_view_.low, 0.04)
                         : y_view_.high - 0.04 * (y_view_.high - y_view_.low);
  for (auto it = marker_texts_.constBegin(); it != marker_texts_.constEnd(); ++it)
    if (it.key() >= x_view_.low && it.key() <= x_view_.high) points.push_back({it.key(), top});
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
  auto add = [this](QLineSeries* series) {
    chart()->addSeries(series);
    series->attachAxis(x_axis_);
    series->attachAxis(y_axis());
  };
  // Raw lines first, so that every main line is drawn above every faint one.
  for (const ChartLine& line : lines) {
    Slot slot;
    slot.line = line;
    if (line.smoothed) {
      slot.raw = new QLineSeries;
      QColor faint = line.color;
      faint.setAlphaF(0.2);
      QPen raw_pen(faint);
      raw_pen.setWidthF(1.0);
      if (line.dashed) raw_pen.setStyle(Qt::DashLine);
      slot.raw->setPen(raw_pen);
      add(slot.raw);
    }
    lines_.push_back(slot);
    revisions_.push_back(-1);
  }
  for (Slot& slot : lines_) {
    slot.main = new QLineSeries;
    slot.main->setName(slot.line.label);
    QPen pen(slot.line.color);
    pen.setWidthF(1.8);
    if (slot.line.dashed) pen.setStyle(Qt::DashLine);
    slot.main->setPen(pen);
    add(slot.main);
  }
  // Only the main lines get a legend entry (not the faint raw lines, not the markers), and only
  // those that ask for one.
  bool any = false;
  for (QLegendMarker* marker : chart()->legend()->markers()) {
    const auto it = std::find_if(lines_.begin(), lines_.end(),
                                 [&](const Slot& s) { return s.main == marker->series(); });
    const bool shown = it != lines_.end() && it->line.in_legend;
    marker->setVisible(shown);
    any |= shown;
  }
  chart()->legend()->setVisible(any);
  refresh(true);
}

void MetricChart::set_smoothing(double weight) {
  if (weight == smoothing_) return;
  smoothing_ = weight;
  refresh(true);
}

void MetricChart::set_y_scale(YScale scale) {
  if (scale == y_scale_) return;
  // Emptied first: a log axis must never see a value <= 0 (redraw() fills them again).
  markers_->clear();
  for (Slot& slot : lines_) {
    if (slot.raw) slot.raw->clear();
    slot.main->clear();
  }
  QAbstractAxis* old_axis = y_axis();
  chart()->removeAxis(old_axis);  // detaches it from every series; the chart gives it back
  old_axis->setParent(this);
  y_scale_ = scale;
  chart()->addAxis(y_axis(), Qt::AlignLeft);
  markers_->attachAxis(y_axis());
  for (Slot& slot : lines_) {
    if (slot.raw) slot.raw->attachAxis(y_axis());
    slot.main->attachAxis(y_axis());
  }
  y_fixed_ = false;  // a y range of one scale means nothing on the other
  fit_view();
  redraw();
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
  fetch_data();
  fit_view();
  redraw();
}

void MetricChart::fetch_data() {
  for (Slot& slot : lines_) {
    const RunHistory* run = slot.line.run.data();
    slot.full = run ? slot.line.points(*run) : QList<QPointF>{};
    slot.sorted = std::is_sorted(slot.full.begin(), slot.full.end(),
                                 [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    slot.smoothed = smoothing_on(slot) ? smooth(slot.full, smoothing_) : slot.full;
  }
}

void MetricChart::fit_view() {
  const bool log = y_scale_ == YScale::log;
  auto usable = [log](const QPointF& p) { return std::isfinite(p.y()) && (!log || p.y() > 0); };
  if (!x_fixed_) {
    double low = std::numeric_limits<double>::infinity(), high = -low;
    for (const Slot& slot : lines_)
      for (const QPointF& p : slot.full)
        if (usable(p)) {
          low = std::min(low, p.x());
          high = std::max(high, p.x());
        }
    if (!std::isfinite(low))
      x_view_ = {0, 1};
    else if (high <= low)
      x_view_ = {low - 1, low + 1};
    else
      x_view_ = {low, high};
  }
  if (y_fixed_) return;
  // y fits the lines as drawn (smoothed) in the x range: a raw spike does not squash them.
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const Slot& slot : lines_)
    for (const QPointF& p : in_view(slot.smoothed, slot.sorted))
      if (usable(p) && p.x() >= x_view_.low && p.x() <= x_view_.high) {
        low = std::min(low, p.y());
        high = std::max(high, p.y());
      }
  if (!std::isfinite(low)) {
    y_view_ = log ? ValueRange{0.1, 10} : ValueRange{0, 1};
  } else if (log) {
    const double decades = std::log10(high / low);
    const double pad = decades > 1e-9 ? 0.05 * decades : 0.3;
    y_view_ = {low / std::pow(10.0, pad), high * std::pow(10.0, pad)};
  } else {
    y_view_ = padded_range(low, high);
  }
}

QList<QPointF> MetricChart::in_view(const QList<QPointF>& points, bool sorted) const {
  if (!sorted || points.isEmpty()) return points;
  auto first = std::lower_bound(points.begin(), points.end(), x_view_.low, x_less);
  auto last = std::upper_bound(points.begin(), points.end(), x_view_.high,
                               [](double x, const QPointF& p) { return x < p.x(); });
  // One point beyond each edge, so that the lines run to the edges.
  if (first != points.begin()) --first;
  if (last != points.end()) ++last;
  if (first == points.begin() && last == points.end()) return points;
  return QList<QPointF>(first, last);
}

void MetricChart::redraw() {
  const int max_points = max_drawn_points();
  const bool log = y_scale_ == YScale::log;
  auto drawable = [&](const QList<QPointF>& points, bool sorted) {
    const QList<QPointF> visible = in_view(points, sorted);
    return decimate(log ? positive_only(visible) : visible, max_points);
  };
  for (Slot& slot : lines_) {
    const QList<QPointF> shown = drawable(slot.smoothed, slot.sorted);
    slot.main->replace(shown);
    // A series of a few points (per epoch, a short run, device samples) shows them: a single
    // point would draw no line at all.
    slot.main->setPointsVisible(shown.size() <= kPointsVisibleBelow);
    if (slot.raw)
      slot.raw->replace(smoothing_on(slot) ? drawable(slot.full, slot.sorted) : QList<QPointF>{});
  }
  apply_ticks();
  place_markers();
  if (readout_x_) show_readout_at(*readout_x_);
}

void MetricChart::apply_ticks() {
  x_ticks_ = round_ticks(x_view_.low, x_view_.high, 6, x_integers_);
  set_axis(x_axis_, x_view_, x_ticks_);
  if (y_scale_ == YScale::log) {
    y_log_->setRange(y_view_.low, y_view_.high);
    return;
  }
  y_ticks_ = round_ticks(y_view_.low, y_view_.high, 5, false);
  set_axis(y_linear_, y_view_, y_ticks_);
}

void MetricChart::zoom_to(double x_low, double x_high, std::optional<ValueRange> y) {
  if (!(x_high > x_low)) return;
  x_view_ = {x_low, x_high};
  x_fixed_ = true;
  if (y && y->high > y->low && (y_scale_ == YScale::linear || y->low > 0)) {
    y_view_ = *y;
    y_fixed_ = true;
  } else {
    y_fixed_ = false;
  }
  fit_view();
  redraw();
}

void MetricChart::zoom_x(double factor, double x_at) {
  const ValueRange r = scaled(x_view_, factor, x_at, false);
  if (y_fixed_)
    zoom_to(r.low, r.high, y_view_);
  else
    zoom_to(r.low, r.high);
}

void MetricChart::reset_zoom() {
  x_fixed_ = y_fixed_ = false;
  fit_view();
  redraw();
}

QString MetricChart::format_x(double x) const {
  if (std::abs(x - std::round(x)) < 1e-9 && std::abs(x) < 1e15)
    return QString::number(static_cast<qint64>(std::llround(x)));
  return QString::number(x, 'g', 6);
}

QStringList MetricChart::readout_at(double x) const {
  // The cursor snaps to the nearest point of the first line that has data.
  std::optional<double> snapped;
  for (const Slot& slot : lines_)
    if (const qsizetype i = nearest_index(slot.smoothed, x, slot.sorted); i >= 0) {
      snapped = slot.smoothed[i].x();
      break;
    }
  if (!snapped) return {};
  QStringList out{x_title_ + " " + format_x(*snapped)};
  for (const Slot& slot : lines_) {
    const qsizetype i = nearest_index(slot.smoothed, *snapped, slot.sorted);
    if (i < 0) continue;
    const QPointF p = slot.smoothed[i];
    QString line = slot.line.label + " " + format_value(p.y());
    if (smoothing_on(slot)) line += " (raw " + format_value(slot.full[i].y()) + ")";
    if (y_scale_ == YScale::log && !(p.y() > 0)) line += " (not on a log scale)";
    if (p.x() != *snapped) line += " at " + format_x(p.x());
    out << line;
  }
  return out;
}

void MetricChart::show_readout_at(double x) {
  const QStringList lines = readout_at(x);
  if (lines.isEmpty()) {
    hide_readout();
    return;
  }
  readout_x_ = x;
  // The line of each series in its colour; the header plain.
  QString html = "<b>" + lines[0].toHtmlEscaped() + "</b>";
  int row = 1;
  for (const Slot& slot : lines_) {
    if (slot.smoothed.isEmpty() || row >= lines.size()) continue;
    html += QString("<br><span style='color:%1'>&#9632;</span> %2")
                .arg(slot.line.color.name(), lines[row++].toHtmlEscaped());
  }
  readout_text_->setHtml(html);
  const QRectF plot = chart()->plotArea();
  const double y_any = y_scale_ == YScale::log ? y_view_.high : y_view_.low;
  const double px = chart()->mapToPosition(QPointF(x, y_any), markers_).x();
  cursor_line_->setLine(px, plot.top(), px, plot.bottom());
  const QSizeF box = readout_text_->boundingRect().size();
  double left = px + 10;
  if (left + box.width() > plot.right()) left = px - 10 - box.width();
  left = std::max(left, plot.left());
  readout_text_->setPos(left, plot.top() + 4);
  readout_back_->setRect(QRectF(QPointF(left, plot.top() + 4), box));
  for (QGraphicsItem* item :
       std::initializer_list<QGraphicsItem*>{cursor_line_, readout_back_, readout_text_})
    item->show();
}

void MetricChart::hide_readout() {
  readout_x_.reset();
  cursor_line_->hide();
  readout_back_->hide();
  readout_text_->hide();
}

bool MetricChart::readout_visible() const {
  return readout_text_->isVisible();
}

QPointF MetricChart::value_at(const QPoint& widget_pos) const {
  return chart()->mapToValue(mapToScene(widget_pos), markers_);
}

QRectF MetricChart::plot_rect_in_widget() const {
  return mapFromScene(chart()->plotArea()).boundingRect();
}

void MetricChart::mousePressEvent(QMouseEvent* event) {
  const bool in_plot = plot_rect_in_widget().contains(event->position());
  const bool pan = event->button() == Qt::MiddleButton ||
                   (event->button() == Qt::LeftButton && event->modifiers() & Qt::ShiftModifier);
  if (in_plot && (pan || event->button() == Qt::LeftButton)) {
    drag_ = pan ? Drag::pan : Drag::zoom;
    drag_start_ = event->position().toPoint();
    pan_x_ = x_view_;
    pan_y_ = y_view_;
    if (drag_ == Drag::zoom) rubber_band_->setGeometry(QRect(drag_start_, QSize()));
    event->accept();
    return;
  }
  QChartView::mousePressEvent(event);
}

void MetricChart::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ == Drag::zoom) {
    rubber_band_->setGeometry(QRect(drag_start_, pos).normalized());
    rubber_band_->show();
    return;
  }
  if (drag_ == Drag::pan) {
    const QRectF plot = plot_rect_in_widget();
    const double dx = (pos.x() - drag_start_.x()) / plot.width();
    const double dy = (pos.y() - drag_start_.y()) / plot.height();
    const double x_span = pan_x_.high - pan_x_.low;
    x_view_ = {pan_x_.low - dx * x_span, pan_x_.high - dx * x_span};
    if (y_scale_ == YScale::log) {
      const double f = std::pow(pan_y_.high / pan_y_.low, dy);
      y_view_ = {pan_y_.low * f, pan_y_.high * f};
    } else {
      const double y_span = pan_y_.high - pan_y_.low;
      y_view_ = {pan_y_.low + dy * y_span, pan_y_.high + dy * y_span};
    }
    x_fixed_ = y_fixed_ = true;
    redraw();
    return;
  }
  QChartView::mouseMoveEvent(event);  // the markers' hover
  if (plot_rect_in_widget().contains(event->position()))
    show_readout_at(value_at(pos).x());
  else
    hide_readout();
}

void MetricChart::mouseReleaseEvent(QMouseEvent* event) {
  if (drag_ == Drag::none) {
    QChartView::mouseReleaseEvent(event);
    return;
  }
  if (drag_ == Drag::zoom) {
    rubber_band_->hide();
    const QRect band = QRect(drag_start_, event->position().toPoint()).normalized();
    if (band.width() >= kMinDragPixels) {
      const QPointF a = value_at(band.topLeft()), b = value_at(band.bottomRight());
      if (band.height() >= kMinDragPixels)
        zoom_to(a.x(), b.x(), ValueRange{b.y(), a.y()});
      else
        zoom_to(a.x(), b.x());
    }
  }
  drag_ = Drag::none;
}

void MetricChart::mouseDoubleClickEvent(QMouseEvent* event) {
  if (plot_rect_in_widget().contains(event->position())) {
    reset_zoom();
    return;
  }
  QChartView::mouseDoubleClickEvent(event);
}

void MetricChart::wheelEvent(QWheelEvent* event) {
  // A plain wheel scrolls the page of charts; Ctrl+wheel zooms.
  if (!(event->modifiers() & Qt::ControlModifier)) {
    event->ignore();
    return;
  }
  const double factor = std::pow(kWheelZoomPerNotch, event->angleDelta().y() / 120.0);
  const QPointF at = value_at(event->position().toPoint());
  if (event->modifiers() & Qt::ShiftModifier) {
    const ValueRange y = scaled(y_view_, factor, at.y(), y_scale_ == YScale::log);
    zoom_to(x_view_.low, x_view_.high, y);
  } else {
    zoom_x(factor, at.x());
  }
  event->accept();
}

void MetricChart::leaveEvent(QEvent* event) {
  hide_readout();
  QChartView::leaveEvent(event);
}

void MetricChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  redraw();  // decimation follows the width
}

QString MetricChart::ask_path(const QString& filter, const QString& suffix) {
  QString name = title_;
  name.replace(QRegularExpression("[^A-Za-z0-9_.-]+"), "_");
  return QFileDialog::getSaveFileName(this, "Save " + title_, name + suffix, filter);
}

void MetricChart::contextMenuEvent(QContextMenuEvent* event) {
  QMenu menu(this);
  QAction* reset = menu.addAction("Reset zoom (double-click)", this, &MetricChart::reset_zoom);
  reset->setEnabled(zoomed());
  QAction* log = menu.addAction("Log scale");
  log->setCheckable(true);
  log->setChecked(y_scale_ == YScale::log);
  connect(log, &QAction::toggled, this,
          [this](bool on) { set_y_scale(on ? YScale::log : YScale::linear); });
  menu.addSeparator();
  auto report = [this](const QString& error) {
    if (!error.isEmpty()) QMessageBox::warning(this, "Export failed", error);
  };
  menu.addAction("Save image as PNG…", this, [=, this] {
    if (const QString p = ask_path("PNG image (*.png)", ".png"); !p.isEmpty()) report(save_png(p));
  });
  menu.addAction("Save image as SVG…", this, [=, this] {
    if (const QString p = ask_path("SVG image (*.svg)", ".svg"); !p.isEmpty()) report(save_svg(p));
  });
  menu.addAction("Export data as CSV…", this, [=, this] {
    if (const QString p = ask_path("CSV table (*.csv)", ".csv"); !p.isEmpty()) report(save_csv(p));
  });
  menu.exec(event->globalPos());
}

QString MetricChart::save_png(const QString& path) {
  const std::optional<double> readout = readout_x_;
  hide_readout();
  QImage image(size() * 2, QImage::Format_ARGB32_Premultiplied);
  image.setDevicePixelRatio(2);
  image.fill(palette().color(QPalette::Base));
  {
    QPainter painter(&image);
    render(&painter);
  }
  if (readout) show_readout_at(*readout);
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    return QString("cannot write '%1': %2").arg(path, file.errorString());
  if (!image.save(&file, "PNG")) return QString("cannot write '%1' as PNG").arg(path);
  if (!file.commit()) return QString("cannot write '%1': %2").arg(path, file.errorString());
  return {};
}

QString MetricChart::save_svg(const QString& path) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    return QString("cannot write '%1': %2").arg(path, file.errorString());
  const std::optional<double> readout = readout_x_;
  hide_readout();
  QSvgGenerator svg;
  svg.setOutputDevice(&file);
  svg.setSize(size());
  svg.setViewBox(QRect(QPoint(0, 0), size()));
  svg.setTitle(title_);
  svg.setDescription("A Tandem chart");
  {
    QPainter painter;
    if (!painter.begin(&svg)) return QString("cannot draw '%1' as SVG").arg(path);
    render(&painter);
  }
  if (readout) show_readout_at(*readout);
  if (!file.commit()) return QString("cannot write '%1': %2").arg(path, file.errorString());
  return {};
}

QString MetricChart::csv_text() const {
  // One row per x that any line has, in order; NaN marks "no point here".
  const double none = std::numeric_limits<double>::quiet_NaN();
  std::map<double, std::vector<double>> rows;
  for (qsizetype i = 0; i < lines_.size(); ++i)
    for (const QPointF& p : lines_[i].full) {
      auto& row = rows[p.x()];
      row.resize(lines_.size(), none);
      row[i] = p.y();
    }
  QStringList header{csv_field(x_title_)};
  for (const Slot& slot : lines_) header << csv_field(slot.line.label);
  QString out = header.join(',') + "\n";
  for (auto& [x, values] : rows) {
    values.resize(lines_.size(), none);
    out += QString::number(x, 'g', 15);
    for (qsizetype i = 0; i < lines_.size(); ++i) {
      out += ',';
      // Histories hold finite values only, so NaN is "no point here": an empty cell.
      if (!std::isnan(values[i])) out += QString::number(values[i], 'g', 9);
    }
    out += '\n';
  }
  return out;
}

QString MetricChart::save_csv(const QString& path) const {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
    return QString("cannot write '%1': %2").arg(path, file.errorString());
  file.write(csv_text().toUtf8());
  if (!file.commit()) return QString("cannot write '%1': %2").arg(path, file.errorString());
  return {};
}

int MetricChart::drawn_points(int line) const {
  return static_cast<int>(lines_.at(line).main->count());
}

qsizetype MetricChart::history_points(int line) const {
  return lines_.at(line).full.size();
}

QLineSeries* MetricChart::series(int line) const {
  return lines_.at(line).main;
}

}  // namespace tandem::gui
