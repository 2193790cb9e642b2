#include "runs_panel.hpp"

#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "theme.hpp"

namespace tandem::gui {

namespace {

QString metrics_text(const QJsonObject& logs) {
  QStringList parts;
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"})
    if (logs.value(key).isDouble())
      parts << QString("%1 %2").arg(key).arg(logs.value(key).toDouble(), 0, 'f', 4);
  return parts.join(", ");
}

}  // namespace

RunsPanel::RunsPanel(QWidget* parent)
    : QWidget(parent),
      path_(new QLineEdit),
      table_(new QTableWidget),
      problem_(new QLabel),
      open_(new QPushButton("Open")),
      compare_(new QPushButton("Compare")) {
  auto* browse = new QPushButton("Browse…");
  auto* refresh = new QPushButton("Refresh");
  refresh->setShortcut(QKeySequence::Refresh);
  path_->setPlaceholderText("Workspace: the folder that holds run folders");
  open_->setToolTip("Show this run's charts and checkpoints (double-click a row)");
  compare_->setToolTip(
      "Charts of the selected runs together, each in its own colour, with a table of the "
      "config values that differ (select several with Ctrl or Shift)");
  table_->setColumnCount(6);
  table_->setHorizontalHeaderLabels({"Run", "Started", "Status", "Epochs", "Last epoch", "Folder"});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("Workspace:"));
  top->addWidget(path_, 1);
  top->addWidget(browse);
  top->addWidget(refresh);
  auto* actions = new QHBoxLayout;
  actions->addStretch(1);
  actions->addWidget(open_);
  actions->addWidget(compare_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  problem_->setWordWrap(true);
  problem_->hide();
  layout->addWidget(problem_);
  layout->addWidget(table_, 1);
  layout->addLayout(actions);

  rescan_later_.setSingleShot(true);
  rescan_later_.setInterval(500);
  connect(&rescan_later_, &QTimer::timeout, this, &RunsPanel::rescan);
  connect(&watcher_, &QFileSystemWatcher::directoryChanged, &rescan_later_,
          qOverload<>(&QTimer::start));
  connect(path_, &QLineEdit::editingFinished, this, [this] { set_workspace(path_->text()); });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Workspace", workspace_);
    if (!dir.isEmpty()) set_workspace(dir);
  });
  connect(refresh, &QPushButton::clicked, this, &RunsPanel::rescan);
  connect(open_, &QPushButton::clicked, this, [this] {
    if (!selected_run().isEmpty()) Q_EMIT open_requested(selected_run());
  });
  connect(compare_, &QPushButton::clicked, this, [this] {
    if (const QStringList runs = selected_runs(); runs.size() >= 2) Q_EMIT compare_requested(runs);
  });
  connect(table_, &QTableWidget::itemSelectionChanged, this, &RunsPanel::update_buttons);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (row >= 0 && row < runs_.size()) Q_EMIT open_requested(runs_[row].path);
  });
}

void RunsPanel::set_workspace(const QString& workspace) {
  const QString absolute = workspace.isEmpty() ? QString() : QDir(workspace).absolutePath();
  path_->setText(absolute);
  if (absolute == workspace_) {
    rescan();
    return;
  }
  if (!watcher_.directories().isEmpty()) watcher_.removePaths(watcher_.directories());
  workspace_ = absolute;
  if (!workspace_.isEmpty() && QFileInfo(workspace_).isDir()) watcher_.addPath(workspace_);
  rescan();
  Q_EMIT workspace_changed(workspace_);
}

QString RunsPanel::problem() const {
  if (workspace_.isEmpty()) return {};
  const QFileInfo info(workspace_);
  if (!info.exists()) return "No such folder: " + workspace_;
  if (!info.isDir()) return "Not a folder: " + workspace_;
  if (!info.isReadable() || !info.isExecutable())
    return "Cannot read " + workspace_ + " (permission denied): its runs cannot be listed";
  qsizetype unreadable = 0;
  for (const RunFolderSummary& r : runs_) unreadable += r.status == "unreadable";
  if (unreadable > 0)
    return QString("%1 %2 cannot be read (permission denied)")
        .arg(unreadable)
        .arg(unreadable == 1 ? "folder" : "folders");
  return {};
}

void RunsPanel::rescan() {
  const QStringList selected = selected_runs();
  runs_ = workspace_.isEmpty() ? QList<RunFolderSummary>{} : scan_workspace(workspace_);
  const QString why = problem();
  problem_->setText(why);
  problem_->setStyleSheet(QString("color: %1").arg(semantic_colors().error.name()));
  problem_->setVisible(!why.isEmpty());
  table_->setRowCount(static_cast<int>(runs_.size()));
  for (int row = 0; row < runs_.size(); ++row) {
    const RunFolderSummary& r = runs_[row];
    const QDateTime started = QDateTime::fromString(r.started, Qt::ISODateWithMs);
    const QStringList cells = {
        r.name,
        started.isValid() ? started.toLocalTime().toString("yyyy-MM-dd HH:mm") : QString(),
        r.status,
        r.epochs > 0 ? QString("%1/%2").arg(r.epochs_done).arg(r.epochs)
                     : QString::number(r.epochs_done),
        metrics_text(r.last_logs),
        QFileInfo(r.path).fileName()};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setToolTip(c == 2 && !r.error.isEmpty() ? r.error : r.path);
      if (c == 2 && r.status == "failed") item->setForeground(semantic_colors().error);
      table_->setItem(row, c, item);
    }
  }
  table_->resizeColumnsToContents();
  table_->clearSelection();
  for (const QString& path : selected) select_run(path, true);
  update_buttons();
}

void RunsPanel::update_buttons() {
  const qsizetype n = selected_runs().size();
  open_->setEnabled(n == 1);
  compare_->setEnabled(n >= 2 && n <= kMaxComparedRuns);
  compare_->setText(n > kMaxComparedRuns
                        ? QString("Compare (at most %1 runs)").arg(kMaxComparedRuns)
                    : n >= 2 ? QString("Compare %1 runs").arg(n)
                             : QString("Compare"));
}

bool RunsPanel::select_run(const QString& path, bool add) {
  const QString absolute = QDir(path).absolutePath();
  for (int row = 0; row < runs_.size(); ++row)
    if (runs_[row].path == absolute) {
      const auto how = add ? QItemSelectionModel::Select : QItemSelectionModel::ClearAndSelect;
      table_->selectionModel()->select(table_->model()->index(row, 0),
                                       how | QItemSelectionModel::Rows);
      table_->setCurrentItem(table_->item(row, 0), QItemSelectionModel::NoUpdate);
      return true;
    }
  return false;
}

QStringList RunsPanel::selected_runs() const {
  QStringList out;
  for (int row = 0; row < runs_.size(); ++row)
    if (table_->selectionModel()->isRowSelected(row, QModelIndex())) out << runs_[row].path;
  return out;
}

QString RunsPanel::selected_run() const {
  const QStringList selected = selected_runs();
  return selected.size() == 1 ? selected.front() : QString();
}

}  // namespace tandem::gui
