// The checkpoint table: rows are the checkpoint files that exist, newest record per path, the
// newest best marked; sizes in binary units.
#include <QtTest>

#include "checkpoint_table.hpp"

using namespace tandem::gui;

namespace {

Event saved(const QString& path, int epoch, bool best, double value) {
  QJsonObject o{{"schema", 1},
                {"event", "checkpoint_saved"},
                {"time", "2026-11-21T08:00:00.000Z"},
                {"path", path},
                {"epoch", epoch},
                {"step", epoch * 10},
                {"monitor", "val_loss"},
                {"value", value},
                {"best", best},
                {"target", "template"},
                {"bytes", 2048},
                {"trigger", "epoch"},
                {"resumable", true}};
  return {"checkpoint_saved", o};
}

void touch(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
}

}  // namespace

class CheckpointTableTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void rows_are_the_files_on_disk() {
    QTemporaryDir dir;
    const QString a = dir.filePath("e1.h5"), b = dir.filePath("e2.h5"), c = dir.filePath("e3.h5");
    touch(a);
    touch(c);  // e2.h5 was pruned by save_top_k
    RunHistory run;
    CheckpointTable table;
    table.set_run(&run);
    run.apply(saved(a, 1, true, 0.5));
    run.apply(saved(b, 2, true, 0.4));
    run.apply(saved(c, 3, false, 0.45));
    QCOMPARE(table.rowCount(), 2);
    QCOMPARE(table.record(0).path, a);
    QCOMPARE(table.record(1).path, c);
    QCOMPARE(table.best_row(), 0);  // e2 (the newest best) is gone; e1 was best when saved
    QCOMPARE(table.data(table.index(0, CheckpointTable::best), Qt::DisplayRole).toString(),
             QString::fromUtf8("★ best"));
    QCOMPARE(table.data(table.index(0, CheckpointTable::monitored), Qt::DisplayRole).toString(),
             QString("val_loss = 0.5"));
    QCOMPARE(table.data(table.index(0, CheckpointTable::size), Qt::DisplayRole).toString(),
             QString("2.0 KiB"));
    // A file deleted later disappears at the next refresh; a rewritten path keeps one row.
    QFile::remove(a);
    run.apply(saved(c, 4, true, 0.3));
    QCOMPARE(table.rowCount(), 1);
    QCOMPARE(table.record(0).epoch, 4);
    QCOMPARE(table.best_row(), 0);
  }

  void sizes_read_as_people_read_them() {
    QCOMPARE(human_bytes(0), QString("0 B"));
    QCOMPARE(human_bytes(1023), QString("1023 B"));
    QCOMPARE(human_bytes(1536), QString("1.5 KiB"));
    QCOMPARE(human_bytes(5LL * 1024 * 1024 * 1024), QString("5.0 GiB"));
  }

  void a_destroyed_run_empties_the_table() {
    QTemporaryDir dir;
    touch(dir.filePath("x.h5"));
    auto* run = new RunHistory;
    CheckpointTable table;
    table.set_run(run);
    run->apply(saved(dir.filePath("x.h5"), 1, false, 1));
    QCOMPARE(table.rowCount(), 1);
    delete run;
    table.refresh();
    QCOMPARE(table.rowCount(), 0);
  }
};

QTEST_MAIN(CheckpointTableTest)
#include "checkpoint_table_test.moc"
