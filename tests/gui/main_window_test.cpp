// tandem-gui end to end against the real engine: a live run fills the charts and the checkpoint
// table, Stop saves a resumable checkpoint, quitting during a run waits for that checkpoint, a finished run reopens from the Runs panel, and a
// crashing engine leaves the dashboard alive with the error shown.
#include <QDirIterator>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMenu>
#include <QMessageBox>
#include <QProgressDialog>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QScatterSeries>
#include <QTableWidget>
#include <QtTest>

#include <signal.h>

#include "checkpoints_panel.hpp"
#include "launch_panel.hpp"
#include "live_run_panel.hpp"
#include "log_panel.hpp"
#include "main_window.hpp"
#include "run_folder.hpp"
#include "runs_panel.hpp"

using namespace tandem::gui;

namespace {

QSet<QString> h5_files_under(const QString& dir) {
  QSet<QString> files;
  QDirIterator it(dir, {"*.h5"}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) files.insert(QFileInfo(it.next()).absoluteFilePath());
  return files;
}

QString read_file(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

QSet<QString> table_paths(CheckpointsPanel* panel) {
  QSet<QString> paths;
  for (int row = 0; row < panel->table()->rowCount(); ++row)
    paths.insert(QFileInfo(panel->table()->record(row).path).absoluteFilePath());
  return paths;
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;
  QString config_;
  QString first_run_;

 private Q_SLOTS:
  void initTestCase() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    QVERIFY(tmp_.isValid());
    config_ = tmp_.filePath("tiny-run.json");
    QVERIFY(QFile::copy(QString(TANDEM_GUI_TEST_DATA) + "/tiny-run.json", config_));
  }

  void live_run_fills_the_charts_and_the_checkpoint_table() {
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws"));
    window.show();
    QVERIFY(window.launch_panel()->open_config(config_));
    QTRY_VERIFY_WITH_TIMEOUT(window.launch_panel()->config_valid(), 30000);
    QSignalSpy ended(&window, &MainWindow::run_ended);
    window.launch_panel()->start();
    QVERIFY(window.engine_run());
    QCOMPARE(window.tabs()->currentIndex(), int(MainWindow::run_tab));
    QVERIFY(ended.wait(60000));
    QCOMPARE(ended.front().front().toInt(), 0);
    RunHistory* run = window.shown_run();
    QVERIFY(run);
    first_run_ = run->run_dir();
    QVERIFY(first_run_.startsWith(tmp_.filePath("ws")));
    QCOMPARE(run->status(), RunHistory::Status::finished);
    window.live_panel()->refresh();

    // Every metric, train against validation, per batch.
    MetricChart* loss = window.live_panel()->chart("loss");
    QVERIFY(loss);
    QVERIFY(window.live_panel()->chart("accuracy"));
    QVERIFY(window.live_panel()->chart("learning rate"));
    QVERIFY(window.live_panel()->chart("samples/s"));
    QVERIFY(window.live_panel()->chart("replica step time (ms)"));  // replica_stats is on
    const int steps = int(run->step());
    const int epochs = run->epoch();
    QVERIFY(epochs >= 1);
    QCOMPARE(loss->line_count(), 2);
    QCOMPARE(loss->history_points(0), steps);
    QCOMPARE(loss->history_points(1), epochs);
    QVERIFY(loss->drawn_points(0) > 0);
    // Checkpoints are marked on the charts at their step, and told in the Log as they happen;
    // device utilisation was sampled every 2 s from the start (the dashboard asks for it).
    QVERIFY(!run->markers().isEmpty());
    QVERIFY(loss->marker_series()->count() > 0);
    QVERIFY2(loss->marker_text_at(double(run->markers().front().step)).contains("checkpoint"),
             qPrintable(loss->marker_text_at(double(run->markers().front().step))));
    QVERIFY2(window.log_panel()->text().contains(QRegularExpression(
                 "tandem-gui: epoch \\d+, step \\d+: checkpoint [^ ]+\\.h5 \\(val_loss")),
             qPrintable(window.log_panel()->text()));
    QVERIFY(window.engine_run()->arguments().join(' ').contains("--device-stats 2"));
    window.live_panel()->set_x_axis(LiveRunPanel::XAxis::epoch);
    QCOMPARE(window.live_panel()->chart("loss")->history_points(0), epochs);

    // The checkpoint table lists exactly the checkpoint files on disk (top-k pruned ones gone).
    const QSet<QString> on_disk = h5_files_under(first_run_);
    QVERIFY(on_disk.size() >= 2);
    QCOMPARE(table_paths(window.checkpoints_panel()), on_disk);
    QVERIFY(!window.checkpoints_panel()->table()->best_rows().isEmpty());

    // Evaluate the best checkpoint through the engine.
    window.checkpoints_panel()->select(window.checkpoints_panel()->table()->best_rows().back());
    QSignalSpy evaluated(window.checkpoints_panel(), &CheckpointsPanel::evaluation_finished);
    window.checkpoints_panel()->evaluate_selected();
    QVERIFY(evaluated.wait(30000));
    QVERIFY2(evaluated.front().front().toString().contains("loss"),
             qPrintable(evaluated.front().front().toString()));
  }

  void stop_saves_a_resumable_checkpoint_and_resume_continues() {
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-stop"));
    TrainLaunch launch;
    launch.config_path = config_;
    launch.overrides = {"epochs=100000", "callbacks=[]"};
    QVERIFY(window.start_run(launch));
    RunHistory* run = window.shown_run();
    // Charts fill while the run goes on.
    QTRY_VERIFY_WITH_TIMEOUT(run->step() >= 100, 30000);
    window.live_panel()->refresh();
    QVERIFY(window.live_panel()->chart("loss")->history_points(0) > 0);
    QVERIFY(window.live_panel()->stop_button()->isEnabled());
    QSignalSpy ended(&window, &MainWindow::run_ended);
    window.stop_run();
    QVERIFY(ended.wait(30000));
    QCOMPARE(run->status(), RunHistory::Status::stopped);
    const qint64 stopped_at = run->step();
    const QString model = QDir(run->run_dir()).filePath("model.h5");
    QVERIFY(QFileInfo::exists(model));
    QCOMPARE(window.checkpoints_panel()->table()->rowCount(), 1);
    QVERIFY(window.checkpoints_panel()->table()->record(0).resumable);

    // Resume from the table's checkpoint: the run continues past where it stopped.
    window.checkpoints_panel()->select(0);
    window.checkpoints_panel()->resume_selected();
    QVERIFY(window.engine_run()->running());
    QVERIFY(window.engine_run()->arguments().contains("--resume"));
    RunHistory* resumed = window.shown_run();
    QVERIFY(resumed != run);
    QTRY_VERIFY_WITH_TIMEOUT(resumed->step() > stopped_at + 20, 30000);
    // The same run goes on: its charts from step 1, and the log of the first part kept.
    QCOMPARE(resumed->batch_series("loss").front().x(), 1.0);
    QVERIFY(resumed->batch_series("loss").size() > stopped_at);
    QVERIFY(window.log_panel()->text().contains("sending SIGINT"));
    QVERIFY(window.log_panel()->text().contains("tandem-gui: resuming from"));
    ended.clear();
    window.stop_run();
    QVERIFY(ended.wait(30000));
    QCOMPARE(resumed->status(), RunHistory::Status::stopped);
  }

  void quitting_during_a_run_waits_for_the_checkpoint() {
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-quit"));
    window.show();
    TrainLaunch launch;
    launch.config_path = config_;
    launch.overrides = {"epochs=100000", "callbacks=[]"};
    QVERIFY(window.start_run(launch));
    RunHistory* run = window.shown_run();
    QTRY_VERIFY_WITH_TIMEOUT(run->step() >= 20, 30000);
    const QString run_dir = run->run_dir();  // from run_started
    QVERIFY(!run_dir.isEmpty());
    QCOMPARE(engine_running_in(run_dir), std::optional<bool>(true));
    // Ctrl+Q, "Stop the run and quit?" -> Yes.
    QTimer::singleShot(200, [] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      QVERIFY(box);
      box->button(QMessageBox::Yes)->click();
    });
    QSignalSpy ended(&window, &MainWindow::run_ended);
    QVERIFY(!window.close());  // not yet: the engine is saving
    QVERIFY(window.isVisible());
    QVERIFY(window.quit_dialog());
    QVERIFY(window.quit_dialog()->isVisible());
    QVERIFY(ended.wait(30000));
    // The window closed itself once the engine had saved its resumable checkpoint.
    QTRY_VERIFY_WITH_TIMEOUT(!window.isVisible(), 5000);
    QCOMPARE(run->status(), RunHistory::Status::stopped);
    QVERIFY(QFileInfo::exists(QDir(run_dir).filePath("model.h5")));
    QCOMPARE(engine_running_in(run_dir), std::optional<bool>(false));
    QCOMPARE(summarize_run_folder(run_dir).status, QString("stopped"));
  }

  // A run a terminal's engine is writing, opened from its folder: followed as it goes (it stayed
  // at the moment it was opened, "running" with a stale ETA, after the engine had finished), and
  // its end is seen.
  void a_run_started_elsewhere_is_followed_to_its_end() {
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-follow"));
    window.show();
    const QString run_dir = tmp_.filePath("ws-follow/terminal-run");
    QProcess engine;
    engine.start(qEnvironmentVariable("TANDEM_ENGINE"),
                 {"train", config_, "--run-dir", run_dir, "-q", "--set", "epochs=100000", "--set",
                  "callbacks=[]"});
    QVERIFY(engine.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(engine_running_in(run_dir) == std::optional<bool>(true), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(summarize_run_folder(run_dir).status == "running", 30000);
    QVERIFY(window.open_run(run_dir));
    RunHistory* run = window.shown_run();
    QVERIFY(run);
    const qint64 opened_at = run->step();
    QTRY_VERIFY_WITH_TIMEOUT(run->step() > opened_at + 20, 30000);
    QCOMPARE(run->status(), RunHistory::Status::running);
    ::kill(static_cast<pid_t>(engine.processId()), SIGINT);  // it saves, then ends the stream
    QVERIFY(engine.waitForFinished(30000));
    QTRY_VERIFY_WITH_TIMEOUT(run->status() == RunHistory::Status::stopped, 10000);
    // Every event of the file was applied once: the steps shown are the file's.
    EventFile file = read_event_file(QDir(run_dir).filePath("events.jsonl"));
    RunHistory reread;
    reread.apply_all(file.events);
    QCOMPARE(run->step(), reread.step());
    QCOMPARE(run->batch_series("loss").size(), reread.batch_series("loss").size());
  }

  void shortcuts_work_on_the_tab_of_their_button() {
    // Ctrl+R, Ctrl+S and Ctrl+. were bound twice (button and menu) and did nothing on the very
    // tab holding the button; Ctrl+N, promised by a tooltip, did nothing at all.
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-keys"));
    window.show();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    // The tiny run without its callbacks (early stopping would end it on its own); this test
    // edits and saves it.
    const QString config = tmp_.filePath("keys-run.json");
    QJsonObject json = QJsonDocument::fromJson(read_file(config_).toUtf8()).object();
    json.remove("callbacks");
    QFile out(config);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(QJsonDocument(json).toJson());
    out.close();
    QVERIFY(window.launch_panel()->open_config(config));
    QTRY_VERIFY_WITH_TIMEOUT(window.launch_panel()->config_valid(), 30000);
    window.show_tab(MainWindow::launch_tab);

    // Edits to save: a long run, so that it is still running when Ctrl+. comes.
    const int epochs = window.launch_panel()->epochs_box()->maximum();
    window.launch_panel()->epochs_box()->setValue(epochs);
    QTRY_VERIFY(window.launch_panel()->modified());
    QVERIFY(!read_file(config).contains(QString("\"epochs\": %1").arg(epochs)));
    QTest::keyClick(&window, Qt::Key_S, Qt::ControlModifier);
    QVERIFY(!window.launch_panel()->modified());
    QVERIFY(read_file(config).contains(QString("\"epochs\": %1").arg(epochs)));

    QTimer::singleShot(300, [&window] {
      QVERIFY(window.launch_panel()->new_menu()->isVisible());
      window.launch_panel()->new_menu()->close();
    });
    window.show_tab(MainWindow::runs_tab);
    QTest::keyClick(&window, Qt::Key_N, Qt::ControlModifier);
    QCOMPARE(window.tabs()->currentIndex(), int(MainWindow::launch_tab));
    QTest::qWait(600);  // the menu opened (queued) and was closed by the check above

    window.show_tab(MainWindow::launch_tab);
    QTest::keyClick(&window, Qt::Key_R, Qt::ControlModifier);
    QVERIFY(window.engine_run());
    QVERIFY(window.engine_run()->running());
    QTRY_VERIFY_WITH_TIMEOUT(window.shown_run()->step() >= 1, 30000);
    window.show_tab(MainWindow::run_tab);
    QTRY_VERIFY(window.live_panel()->stop_action()->isEnabled());
    QSignalSpy ended(&window, &MainWindow::run_ended);
    QSignalSpy stop(window.live_panel(), &LiveRunPanel::stop_requested);
    QTest::keyClick(&window, Qt::Key_Period, Qt::ControlModifier);
    QCOMPARE(stop.count(), 1);
    QVERIFY(ended.wait(30000));
    QCOMPARE(window.shown_run()->status(), RunHistory::Status::stopped);
  }

  void a_finished_run_reopens_from_the_runs_panel_and_compares() {
    QVERIFY(!first_run_.isEmpty());
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws"));
    QVERIFY(window.runs_panel()->runs().size() >= 1);
    QCOMPARE(window.runs_panel()->runs().front().status, QString("finished"));
    QSignalSpy open(window.runs_panel(), &RunsPanel::open_requested);
    QVERIFY(window.runs_panel()->select_run(first_run_));
    QVERIFY(window.open_run(first_run_));
    RunHistory* run = window.shown_run();
    QCOMPARE(run->status(), RunHistory::Status::finished);
    window.live_panel()->refresh();
    MetricChart* loss = window.live_panel()->chart("loss");
    QVERIFY(loss);
    QCOMPARE(loss->history_points(0), run->step());
    QCOMPARE(table_paths(window.checkpoints_panel()), h5_files_under(first_run_));

    // Compared with the stopped run of the other workspace: train and validation of both, and
    // the table of what differs (that run trained for other epochs).
    QDir stop_ws(tmp_.filePath("ws-stop"));
    const QStringList other = stop_ws.entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    QVERIFY(!other.isEmpty());
    QVERIFY(window.compare_runs({first_run_, stop_ws.filePath(other.front())}));
    window.live_panel()->refresh();
    QVERIFY(window.live_panel()->comparing());
    loss = window.live_panel()->chart("loss");
    QCOMPARE(loss->line_count(), 4);
    QVERIFY(loss->history_points(2) > 0);  // the second run's train line
    QCOMPARE(window.live_panel()->comparison_table()->table()->rowCount(), 2);
    // Opening a run shows it alone: a comparison never stays on by itself.
    QVERIFY(window.open_run(first_run_));
    QVERIFY(!window.live_panel()->comparing());
    QCOMPARE(window.live_panel()->chart("loss")->line_count(), 2);
    QVERIFY(!window.live_panel()->comparison_table()->isVisibleTo(window.live_panel()));
  }

  // Every tab fits a 1280×720 screen, with three runs compared (long names, the table) and the
  // devices dock open.
  void every_tab_fits_1280_by_720() {
    QVERIFY(!first_run_.isEmpty());
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws"));
    QDir stop_ws(tmp_.filePath("ws-stop"));
    const QStringList other = stop_ws.entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    QVERIFY(!other.isEmpty());
    // A copy of the first run under a very long name.
    const QString long_run = tmp_.filePath("ws-long/run");
    QVERIFY(QDir().mkpath(long_run));
    QFile events(QDir(first_run_).filePath("events.jsonl"));
    QVERIFY(events.open(QIODevice::ReadOnly));
    const QString name = window.runs_panel()->runs().front().name;
    QByteArray text = events.readAll();
    text.replace(("\"" + name + "\"").toUtf8(),
                 ("\"" + QString(60, 'n') + "-" + QString(60, 'm') + "\"").toUtf8());
    QFile copy(QDir(long_run).filePath("events.jsonl"));
    QVERIFY(copy.open(QIODevice::WriteOnly));
    copy.write(text);
    copy.close();
    QVERIFY(window.compare_runs({first_run_, stop_ws.filePath(other.front()), long_run}));
    QVERIFY(window.live_panel()->run_labels().back().size() > 120);
    window.resize(1280, 720);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    for (int tab = 0; tab < window.tabs()->count(); ++tab) {
      window.show_tab(static_cast<MainWindow::Tab>(tab));
      QTest::qWait(50);
      const QSize needed = window.minimumSizeHint().expandedTo(window.minimumSize());
      QVERIFY2(needed.width() <= 1280 && needed.height() <= 720,
               qPrintable(QString("tab %1 needs %2×%3").arg(window.tabs()->tabText(tab))
                              .arg(needed.width()).arg(needed.height())));
      QCOMPARE(window.size(), QSize(1280, 720));
    }
  }

  void window_state_workspace_and_last_config_are_remembered() {
    // QSettings in this test's own folder: not the user's, and not ~/.qttest, which a second
    // main_window_test running at the same time (two checkouts' ctest) would write in between.
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, tmp_.filePath("settings"));
    QSettings().clear();
    QVERIFY(QSettings().fileName().startsWith(tmp_.filePath("settings")));
    const QString workspace = tmp_.filePath("ws-remembered");
    {
      MainWindow window(true);
      window.set_workspace(workspace);
      QVERIFY(window.launch_panel()->open_config(config_));
      window.resize(1111, 777);
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      window.show_tab(MainWindow::runs_tab);
      QVERIFY(window.close());
    }
    MainWindow again(true);
    QCOMPARE(again.workspace(), workspace);
    QCOMPARE(again.launch_panel()->config_path(), QFileInfo(config_).absoluteFilePath());
    QCOMPARE(again.tabs()->currentIndex(), int(MainWindow::runs_tab));
    QCOMPARE(again.size(), QSize(1111, 777));
    QSettings().clear();
  }

  void a_two_process_mpi_run_is_watched_live() {
    if (mpirun_path().isEmpty()) QSKIP("mpirun is not installed");
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-mpi"));
    QVERIFY(window.launch_panel()->open_config(config_));
    window.launch_panel()->processes_box()->setValue(2);
    QSignalSpy ended(&window, &MainWindow::run_ended);
    window.launch_panel()->start();
    QVERIFY(window.engine_run());
    QVERIFY(window.engine_run()->arguments().contains("-np"));
    QVERIFY(ended.wait(60000));
    RunHistory* run = window.shown_run();
    QCOMPARE(run->world_size(), 2);
    QCOMPARE(run->status(), RunHistory::Status::finished);
    window.live_panel()->refresh();
    QVERIFY(window.live_panel()->status_line().contains("2 processes × cpu:2"));
    QCOMPARE(window.live_panel()->chart("loss")->history_points(0), run->step());
    QVERIFY(run->step() > 0);
    // replica_stats from rank 0 covers both processes' replicas (cpu:2 each).
    QCOMPARE(run->replica_labels().size(), 4);
    QCOMPARE(run->replica_labels()[3], QString("3: cpu, rank 1"));
    QCOMPARE(table_paths(window.checkpoints_panel()), h5_files_under(run->run_dir()));

    // Stop: SIGUSR1 to mpirun, which forwards it to both ranks and waits for rank 0's save.
    TrainLaunch endless;
    endless.config_path = config_;
    endless.processes = 2;
    endless.overrides = {"epochs=100000", "callbacks=[]"};
    ended.clear();
    QVERIFY(window.start_run(endless));
    RunHistory* stopped = window.shown_run();
    QTRY_VERIFY_WITH_TIMEOUT(stopped->step() >= 10, 60000);
    window.stop_run();
    QVERIFY(ended.wait(60000));
    QVERIFY(window.log_panel()->text().contains("sending SIGUSR1 to mpirun"));
    // On a failure, the engine's last words say why (a stop the ranks did not agree on, a
    // rank that ended first).
    QVERIFY2(stopped->status() == RunHistory::Status::stopped,
             qPrintable("status " + stopped->status_text() + "; the log ends:\n" +
                        window.log_panel()->text().right(3000)));
    QVERIFY(QFileInfo::exists(QDir(stopped->run_dir()).filePath("model.h5")));
  }

  void a_crashing_engine_leaves_the_dashboard_alive_with_the_error() {
    // A stand-in engine: starts a run, writes half an event, complains and dies of SIGSEGV.
    const QString fake = tmp_.filePath("crashing-tandem");
    QFile script(fake);
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write(
        "#!/bin/sh\n"
        "echo '{\"schema\":1,\"event\":\"run_started\",\"time\":\"t\",\"name\":\"doomed\"}'\n"
        "printf '{\"schema\":1,\"event\":\"batch_en'\n"
        "echo 'tandem: error: simulated failure in a kernel' >&2\n"
        "kill -SEGV $$\n");
    script.close();
    script.setPermissions(script.permissions() | QFile::ExeOwner);
    const QByteArray real = qgetenv("TANDEM_ENGINE");
    qputenv("TANDEM_ENGINE", fake.toUtf8());
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-crash"));
    QSignalSpy ended(&window, &MainWindow::run_ended);
    TrainLaunch launch;
    launch.config_path = config_;
    QVERIFY(window.start_run(launch));
    QVERIFY(ended.wait(20000));
    qputenv("TANDEM_ENGINE", real);
    RunHistory* run = window.shown_run();
    QCOMPARE(run->name(), QString("doomed"));
    QCOMPARE(run->status(), RunHistory::Status::failed);
    QVERIFY2(run->error().contains("crashed"), qPrintable(run->error()));
    QVERIFY(run->error().contains("simulated failure"));
    QVERIFY(window.log_panel()->failure().contains("simulated failure"));
    QVERIFY(window.log_panel()->text().contains("tandem: error: simulated failure"));
    QCOMPARE(window.engine_run()->stream_issues().size(), 1);  // the partial line
    QVERIFY(window.isEnabled());
  }

  void a_config_error_is_shown_from_the_engine() {
    const QString bad = tmp_.filePath("bad-run.json");
    QFile file(bad);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(
        "{\"name\": \"bad\", \"epochs\": \"three\", \"model\": {}, \"loss\": \"mse\", "
        "\"data\": {\"train\": {\"type\": \"synthetic\"}}}");
    file.close();
    MainWindow window(false);
    window.set_workspace(tmp_.filePath("ws-bad"));
    QSignalSpy ended(&window, &MainWindow::run_ended);
    TrainLaunch launch;
    launch.config_path = bad;
    QVERIFY(window.start_run(launch));
    QVERIFY(ended.wait(20000));
    QCOMPARE(ended.front().front().toInt(), 2);
    QVERIFY2(window.log_panel()->failure().contains("config error at"),
             qPrintable(window.log_panel()->failure()));
    QCOMPARE(window.tabs()->currentIndex(), int(MainWindow::log_tab));
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
