// One chart of one quantity (a metric, the learning rate, throughput, replica step times) for one
// or more runs. The runs keep the full history; the chart draws a smoothed copy of the part in
// view, decimated to about two points per pixel, pushed with QXYSeries::replace() only when the
// data or the view changed, so it stays fluid at 100,000 points.
//
// What a user can do with it: hover for a read-out of every line at the cursor; drag a rectangle
// to zoom (a flat drag zooms x only), Ctrl+wheel to zoom x (Ctrl+Shift+wheel: y), Shift+drag or
// the middle button to pan, double-click to see everything again; from the context menu, a log
// scale for y and exports (PNG, SVG, the data as CSV).
#pragma once

#include <QChartView>
#include <QColor>
#include <QList>
#include <QMap>
#include <QPoint>
#include <QPointer>
#include <QString>
#include <functional>
#include <optional>

#include "axis_ticks.hpp"
#include "run_history.hpp"

class QAbstractAxis;
class QGraphicsLineItem;
class QGraphicsRectItem;
class QGraphicsTextItem;
class QLineSeries;
class QLogValueAxis;
class QRubberBand;
class QScatterSeries;
class QValueAxis;

namespace tandem::gui {

/// One line: which run, and how to read its points from it (in x order).
struct ChartLine {
  QPointer<RunHistory> run;  // not owned; a destroyed run leaves an empty line
  QString label;
  QColor color;
  bool dashed = false;
  bool smoothed = true;  // apply the chart's smoothing (raw values drawn faint behind)
  std::function<QList<QPointF>(const RunHistory&)> points;
  bool in_legend = true;  // a chart whose lines are all out of the legend shows none
};

class MetricChart : public QChartView {
  Q_OBJECT
 public:
  enum class YScale { linear, log };

  /// `x_integers`: x counts whole things (epochs), so its ticks are whole numbers.
  MetricChart(const QString& title, const QString& x_title, QWidget* parent = nullptr,
              bool x_integers = false);

  /// Replaces the lines (and their series).
  void set_lines(const QList<ChartLine>& lines);
  /// Smoothing weight in [0, 1) for lines with `smoothed` (TensorBoard's slider).
  void set_smoothing(double weight);
  /// Marks `run`'s checkpoints and callback decisions (RunHistory::markers) along the top of the
  /// plot, at their step or, with `by_epoch`, their epoch; hovering one shows what happened.
  /// `x_of_step` maps a step to this chart's x (for a wall-time axis); null keeps it.
  void set_markers(QPointer<RunHistory> run, bool by_epoch,
                   std::function<double(const RunHistory&, qint64 step)> x_of_step = {});
  /// Pushes new data to the series when a run's revision changed (or always with `force`).
  void refresh(bool force = false);

  /// Linear or log-10 y. On a log scale, values ≤ 0 are left out (the read-out says so).
  void set_y_scale(YScale scale);
  YScale y_scale() const { return y_scale_; }

  /// The part of the data in view. Zooming fixes x (and y for a rectangle); a fixed x range
  /// fits y to the data inside it. reset_zoom() follows all the data again.
  void zoom_to(double x_low, double x_high, std::optional<ValueRange> y = std::nullopt);
  /// Zooms x by `factor` (< 1 closer) keeping `x_at` in place.
  void zoom_x(double factor, double x_at);
  void reset_zoom();
  bool zoomed() const { return x_fixed_ || y_fixed_; }
  ValueRange x_range() const { return x_view_; }
  ValueRange y_range() const { return y_view_; }
  /// The y axis' tick step and label format (linear scale).
  AxisTicks y_ticks() const { return y_ticks_; }
  AxisTicks x_ticks() const { return x_ticks_; }

  /// The read-out at data x `x`: the first line "<x title> <x>", then one line per line with
  /// data: "<label> <value>" (smoothed lines add "(raw <value>)"; a line whose nearest point is
  /// elsewhere adds "at <its x>"). Each value is the line's point nearest to `x`.
  QStringList readout_at(double x) const;
  /// Shows the read-out (a cursor line and a box in the plot) as hovering at `x` does.
  void show_readout_at(double x);
  void hide_readout();
  bool readout_visible() const;

  /// Saves the chart as it looks (without the read-out): PNG at twice the widget's size, SVG
  /// (vector), or the lines' full data as CSV (x, then one column per line; raw values, empty
  /// where a line has no point at that x). Each replaces `path` whole or leaves it untouched;
  /// returns an empty string or what went wrong, naming the file.
  QString save_png(const QString& path);
  QString save_svg(const QString& path);
  QString save_csv(const QString& path) const;
  /// The CSV text save_csv() writes.
  QString csv_text() const;

  QString title() const { return title_; }
  QString x_title() const { return x_title_; }
  int line_count() const { return static_cast<int>(lines_.size()); }
  /// Points drawn for a line (after decimation) and in its full history.
  int drawn_points(int line) const;
  qsizetype history_points(int line) const;
  QLineSeries* series(int line) const;
  /// The marker series (one point per x that has markers; empty without set_markers) and the
  /// text its hover shows for the point at `x`.
  QScatterSeries* marker_series() const { return markers_; }
  QString marker_text_at(double x) const;
  /// Most points one line draws: about two per horizontal pixel.
  int max_drawn_points() const;

 protected:
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct Slot {
    ChartLine line;
    QLineSeries* raw = nullptr;  // faint, unsmoothed (only while smoothing is on)
    QLineSeries* main = nullptr;
    QList<QPointF> full;      // the run's whole history of this line
    QList<QPointF> smoothed;  // `full` smoothed (== full when not smoothing)
    bool sorted = true;       // x in order (the view can be cut by binary search)
  };

  void fetch_data();
  void fit_view();
  void redraw();
  void apply_ticks();
  void place_markers();
  QList<QPointF> in_view(const QList<QPointF>& points, bool sorted) const;
  QPointF value_at(const QPoint& widget_pos) const;
  QRectF plot_rect_in_widget() const;
  QAbstractAxis* y_axis() const;
  bool smoothing_on(const Slot& slot) const { return slot.line.smoothed && smoothing_ > 0; }
  QString format_x(double x) const;
  QString ask_path(const QString& filter, const QString& suffix);

  QString title_, x_title_;
  bool x_integers_;
  QList<Slot> lines_;
  QList<qint64> revisions_;

  QValueAxis* x_axis_;
  QValueAxis* y_linear_;
  QLogValueAxis* y_log_;
  YScale y_scale_ = YScale::linear;
  ValueRange x_view_{0, 1}, y_view_{0, 1};
  AxisTicks x_ticks_, y_ticks_;
  bool x_fixed_ = false, y_fixed_ = false;

  QScatterSeries* markers_;
  QPointer<RunHistory> marker_run_;
  bool markers_by_epoch_ = false;
  std::function<double(const RunHistory&, qint64)> marker_x_of_step_;
  qint64 marker_revision_ = -1;
  QMap<double, QStringList> marker_texts_;  // x -> what happened there
  double smoothing_ = 0;

  // Mouse: a rectangle being dragged (rubber band) or a pan in progress.
  enum class Drag { none, zoom, pan };
  Drag drag_ = Drag::none;
  QPoint drag_start_;
  ValueRange pan_x_{0, 1}, pan_y_{0, 1};
  QRubberBand* rubber_band_;

  // The read-out: a vertical line at the cursor and a box with the values.
  QGraphicsLineItem* cursor_line_;
  QGraphicsRectItem* readout_back_;
  QGraphicsTextItem* readout_text_;
  std::optional<double> readout_x_;
};

}  // namespace tandem::gui
