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
  /// The rows marked best: for each checkpoint callback — its monitor, target and folder —
  /// the newest of its files that was its best when saved (each callback keeps its own best),
  /// in row order.
  QList<int> best_rows() const { return best_rows_; }
  bool is_best(int row) const { return best_rows_.contains(row); }
  /// The role of the values the view sorts by (times, numbers and sizes as such).
  static constexpr int sort_role = Qt::UserRole;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QPointer<RunHistory> run_;
  QList<CheckpointRecord> rows_;
  QList<int> best_rows_;
};

/// "12.3 KiB", "4.0 MiB".
QString human_bytes(qint64 bytes);

}  // namespace tandem::gui
