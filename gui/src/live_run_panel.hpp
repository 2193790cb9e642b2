// The Live run panel: a run's charts (every metric train vs validation, learning rate,
// throughput, per-replica step times), its progress, and Stop. Shows a live engine run or a
// finished run read back from disk, or compares it with other runs: each run its own colour
// (train solid, validation dashed) and a table of the config values that differ.
#pragma once

#include <QAction>
#include <QPointer>
#include <QTimer>
#include <QWidget>

#include "metric_chart.hpp"
#include "run_comparison_table.hpp"
#include "run_history.hpp"

class QCheckBox;
class QComboBox;
class QGridLayout;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;

namespace tandem::gui {

class LiveRunPanel : public QWidget {
  Q_OBJECT
 public:
  enum class XAxis { step, epoch, wall_time };

  explicit LiveRunPanel(QWidget* parent = nullptr);

  /// Shows `run` (not owned; may be null). `live`: it belongs to a running engine (Stop applies).
  void set_run(RunHistory* run, bool live);
  /// Compares the run with `others` (not owned; empty ends the comparison): every chart draws
  /// each run in its own colour, and the hyperparameter table shows what differs. set_run()
  /// ends a comparison.
  void set_compared(const QList<RunHistory*>& others);
  RunHistory* run() const { return run_; }
  QList<RunHistory*> compared() const;
  bool comparing() const { return !compared_.isEmpty(); }
  RunComparisonTable* comparison_table() const { return comparison_; }
  /// Each shown run's name in the legend and the table: its name, or its folder's where two
  /// runs share a name; the shown run first.
  QStringList run_labels() const;
  /// The same, short, for the charts' legends: the name where it is unique among the shown runs,
  /// else the start time (local, "14:03:27").
  QStringList legend_labels() const;
  /// The colour of the k-th shown run while comparing.
  static QColor run_color(int k);

  void set_x_axis(XAxis axis);
  XAxis x_axis() const { return axis_; }
  /// Log-scale y on every chart (each chart's context menu also switches its own).
  void set_log_y(bool on);
  /// TensorBoard-style smoothing weight in [0, 0.999].
  void set_smoothing(double weight);
  double smoothing() const { return smoothing_; }

  QList<MetricChart*> charts() const { return charts_; }
  /// The chart with this title ("loss", "accuracy", "learning rate", "samples/s",
  /// "replica step time (ms)"), or null.
  MetricChart* chart(const QString& title) const;
  QString status_line() const;
  QPushButton* stop_button() const { return stop_; }
  /// Stop, one action: the button triggers it, the main window's menu shows it with Ctrl+.;
  /// enabled while the shown run is live and running.
  QAction* stop_action() const { return stop_action_; }

  /// Redraws now what changed (the panel also does it 4 times a second).
  void refresh();

 Q_SIGNALS:
  void stop_requested();

 protected:
  /// A theme change (PaletteChange) rebuilds the charts in the new shades.
  void changeEvent(QEvent* event) override;

 private:
  void rebuild_charts();
  QString layout_key() const;
  void update_header();

  QList<RunHistory*> shown_runs() const;  // the run, then the compared ones (live pointers)
  void update_comparison();

  QPointer<RunHistory> run_;
  QList<QPointer<RunHistory>> compared_;
  qint64 compared_revision_ = -1;
  bool live_ = false;
  XAxis axis_ = XAxis::step;
  double smoothing_ = 0.6;
  QString layout_key_;
  QList<MetricChart*> charts_;
  QLabel* title_;
  QLabel* status_;
  QProgressBar* progress_;
  QPushButton* stop_;
  QAction* stop_action_;
  void set_stop_enabled(bool enabled);
  QComboBox* axis_box_;
  QCheckBox* log_y_;
  // Seconds per unit of the wall-time axis (1, 60 or 3600) and its name.
  double wall_unit_ = 1;
  QString wall_unit_name_ = "s";
  void choose_wall_unit();
  QSlider* smoothing_slider_;
  QLabel* smoothing_label_;
  QLabel* compare_label_;
  QPushButton* stop_comparing_;
  RunComparisonTable* comparison_;
  QWidget* chart_area_;
  QGridLayout* grid_;
  QTimer timer_;
};

}  // namespace tandem::gui
