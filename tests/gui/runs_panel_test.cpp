// The Runs panel: lists a workspace's run folders, notices new ones, opens and overlays.
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
  void lists_follows_opens_and_overlays() {
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
    QSignalSpy overlay(&panel, &RunsPanel::overlay_requested);
    QVERIFY(panel.select_run(ws.filePath("a")));
    for (QPushButton* b : panel.findChildren<QPushButton*>()) {
      if (b->text() == "Open") b->click();
      if (b->text() == "Overlay on current") b->click();
    }
    QCOMPARE(open.count(), 1);
    QCOMPARE(open.front().front().toString(), QDir(ws.filePath("a")).absolutePath());
    QCOMPARE(overlay.count(), 1);
    QVERIFY(!panel.select_run(ws.filePath("nope")));
  }
};

QTEST_MAIN(RunsPanelTest)
#include "runs_panel_test.moc"
