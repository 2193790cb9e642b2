// The checkpoint table: rows are the checkpoint files that exist, newest record per path, the
// newest best of each checkpoint callback marked; sizes in binary units; the panel's view sorts
// by any column and still acts on the right file.
#include <QtTest>

#include "checkpoint_table.hpp"
#include "checkpoints_panel.hpp"

#include <QTableView>

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

// An HDF5 file as far as the table looks: the signature, then `size` bytes in all.
void touch(const QString& path, qint64 size = 2048) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  QByteArray bytes("\x89HDF\r\n\x1a\n", 8);
  bytes.resize(size, '\0');
  f.write(bytes);
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
    QCOMPARE(table.best_rows(), QList<int>{0});  // e2 (the newest best) is gone; e1 was best when saved
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
    QCOMPARE(table.best_rows(), QList<int>{0});
  }

  // A stream names its checkpoints, and a crafted one may name any file: only HDF5 files are
  // listed, with their size on disk (/etc/passwd was listed as a checkpoint of the event's size).
  void rows_are_hdf5_files_with_their_size_on_disk() {
    QTemporaryDir dir;
    const QString real = dir.filePath("e1.h5"), text = dir.filePath("passwd");
    touch(real, 3 * 1024);
    QFile f(text);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("root:x:0:0:root:/root:/bin/bash\n");
    f.close();
    RunHistory run;
    CheckpointTable table;
    table.set_run(&run);
    run.apply(saved(real, 1, true, 0.5));  // the event says 2048 bytes
    run.apply(saved(text, 2, false, 0.4));
    run.apply(saved(dir.path(), 3, false, 0.4));  // a folder
    QCOMPARE(table.rowCount(), 1);
    QCOMPARE(table.record(0).path, real);
    QCOMPARE(table.data(table.index(0, CheckpointTable::size), Qt::DisplayRole).toString(),
             QString("3.0 KiB"));
  }

  void each_checkpoint_callback_keeps_its_own_best() {
    // Two checkpoint callbacks on one monitor, writing to their own folders (checkpoints.json
    // marks a best in each): two stars, the newest best of each.
    QTemporaryDir dir;
    QDir(dir.path()).mkpath("every");
    QDir(dir.path()).mkpath("top");
    const QString e1 = dir.filePath("every/e1.h5"), e2 = dir.filePath("every/e2.h5"),
                  t1 = dir.filePath("top/t1.h5"), t2 = dir.filePath("top/t2.h5");
    for (const QString& f : {e1, e2, t1, t2}) touch(f);
    RunHistory run;
    CheckpointTable table;
    table.set_run(&run);
    run.apply(saved(e1, 1, true, 0.5));
    run.apply(saved(t1, 1, true, 0.5));
    run.apply(saved(e2, 2, false, 0.6));
    run.apply(saved(t2, 2, true, 0.45));
    QCOMPARE(table.best_rows(), (QList<int>{0, 3}));
    QVERIFY(table.is_best(0) && table.is_best(3) && !table.is_best(1) && !table.is_best(2));
    // The values the view sorts by are numbers, not their text ("2.0 KiB", "val_loss = 0.5").
    QCOMPARE(table.data(table.index(3, CheckpointTable::monitored), CheckpointTable::sort_role),
             QVariant(0.45));
    QCOMPARE(table.data(table.index(3, CheckpointTable::size), CheckpointTable::sort_role),
             QVariant(qlonglong{2048}));
  }

  void the_panel_sorts_by_any_column_and_selects_the_model_row() {
    QTemporaryDir dir;
    const QString a = dir.filePath("a.h5"), b = dir.filePath("b.h5"), c = dir.filePath("c.h5");
    for (const QString& f : {a, b, c}) touch(f);
    RunHistory run;
    CheckpointsPanel panel;
    panel.set_run(&run);
    run.apply(saved(a, 1, true, 0.5));
    run.apply(saved(b, 2, false, 0.9));
    run.apply(saved(c, 3, true, 0.2));
    // Sorted by the monitored value, largest first: b (0.9), a (0.5), c (0.2).
    panel.view()->sortByColumn(CheckpointTable::monitored, Qt::DescendingOrder);
    const QAbstractItemModel* shown = panel.view()->model();
    QCOMPARE(shown->index(0, CheckpointTable::path).data().toString(), b);
    QCOMPARE(shown->index(2, CheckpointTable::path).data().toString(), c);
    panel.view()->selectRow(0);  // the top row as shown
    QCOMPARE(panel.selected_path(), b);
    panel.select(0);  // the table's first row, wherever the view shows it
    QCOMPARE(panel.selected_path(), a);
    // A new run: no stale evaluation text from the previous one.
    RunHistory next;
    panel.set_run(&next);
    QCOMPARE(panel.evaluation_text(), QString());
    QCOMPARE(panel.selected_path(), QString());
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
