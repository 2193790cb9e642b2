#include "checkpoint_table.hpp"

#include <QBrush>
#include <QDateTime>
#include <QFile>
#include <QFileInfo>
#include <QFont>
#include <QHash>
#include <algorithm>

namespace tandem::gui {

QString human_bytes(qint64 bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? QString("%1 B").arg(bytes) : QString("%1 %2").arg(v, 0, 'f', 1).arg(units[u]);
}

CheckpointTable::CheckpointTable(QObject* parent) : QAbstractTableModel(parent) {}

void CheckpointTable::set_run(RunHistory* run) {
  if (run_) disconnect(run_, nullptr, this, nullptr);
  run_ = run;
  if (run_) connect(run_, &RunHistory::checkpoint_added, this, [this] { refresh(); });
  refresh();
}

namespace {

// Whether `path` is an HDF5 file (its signature at the start, where Tandem and Keras write it): a
// stream names its checkpoints, and a crafted one may name any file (/etc/passwd).
bool is_hdf5_file(const QString& path) {
  QFile file(path);
  if (!QFileInfo(path).isFile() || !file.open(QIODevice::ReadOnly)) return false;
  return file.read(8) == QByteArray("\x89HDF\r\n\x1a\n", 8);
}

}  // namespace

void CheckpointTable::refresh() {
  QList<CheckpointRecord> rows;
  if (run_) {
    // The newest record of a path wins (a file may be rewritten, e.g. save_last).
    QHash<QString, qsizetype> index_of;
    for (CheckpointRecord r : run_->checkpoints()) {
      if (!is_hdf5_file(r.path)) continue;
      r.bytes = QFileInfo(r.path).size();  // what is on disk, not what the stream says
      auto it = index_of.find(r.path);
      if (it != index_of.end()) {
        rows[*it] = r;
      } else {
        index_of.insert(r.path, rows.size());
        rows.push_back(r);
      }
    }
  }
  // One best per checkpoint callback: its monitor, target and the folder it writes to.
  QHash<QString, int> best_of;
  for (qsizetype i = 0; i < rows.size(); ++i)
    if (rows[i].best)
      best_of[rows[i].monitor + '\n' + rows[i].target + '\n' + QFileInfo(rows[i].path).absolutePath()] =
          static_cast<int>(i);
  QList<int> best = best_of.values();
  std::sort(best.begin(), best.end());
  beginResetModel();
  rows_ = rows;
  best_rows_ = best;
  endResetModel();
}

int CheckpointTable::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CheckpointTable::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant CheckpointTable::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rows_.size()) return {};
  const CheckpointRecord& r = rows_[index.row()];
  const bool is_best = best_rows_.contains(index.row());
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case time: {
        const QDateTime t = QDateTime::fromString(r.time, Qt::ISODateWithMs);
        return t.isValid() ? t.toLocalTime().toString("yyyy-MM-dd HH:mm:ss") : r.time;
      }
      case epoch:
        return r.epoch;
      case step:
        return r.step;
      case monitored:
        if (r.monitor.isEmpty() || !r.value) return r.reason.isEmpty() ? "—" : r.reason;
        return QString("%1 = %2").arg(r.monitor).arg(*r.value, 0, 'g', 6);
      case best:
        return is_best ? QString::fromUtf8("★ best") : QString();
      case target:
        return r.target;
      case size:
        return human_bytes(r.bytes);
      case path:
        return r.path;
      default:
        return {};
    }
  }
  if (role == sort_role) {
    switch (index.column()) {
      case time:
        return r.time;  // ISO 8601, UTC: sorts as it reads
      case epoch:
        return r.epoch;
      case step:
        return static_cast<qlonglong>(r.step);
      case monitored:
        return r.value ? QVariant(*r.value) : QVariant(r.reason);
      case best:
        return is_best;
      case target:
        return r.target;
      case size:
        return static_cast<qlonglong>(r.bytes);
      case path:
        return r.path;
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    return QString("%1\nsaved %2 (%3)%4")
        .arg(r.path, r.time, r.reason, r.resumable ? ", resumable" : ", weights only");
  }
  if (role == Qt::FontRole && is_best) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::TextAlignmentRole &&
      (index.column() == epoch || index.column() == step || index.column() == size))
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant CheckpointTable::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case time:
      return "Time";
    case epoch:
      return "Epoch";
    case step:
      return "Step";
    case monitored:
      return "Monitored value";
    case best:
      return "Best";
    case target:
      return "Target";
    case size:
      return "Size";
    case path:
      return "Path";
    default:
      return {};
  }
}

}  // namespace tandem::gui
