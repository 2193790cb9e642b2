// The Runs panel: lists a workspace's run folders, notices new ones, opens one, compares several.
#include <QPushButton>
#include <QTableWidget>
#include <QtTest>

#include "runs_panel.hpp"

using namespace tandem::gui;

namespace {

void make_run(const QString& dir, const char* name, const char* started) {
  QDir().mkpath(dir);
  QFile f(dir + "/events.jsonl");
  if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write");
  f.write(
      QString(
          R"({"schema":1,"event":"run_started","time":"%1","name":"%2","config":{"epochs":2}})"
          "\n"
          R"({"schema":1,"event":"run_finished","time":"t","epochs_done":2,"interrupted":false})"
          "\n")
          .arg(started, name)
          .toUtf8());
}

}  // namespace

class RunsPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lists_follows_opens_and_compares() {
    QTemporaryDir ws;
    make_run(ws.filePath("a"), "first", "2026-11-21T08:00:00.000Z");
    RunsPanel panel;
    QSignalSpy changed(&panel, &RunsPanel::workspace_changed);
    panel.set_workspace(ws.path());
    QCOMPARE(changed.count(), 1);
    QCOMPARE(panel.runs().size(), 1);
    QCOMPARE(panel.table()->item(0, 0)->text(), QString("first"));
    QCOMPARE(panel.table()->item(0, 2)->text(), QString("finished"));
    QCOMPARE(panel.table()->item(0, 3)->text(), QString("2/2"));

    // A new run folder appears without a click (file system watcher, debounced).
    make_run(ws.filePath("b"), "second", "2026-11-21T09:00:00.000Z");
    QTRY_COMPARE_WITH_TIMEOUT(panel.runs().size(), 2, 5000);
    QCOMPARE(panel.runs().front().name, QString("second"));  // newest first

    QSignalSpy open(&panel, &RunsPanel::open_requested);
    QSignalSpy compare(&panel, &RunsPanel::compare_requested);
    QPushButton *open_button = nullptr, *compare_button = nullptr;
    for (QPushButton* b : panel.findChildren<QPushButton*>()) {
      if (b->text() == "Open") open_button = b;
      if (b->text().startsWith("Compare")) compare_button = b;
    }
    QVERIFY(open_button && compare_button);
    QVERIFY(panel.select_run(ws.filePath("a")));
    QVERIFY(!compare_button->isEnabled());  // one run: nothing to compare
    open_button->click();
    QCOMPARE(open.count(), 1);
    QCOMPARE(open.front().front().toString(), QDir(ws.filePath("a")).absolutePath());
    // Two selected: Compare, in table order (newest first); Open is for one run.
    QVERIFY(panel.select_run(ws.filePath("b"), true));
    QCOMPARE(panel.selected_runs().size(), 2);
    QVERIFY(!open_button->isEnabled());
    QVERIFY(compare_button->isEnabled());
    QCOMPARE(compare_button->text(), QString("Compare 2 runs"));
    compare_button->click();
    QCOMPARE(compare.count(), 1);
    QCOMPARE(compare.front().front().toStringList(),
             QStringList({QDir(ws.filePath("b")).absolutePath(),
                          QDir(ws.filePath("a")).absolutePath()}));
    // The selection survives a rescan.
    panel.rescan();
    QCOMPARE(panel.selected_runs().size(), 2);
    QVERIFY(!panel.select_run(ws.filePath("nope")));
    // At most ten, one colour each (2,000 froze the window for a minute).
    for (int i = 0; i < 10; ++i)
      make_run(ws.filePath(QString("more%1").arg(i)), "more", "2026-11-21T07:00:00.000Z");
    panel.rescan();
    for (int i = 0; i < 9; ++i)
      QVERIFY(panel.select_run(ws.filePath(QString("more%1").arg(i)), true));
    QCOMPARE(panel.selected_runs().size(), 11);
    QVERIFY(!compare_button->isEnabled());
    QCOMPARE(compare_button->text(), QString("Compare (at most 10 runs)"));
  }

  // A workspace that is missing or no folder says so (the list was empty without a word).
  void a_workspace_that_cannot_be_listed_says_why() {
    QTemporaryDir tmp;
    RunsPanel panel;
    panel.set_workspace(tmp.filePath("missing"));
    QVERIFY2(panel.problem().startsWith("No such folder: "), qPrintable(panel.problem()));
    QFile file(tmp.filePath("a-file"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.close();
    panel.set_workspace(tmp.filePath("a-file"));
    QVERIFY2(panel.problem().startsWith("Not a folder: "), qPrintable(panel.problem()));
    panel.set_workspace(tmp.path());
    QCOMPARE(panel.problem(), QString());
  }
};

QTEST_MAIN(RunsPanelTest)
#include "runs_panel_test.moc"
