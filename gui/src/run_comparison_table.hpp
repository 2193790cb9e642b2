// The hyperparameter table of a run comparison: one row per run (its colour in the charts, its
// status and epochs), one column per config value that differs between the runs, then the final
// epoch's metrics. Sortable by any column (numbers as numbers); a filter keeps the columns whose
// name contains its text.
#pragma once

#include <QColor>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

class QLabel;
class QLineEdit;
class QTableWidget;

namespace tandem::gui {

/// One run of a comparison as the table shows it.
struct ComparedRun {
  QString label;  // unique among the compared runs
  QColor color;   // its lines' colour in the charts
  QJsonObject config;
  QJsonObject final_logs;  // the last finished epoch's logs (train and val_)
  QString status;
  int epochs_done = 0;
  int epochs = 0;
};

class RunComparisonTable : public QWidget {
  Q_OBJECT
 public:
  explicit RunComparisonTable(QWidget* parent = nullptr);

  /// Rebuilds the table for `runs` (keeping the sort column and the filter).
  void set_runs(const QList<ComparedRun>& runs);
  /// Shows only the columns whose name contains `text`, ignoring case (the run column always).
  void set_filter(const QString& text);

  QTableWidget* table() const { return table_; }
  QLineEdit* filter_edit() const { return filter_; }
  /// The headers of all columns, and of those the filter leaves visible.
  QStringList columns() const;
  QStringList visible_columns() const;
  /// The height that shows every row without scrolling (at most 12 rows' worth).
  int content_height() const;
  /// The config paths that differ between the runs shown.
  QStringList differing() const { return differing_; }

 private:
  QTableWidget* table_;
  QLineEdit* filter_;
  QLabel* summary_;
  QStringList differing_;
};

}  // namespace tandem::gui
