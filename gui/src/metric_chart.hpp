// One chart of one quantity (a metric, the learning rate, throughput, replica step times) for one
// or more runs. The runs keep the full history; the chart shows a smoothed, decimated copy pushed
// with QXYSeries::replace() only when something changed, so it stays fluid at 100,000 points.
#pragma once

#include <QChartView>
#include <QColor>
#include <QList>
#include <QMap>
#include <QPointer>
#include <QString>
#include <functional>

#include "run_history.hpp"

class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace tandem::gui {

/// One line: which run, and how to read its points from it.
struct ChartLine {
  QPointer<RunHistory> run;  // not owned; a destroyed run leaves an empty line
  QString label;
  QColor color;
  bool dashed = false;
  bool smoothed = true;  // apply the chart's smoothing (raw values drawn faint behind)
  std::function<QList<QPointF>(const RunHistory&)> points;
};

class MetricChart : public QChartView {
  Q_OBJECT
 public:
  MetricChart(const QString& title, const QString& x_title, QWidget* parent = nullptr);

  /// Replaces the lines (and their series).
  void set_lines(const QList<ChartLine>& lines);
  /// Smoothing weight in [0, 1) for lines with `smoothed` (TensorBoard's slider).
  void set_smoothing(double weight);
  /// Marks `run`'s checkpoints and callback decisions (RunHistory::markers) along the top of the
  /// plot, at their step or, with `by_epoch`, their epoch; hovering one shows what happened.
  void set_markers(QPointer<RunHistory> run, bool by_epoch);
  /// Pushes new data to the series when a run's revision changed (or always with `force`).
  void refresh(bool force = false);

  QString title() const { return title_; }
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

 private:
  struct Slot {
    ChartLine line;
    QLineSeries* raw = nullptr;  // faint, unsmoothed (only while smoothing is on)
    QLineSeries* main = nullptr;
    qsizetype history = 0;
  };

  QString title_;
  QList<Slot> lines_;
  void place_markers();

  QValueAxis* x_axis_;
  QValueAxis* y_axis_;
  QScatterSeries* markers_;
  QPointer<RunHistory> marker_run_;
  bool markers_by_epoch_ = false;
  qint64 marker_revision_ = -1;
  QMap<double, QStringList> marker_texts_;  // x -> what happened there
  double smoothing_ = 0;
  QList<qint64> revisions_;
};

}  // namespace tandem::gui
