#include "checkpoints_panel.hpp"

#include <QClipboard>
#include <QDesktopServices>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>

#include "engine_locator.hpp"
#include "engine_run.hpp"

namespace tandem::gui {

CheckpointsPanel::CheckpointsPanel(QWidget* parent)
    : QWidget(parent),
      view_(new QTableView),
      summary_(new QLabel),
      evaluation_(new QLabel),
      open_(new QPushButton("Open folder")),
      evaluate_(new QPushButton("Evaluate")),
      resume_(new QPushButton("Resume from here")),
      copy_(new QPushButton("Copy path")) {
  sorted_.setSourceModel(&table_);
  sorted_.setSortRole(CheckpointTable::sort_role);
  view_->setModel(&sorted_);
  view_->setSortingEnabled(true);
  view_->sortByColumn(CheckpointTable::time, Qt::AscendingOrder);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setAlternatingRowColors(true);
  view_->verticalHeader()->hide();
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setWordWrap(false);
  view_->setTextElideMode(Qt::ElideMiddle);
  open_->setToolTip("Show the checkpoint's folder in the file manager");
  evaluate_->setToolTip(
      "Loss and metrics of these weights on the validation data (tandem evaluate)");
  resume_->setToolTip("Continue training from this checkpoint (tandem train --resume)");
  copy_->setToolTip("Copy the checkpoint's path to the clipboard (Ctrl+Shift+C)");
  copy_->setShortcut(QKeySequence("Ctrl+Shift+C"));
  evaluation_->setWordWrap(true);
  evaluation_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(summary_, 1);
  for (QPushButton* b : {open_, evaluate_, resume_, copy_}) buttons->addWidget(b);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(view_, 1);
  layout->addWidget(evaluation_);

  connect(open_, &QPushButton::clicked, this, &CheckpointsPanel::open_folder);
  connect(evaluate_, &QPushButton::clicked, this, &CheckpointsPanel::evaluate_selected);
  connect(resume_, &QPushButton::clicked, this, &CheckpointsPanel::resume_selected);
  connect(copy_, &QPushButton::clicked, this, &CheckpointsPanel::copy_path);
  connect(view_, &QTableView::doubleClicked, this, &CheckpointsPanel::evaluate_selected);
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &CheckpointsPanel::update_actions);
  connect(&table_, &QAbstractItemModel::modelReset, this, [this] {
    view_->resizeColumnsToContents();
    update_actions();
  });
  update_actions();
}

CheckpointsPanel::~CheckpointsPanel() {
  if (!evaluator_ || evaluator_->state() == QProcess::NotRunning) return;
  evaluator_->disconnect();
  evaluator_->kill();
  evaluator_->waitForFinished(2000);
}

void CheckpointsPanel::set_run(RunHistory* run) {
  // An evaluation of the previous run's checkpoint does not belong under this run's table.
  if (evaluator_ && evaluator_->state() != QProcess::NotRunning) {
    evaluator_->disconnect();
    evaluator_->kill();
  }
  evaluation_->clear();
  table_.set_run(run);
}

int CheckpointsPanel::selected_row() const {
  const QModelIndexList rows = view_->selectionModel()->selectedRows();
  return rows.isEmpty() ? -1 : sorted_.mapToSource(rows.front()).row();
}

void CheckpointsPanel::select(int row) {
  view_->selectRow(sorted_.mapFromSource(table_.index(row, 0)).row());
}

QString CheckpointsPanel::selected_path() const {
  const int row = selected_row();
  return row < 0 ? QString() : table_.record(row).path;
}

QString CheckpointsPanel::evaluation_text() const {
  return evaluation_->text();
}

void CheckpointsPanel::update_actions() {
  const bool selected = !selected_path().isEmpty();
  for (QPushButton* b : {open_, evaluate_, copy_}) b->setEnabled(selected);
  const int row = selected_row();
  const bool resumable = row >= 0 && table_.record(row).resumable;
  resume_->setEnabled(resumable);
  const int n = table_.rowCount();
  summary_->setText(n == 0 ? "No checkpoints yet"
                           : QString("%1 checkpoint%2 on disk").arg(n).arg(n == 1 ? "" : "s"));
}

void CheckpointsPanel::open_folder() {
  const QString path = selected_path();
  if (path.isEmpty()) return;
  QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(path).absolutePath()));
}

void CheckpointsPanel::copy_path() {
  const QString path = selected_path();
  if (!path.isEmpty()) QGuiApplication::clipboard()->setText(path);
}

void CheckpointsPanel::resume_selected() {
  const QString path = selected_path();
  if (!path.isEmpty()) Q_EMIT resume_requested(path);
}

void CheckpointsPanel::evaluate_selected() {
  const QString path = selected_path();
  if (path.isEmpty()) return;
  const QString engine = engine_path();
  if (engine.isEmpty()) {
    evaluation_->setText(engine_missing_message());
    return;
  }
  if (evaluator_) evaluator_->kill();
  auto* process = new QProcess(this);
  evaluator_ = process;
  const QStringList args{"evaluate", "--weights", path, "--quiet"};
  Q_EMIT log_line("$ " + engine + " " + args.join(' '));
  evaluation_->setText("Evaluating " + QFileInfo(path).fileName() + "…");
  connect(
      process, &QProcess::finished, this, [this, process, path](int code, QProcess::ExitStatus) {
        const QByteArray out = process->readAllStandardOutput();
        const QString err = QString::fromUtf8(process->readAllStandardError()).trimmed();
        for (const QString& line : err.split('\n', Qt::SkipEmptyParts)) Q_EMIT log_line(line);
        QString text;
        const QJsonDocument doc = QJsonDocument::fromJson(out.trimmed());
        if (code == 0 && doc.isObject()) {
          QStringList parts;
          const QJsonObject logs = doc.object();
          for (auto it = logs.begin(); it != logs.end(); ++it)
            parts << QString("%1 %2").arg(it.key()).arg(it.value().toDouble(), 0, 'g', 5);
          text = QString("%1: %2").arg(QFileInfo(path).fileName(), parts.join(", "));
        } else {
          text = QString("Evaluation failed (exit code %1): %2")
                     .arg(code)
                     .arg(engine_error_line(err.split('\n', Qt::SkipEmptyParts)));
        }
        evaluation_->setText(text);
        Q_EMIT evaluation_finished(text);
        process->deleteLater();
      });
  process->start(engine, args);
}

}  // namespace tandem::gui
