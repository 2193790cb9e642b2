#include "run_comparison_table.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPixmap>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>

#include "config_diff.hpp"

namespace tandem::gui {

namespace {

// The loss first, then the metrics, each train before its val_.
QStringList metric_columns(const QList<ComparedRun>& runs) {
  QStringList names;
  for (const ComparedRun& r : runs)
    for (auto it = r.final_logs.begin(); it != r.final_logs.end(); ++it) {
      const QString base = it.key().startsWith("val_") ? it.key().mid(4) : it.key();
      if (it.value().isDouble() && !names.contains(base) && base != "lr") names << base;
    }
  if (names.removeAll("loss") > 0) names.prepend("loss");
  QStringList out;
  for (const QString& n : names) out << n << "val_" + n;
  QStringList present;
  for (const QString& key : out)
    for (const ComparedRun& r : runs)
      if (r.final_logs.value(key).isDouble()) {
        present << key;
        break;
      }
  return present;
}

// A cell that sorts numbers as numbers and text as text.
QTableWidgetItem* cell(const QJsonValue& value) {
  auto* item = new QTableWidgetItem;
  if (value.isDouble())
    item->setData(Qt::DisplayRole, value.toDouble());
  else
    item->setText(config_value_text(value));
  return item;
}

QIcon swatch(const QColor& color) {
  QPixmap pixmap(12, 12);
  pixmap.fill(color);
  return QIcon(pixmap);
}

}  // namespace

RunComparisonTable::RunComparisonTable(QWidget* parent)
    : QWidget(parent), table_(new QTableWidget), filter_(new QLineEdit), summary_(new QLabel) {
  filter_->setPlaceholderText("Filter columns…");
  filter_->setToolTip("Show only the columns whose name contains this (e.g. learning_rate, val_)");
  filter_->setClearButtonEnabled(true);
  filter_->setMaximumWidth(320);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->setSortingEnabled(true);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setSectionsMovable(true);
  auto* top = new QHBoxLayout;
  top->addWidget(summary_, 1);
  top->addWidget(filter_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(top);
  layout->addWidget(table_, 1);
  connect(filter_, &QLineEdit::textChanged, this, &RunComparisonTable::set_filter);
}

void RunComparisonTable::set_runs(const QList<ComparedRun>& runs) {
  QList<QMap<QString, QJsonValue>> flat;
  for (const ComparedRun& r : runs) flat << flatten_config(r.config);
  differing_ = differing_paths(flat, {"name"});
  const QStringList metrics = metric_columns(runs);
  QStringList headers{"run", "status", "epochs done"};
  headers << differing_ << metrics;

  // The sort is kept by column name: the columns change with the runs.
  const int sorted_section = table_->horizontalHeader()->sortIndicatorSection();
  const QString sort_name = sorted_section >= 0 && sorted_section < table_->columnCount()
                                ? table_->horizontalHeaderItem(sorted_section)->text()
                                : QString();
  const Qt::SortOrder order = table_->horizontalHeader()->sortIndicatorOrder();
  table_->setSortingEnabled(false);  // rows are filled in place, then sorted once
  table_->clear();
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setRowCount(static_cast<int>(runs.size()));
  table_->setHorizontalHeaderLabels(headers);
  for (int c = 0; c < headers.size(); ++c) table_->horizontalHeaderItem(c)->setToolTip(headers[c]);
  for (int row = 0; row < runs.size(); ++row) {
    const ComparedRun& r = runs[row];
    auto* name = new QTableWidgetItem(swatch(r.color), r.label);
    table_->setItem(row, 0, name);
    table_->setItem(row, 1, new QTableWidgetItem(r.status));
    auto* epochs = new QTableWidgetItem;
    epochs->setData(Qt::DisplayRole, r.epochs_done);
    epochs->setToolTip(QString("%1 of %2 epochs").arg(r.epochs_done).arg(r.epochs));
    table_->setItem(row, 2, epochs);
    int column = 3;
    for (const QString& path : differing_)
      table_->setItem(row, column++,
                      cell(flat[row].value(path, QJsonValue(QJsonValue::Undefined))));
    for (const QString& metric : metrics)
      table_->setItem(row, column++, cell(r.final_logs.value(metric)));
  }
  table_->setSortingEnabled(true);
  if (const qsizetype c = headers.indexOf(sort_name); !sort_name.isEmpty() && c >= 0)
    table_->sortItems(static_cast<int>(c), order);
  table_->resizeColumnsToContents();
  summary_->setText(differing_.isEmpty() ? QString("%1 runs, the same config").arg(runs.size())
                                         : QString("%1 runs; %2 config value%3 differ%4")
                                               .arg(runs.size())
                                               .arg(differing_.size())
                                               .arg(differing_.size() == 1 ? "" : "s")
                                               .arg(differing_.size() == 1 ? "s" : ""));
  set_filter(filter_->text());
}

void RunComparisonTable::set_filter(const QString& text) {
  if (filter_->text() != text) filter_->setText(text);  // comes back here through textChanged
  for (int c = 0; c < table_->columnCount(); ++c) {
    const QString header = table_->horizontalHeaderItem(c)->text();
    table_->setColumnHidden(c, c > 0 && !header.contains(text.trimmed(), Qt::CaseInsensitive));
  }
}

int RunComparisonTable::content_height() const {
  const int rows = std::min(table_->rowCount(), 12);
  int height = table_->horizontalHeader()->sizeHint().height() + 2 * table_->frameWidth();
  for (int row = 0; row < rows; ++row) height += table_->rowHeight(row);
  if (table_->horizontalHeader()->length() > table_->viewport()->width())  // a scroll bar
    height += table_->horizontalScrollBar()->sizeHint().height();
  return height + summary_->sizeHint().height() + layout()->spacing();
}

QStringList RunComparisonTable::columns() const {
  QStringList out;
  for (int c = 0; c < table_->columnCount(); ++c) out << table_->horizontalHeaderItem(c)->text();
  return out;
}

QStringList RunComparisonTable::visible_columns() const {
  QStringList out;
  for (int c = 0; c < table_->columnCount(); ++c)
    if (!table_->isColumnHidden(c)) out << table_->horizontalHeaderItem(c)->text();
  return out;
}

}  // namespace tandem::gui
