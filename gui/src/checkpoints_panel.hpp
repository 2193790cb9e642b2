// The Checkpoints panel: the table of a run's checkpoints and what to do with one.
#pragma once

#include <QSortFilterProxyModel>

#include <QPointer>
#include <QProcess>
#include <QWidget>

#include "checkpoint_table.hpp"

class QLabel;
class QPushButton;
class QTableView;

namespace tandem::gui {

class CheckpointsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit CheckpointsPanel(QWidget* parent = nullptr);
  /// Ends an evaluation still running.
  ~CheckpointsPanel() override;

  /// Shows `run`'s checkpoints (not owned; may be null).
  void set_run(RunHistory* run);
  CheckpointTable* table() { return &table_; }
  QTableView* view() const { return view_; }
  /// The selected checkpoint's path, or empty.
  QString selected_path() const;
  /// Selects the checkpoint of table row `row` (the model's row, whatever the view's sorting).
  void select(int row);
  /// The last evaluation's result text ("loss 0.31, accuracy 0.89") or error.
  QString evaluation_text() const;

 public Q_SLOTS:
  void open_folder();
  /// Runs `tandem evaluate --weights <selected>` and shows its logs.
  void evaluate_selected();
  void resume_selected();
  void copy_path();

 Q_SIGNALS:
  void resume_requested(const QString& checkpoint_path);
  void log_line(const QString& line);
  void evaluation_finished(const QString& result);

 private:
  void update_actions();

  /// The selected row of the table (the model's, not the sorted view's), or -1.
  int selected_row() const;
  CheckpointTable table_;
  QSortFilterProxyModel sorted_;  // the view's order: any column, by header click
  QTableView* view_;
  QLabel* summary_;
  QLabel* evaluation_;
  QPushButton *open_, *evaluate_, *resume_, *copy_;
  QPointer<QProcess> evaluator_;
};

}  // namespace tandem::gui
