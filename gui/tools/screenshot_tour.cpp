// Drives tandem-gui through a real run and saves a screenshot of every panel (docs/img/).
// Usage: tandem-gui-tour CONFIG OUTPUT_DIR [WORKSPACE]. Run it with QT_QPA_PLATFORM=offscreen or
// under xvfb-run (scripts/screenshots does).
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QListWidget>
#include <QPixmap>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QThread>
#include <algorithm>
#include <cstdio>
#include <functional>

#include "checkpoints_panel.hpp"
#include "devices_panel.hpp"
#include "engine_run.hpp"
#include "launch_panel.hpp"
#include "live_run_panel.hpp"
#include "log_panel.hpp"
#include "main_window.hpp"
#include "runs_panel.hpp"
#include "schema_form.hpp"

namespace {

// Runs the event loop until `done` holds or `seconds` pass.
bool wait_until(const std::function<bool()>& done, double seconds) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > seconds * 1000) return false;
    QApplication::processEvents(QEventLoop::AllEvents, 50);
    QThread::msleep(10);
  }
  return true;
}

void settle(int ms) {
  wait_until([] { return false; }, ms / 1000.0);
}

bool save(QWidget* widget, const QString& path) {
  const bool ok = widget->grab().save(path);
  std::printf("%s %s\n", ok ? "saved" : "FAILED", qPrintable(path));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("tandem-gui-tour");
  if (argc < 3) {
    std::fprintf(stderr, "usage: tandem-gui-tour CONFIG OUTPUT_DIR [WORKSPACE]\n");
    return 2;
  }
  const QString config = QFileInfo(argv[1]).absoluteFilePath();
  const QDir out(argv[2]);
  QDir().mkpath(out.absolutePath());
  const QString workspace = argc > 3 ? QString(argv[3]) : QDir::temp().filePath("tandem-tour");
  QDir(workspace).removeRecursively();

  using tandem::gui::MainWindow;
  MainWindow window(false);
  window.set_workspace(workspace);
  window.resize(1440, 900);
  window.show();
  int failures = 0;

  // The tour edits and saves the config: work on a copy beside the workspace.
  const QString copy = QDir(workspace).filePath("../" + QFileInfo(config).fileName());
  QDir().mkpath(workspace);
  QFile::remove(copy);
  if (!QFile::copy(config, copy)) {
    std::fprintf(stderr, "cannot copy %s to %s\n", qPrintable(config), qPrintable(copy));
    return 1;
  }
  QFile::setPermissions(copy, QFile::ReadOwner | QFile::WriteOwner);

  // Launch: the config, validated by the engine, a callback's option form shown.
  window.launch_panel()->open_config(copy);
  window.show_tab(MainWindow::launch_tab);
  if (!wait_until([&] { return window.launch_panel()->config_valid(); }, 30)) {
    std::fprintf(stderr, "the config did not validate: %s\n",
                 qPrintable(window.launch_panel()->validation_text()));
    return 1;
  }
  auto* callbacks = window.launch_panel()->callback_list();
  for (int i = 0; i < callbacks->count(); ++i)
    if (callbacks->item(i)->text().startsWith("checkpoint")) {
      callbacks->setCurrentRow(i);
      break;
    }
  settle(1500);  // device readings and the plugin catalog arrive
  // Scroll the form to the callback's option form (generated from the plugin's schema).
  if (auto* scroll = window.launch_panel()->findChild<QScrollArea*>())
    scroll->ensureWidgetVisible(window.launch_panel()->options_form(), 0, 0);
  settle(200);
  failures += !save(&window, out.filePath("launch.png"));

  // Two runs: a shorter one at a lower learning rate to overlay, then the config as it is,
  // watched live.
  const QString original = window.launch_panel()->editor_text();
  auto run_once = [&](bool screenshots) {
    if (!screenshots) {
      QJsonObject c = *window.launch_panel()->config();
      c.insert("epochs", 3);
      QJsonObject optimizer = c.value("optimizer").toObject();
      QJsonObject optimizer_config = optimizer.value("config").toObject();
      optimizer_config.insert("learning_rate", 0.0003);
      optimizer.insert("config", optimizer_config);
      c.insert("optimizer", optimizer);
      window.launch_panel()->set_editor_text(QJsonDocument(c).toJson());
    } else {
      window.launch_panel()->set_editor_text(original);
    }
    window.launch_panel()->start();
    if (!window.engine_run()) return false;
    if (screenshots) {
      wait_until([&] { return window.shown_run()->epoch() >= 3; }, 300);
      settle(600);
      failures += !save(&window, out.filePath("run.png"));
      // The dock is as tall as the window; its content is the top.
      QWidget* dock = window.devices_dock();
      const bool ok = dock->grab(QRect(0, 0, dock->width(), std::min(dock->height(), 300)))
                          .save(out.filePath("devices.png"));
      std::printf("%s %s\n", ok ? "saved" : "FAILED", qPrintable(out.filePath("devices.png")));
      failures += !ok;
    }
    return wait_until([&] { return !window.engine_run()->running(); }, 600);
  };
  if (!run_once(false) || !run_once(true)) {
    std::fprintf(stderr, "the run did not finish\n");
    return 1;
  }
  settle(800);
  window.show_tab(MainWindow::checkpoints_tab);
  const QList<int> best = window.checkpoints_panel()->table()->best_rows();
  window.checkpoints_panel()->select(best.isEmpty() ? 0 : best.back());
  window.checkpoints_panel()->evaluate_selected();
  wait_until([&] { return !window.checkpoints_panel()->evaluation_text().endsWith("…"); }, 60);
  settle(300);
  failures += !save(&window, out.filePath("checkpoints.png"));

  window.show_tab(MainWindow::log_tab);
  settle(300);
  failures += !save(&window, out.filePath("log.png"));

  // A run of two MPI processes (mpirun -np 2), watched live from rank 0's stream.
  if (!tandem::gui::mpirun_path().isEmpty()) {
    window.launch_panel()->set_editor_text(original);
    window.launch_panel()->processes_box()->setValue(2);
    window.launch_panel()->start();
    if (window.engine_run()) {
      wait_until([&] { return window.shown_run()->epoch() >= 3; }, 300);
      settle(600);
      failures += !save(&window, out.filePath("run-mpi.png"));
      wait_until([&] { return !window.engine_run()->running(); }, 600);
    } else {
      ++failures;
    }
  }

  // Runs: every run listed; all of them compared (a colour each, the table of what differs).
  window.show_tab(MainWindow::runs_tab);
  window.runs_panel()->rescan();
  settle(300);
  const auto runs = window.runs_panel()->runs();
  for (const auto& r : runs) window.runs_panel()->select_run(r.path, true);
  settle(200);
  failures += !save(&window, out.filePath("runs.png"));
  if (runs.size() >= 2) {
    QStringList dirs;
    for (const auto& r : runs) dirs << r.path;
    window.compare_runs(dirs);
    window.show_tab(MainWindow::run_tab);
    settle(800);
    failures += !save(&window, out.filePath("run-compare.png"));
  } else {
    std::fprintf(stderr, "expected two runs or more in %s, found %lld\n", qPrintable(workspace),
                 static_cast<long long>(runs.size()));
    ++failures;
  }
  // One run, its loss chart zoomed in around the second epoch, the read-out at the cursor.
  if (!runs.isEmpty()) {
    window.open_run(runs[runs.size() >= 2 ? runs.size() - 2 : 0].path);  // the config as it is
    window.show_tab(MainWindow::run_tab);
    settle(400);
    if (auto* loss = window.live_panel()->chart("loss")) {
      const tandem::gui::RunHistory* run = window.shown_run();
      const double steps = std::max(run->steps_per_epoch(), 1);
      loss->zoom_to(steps * 0.8, steps * 2.2);
      loss->show_readout_at(steps * 1.5);
      settle(300);
      failures += !save(&window, out.filePath("run-zoom.png"));
      failures += !save(loss, out.filePath("chart-zoom.png"));
    } else {
      ++failures;
    }
    // The same run in the dark theme (View > Theme > Dark).
    window.set_theme(tandem::gui::Theme::dark);
    settle(600);
    failures += !save(&window, out.filePath("run-dark.png"));
    window.set_theme(tandem::gui::Theme::system);
  }
  return failures == 0 ? 0 : 1;
}
