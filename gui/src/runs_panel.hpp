// The Runs panel: every run folder of a workspace; open one, or select several and compare them.
#pragma once

#include <QFileSystemWatcher>
#include <QLabel>
#include <QTimer>
#include <QWidget>

#include "run_folder.hpp"

class QLineEdit;
class QPushButton;
class QTableWidget;

namespace tandem::gui {

class RunsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunsPanel(QWidget* parent = nullptr);

  /// Lists `workspace`'s runs and follows changes to it (new run folders appear on their own).
  void set_workspace(const QString& workspace);
  QString workspace() const { return workspace_; }
  const QList<RunFolderSummary>& runs() const { return runs_; }
  QTableWidget* table() const { return table_; }
  /// Why the workspace lists nothing it could (a folder missing or unreadable); empty when none.
  QString problem() const;
  /// Selects the row of a run folder (adding it to the selection with `add`); false if it is not
  /// listed.
  bool select_run(const QString& path, bool add = false);
  /// The selected run folders, in table order.
  QStringList selected_runs() const;

 public Q_SLOTS:
  void rescan();

 Q_SIGNALS:
  void open_requested(const QString& run_dir);
  /// Compare (≥ 2 selected): the first in table order is shown with the others beside it.
  void compare_requested(const QStringList& run_dirs);
  void workspace_changed(const QString& workspace);

 private:
  QString selected_run() const;
  void update_buttons();

  QString workspace_;
  QList<RunFolderSummary> runs_;
  QLineEdit* path_;
  QTableWidget* table_;
  QLabel* problem_;  // problem(), shown above the table
  QPushButton *open_, *compare_;
  QFileSystemWatcher watcher_;
  QTimer rescan_later_;
};

}  // namespace tandem::gui
