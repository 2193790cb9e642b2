// The checkpoints of a run as a table model: one row per checkpoint file that exists on disk
// (checkpoints pruned by save_top_k disappear), in the order they were saved.
#pragma once

#include <QAbstractTableModel>
#include <QList>
#include <QPointer>

#include "run_history.hpp"

namespace tandem::gui {

class CheckpointTable : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { time, epoch, step, monitored, best, target, size, path, column_count };

  explicit CheckpointTable(QObject* parent = nullptr);

  /// Shows `run`'s checkpoints (not owned; may be null) and follows it as it grows.
  void set_run(RunHistory* run);
  /// Re-reads the run's records and drops rows whose file is gone.
  void refresh();
  const CheckpointRecord& record(int row) const { return rows_.at(row); }
  /// The newest checkpoint that was the best of its monitor and target when saved, if it exists.
  int best_row() const { return best_row_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QPointer<RunHistory> run_;
  QList<CheckpointRecord> rows_;
  int best_row_ = -1;
};

/// "12.3 KiB", "4.0 MiB".
QString human_bytes(qint64 bytes);

}  // namespace tandem::gui
