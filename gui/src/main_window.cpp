#include "main_window.hpp"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>

#include "checkpoints_panel.hpp"
#include "devices_panel.hpp"
#include "engine_locator.hpp"
#include "launch_panel.hpp"
#include "live_run_panel.hpp"
#include "log_panel.hpp"
#include "run_folder.hpp"
#include "runs_panel.hpp"
#include "theme.hpp"

// The resources are compiled into the static library: register them explicitly (outside any
// namespace, as Q_INIT_RESOURCE requires).
static void register_resources() {
  Q_INIT_RESOURCE(tandem_gui);
}

namespace tandem::gui {

MainWindow::MainWindow(bool restore_settings, QWidget* parent)
    : QMainWindow(parent),
      restore_settings_(restore_settings),
      tabs_(new QTabWidget),
      launch_(new LaunchPanel(&catalog_)),
      live_(new LiveRunPanel),
      checkpoints_(new CheckpointsPanel),
      runs_(new RunsPanel),
      log_(new LogPanel),
      devices_(new DevicesPanel),
      devices_dock_(new QDockWidget("Devices")),
      status_(new QLabel) {
  register_resources();
  setWindowTitle("Tandem");
  setWindowIcon(QIcon(":/tandem/icons/tandem.svg"));
  tabs_->addTab(launch_, "Launch");
  tabs_->addTab(live_, "Run");
  tabs_->addTab(checkpoints_, "Checkpoints");
  tabs_->addTab(runs_, "Runs");
  tabs_->addTab(log_, "Log");
  tabs_->setDocumentMode(true);
  setCentralWidget(tabs_);
  devices_dock_->setObjectName("devices_dock");
  devices_dock_->setWidget(devices_);
  devices_dock_->setMinimumWidth(230);
  addDockWidget(Qt::LeftDockWidgetArea, devices_dock_);
  statusBar()->addWidget(status_, 1);
  build_menus();

  connect(launch_, &LaunchPanel::start_requested, this,
          [this](const TrainLaunch& launch) { start_run(launch); });
  connect(launch_, &LaunchPanel::message, this,
          [this](const QString& text) { statusBar()->showMessage(text, 8000); });
  connect(live_, &LiveRunPanel::stop_requested, this, &MainWindow::stop_run);
  connect(checkpoints_, &CheckpointsPanel::log_line, log_, &LogPanel::append_line);
  connect(checkpoints_, &CheckpointsPanel::resume_requested, this, [this](const QString& ckpt) {
    TrainLaunch launch;
    launch.resume = ckpt;
    const RunHistory* run = shown_run();
    if (run && !run->run_dir().isEmpty()) launch.run_dir = run->run_dir();
    start_run(launch);
  });
  connect(runs_, &RunsPanel::open_requested, this, [this](const QString& dir) {
    if (open_run(dir)) show_tab(run_tab);
  });
  connect(runs_, &RunsPanel::compare_requested, this, [this](const QStringList& dirs) {
    if (compare_runs(dirs)) show_tab(run_tab);
  });
  connect(runs_, &RunsPanel::workspace_changed, this, [this] { save_settings(); });
  connect(&monitor_, &DeviceMonitor::snapshot, this, [this](const DeviceSnapshot& s) {
    devices_->show_snapshot(s);
    launch_->set_plan_choices(device_plan_choices(s));
  });
  connect(&monitor_, &DeviceMonitor::failed, devices_, &DevicesPanel::show_error);
  connect(&catalog_, &PluginCatalog::failed, this, [this](const QString& message) {
    log_->append_line("tandem-gui: cannot list the plugins: " + message);
  });

  const QString engine = engine_path();
  status_->setText(engine.isEmpty() ? engine_missing_message() : "Engine: " + engine);

  QSettings settings;
  QString workspace = QDir::current().filePath("runs");
  if (restore_settings_) {
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
    workspace = settings.value("workspace", workspace).toString();
    const QString last_config = settings.value("last_config").toString();
    if (!last_config.isEmpty() && QFileInfo::exists(last_config)) launch_->open_config(last_config);
    tabs_->setCurrentIndex(settings.value("window/tab", 0).toInt());
    live_->set_smoothing(settings.value("charts/smoothing", 0.6).toDouble());
  }
  if (!restore_settings_ || settings.value("window/geometry").isNull()) resize(1440, 900);
  set_workspace(workspace);
  monitor_.start();
  catalog_.load();
}

MainWindow::~MainWindow() = default;

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu("&File");
  QMenu* examples = file->addMenu("&New from example");
  for (const QString& example : LaunchPanel::example_configs())
    examples->addAction(QFileInfo(example).completeBaseName(), this, [this, example] {
      launch_->new_from_template(example);
      show_tab(launch_tab);
    });
  // Ctrl+N: the Launch tab's New button opens its examples menu.
  connect(launch_->new_action(), &QAction::triggered, this, [this] { show_tab(launch_tab); });
  file->addAction(launch_->new_action());
  file->addAction("&Open config…", QKeySequence::Open, this, [this] {
    launch_->open_dialog();
    show_tab(launch_tab);
  });
  file->addAction(launch_->save_action());
  file->addAction("Save config &as…", QKeySequence::SaveAs, launch_, &LaunchPanel::save_as_dialog);
  file->addSeparator();
  file->addAction("Set &workspace…", QKeySequence("Ctrl+Shift+W"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Workspace", workspace());
    if (!dir.isEmpty()) set_workspace(dir);
  });
  file->addAction("Open &run folder…", QKeySequence("Ctrl+Shift+O"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Run folder", workspace());
    if (!dir.isEmpty() && open_run(dir)) show_tab(run_tab);
  });
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu("&Run");
  run->addAction(launch_->start_action());
  run->addAction(live_->stop_action());

  QMenu* view = menuBar()->addMenu("&View");
  const QStringList names = {"&Launch", "&Run", "&Checkpoints", "R&uns", "L&og"};
  for (int i = 0; i < names.size(); ++i)
    view->addAction(names[i], QKeySequence(QString("Ctrl+%1").arg(i + 1)), this,
                    [this, i] { show_tab(static_cast<Tab>(i)); });
  view->addSeparator();
  QAction* dock = devices_dock_->toggleViewAction();
  dock->setShortcut(QKeySequence("Ctrl+D"));
  view->addAction(dock);
  view->addSeparator();
  QMenu* theme = view->addMenu("&Theme");
  auto* themes = new QActionGroup(this);
  for (const auto& [label, choice] :
       {std::pair{"Follow the &system", Theme::system}, std::pair{"&Light", Theme::light},
        std::pair{"&Dark", Theme::dark}}) {
    QAction* action = theme->addAction(label, this, [this, choice] { set_theme(choice); });
    action->setCheckable(true);
    action->setChecked(current_theme() == choice);
    action->setData(theme_name(choice));
    themes->addAction(action);
  }

  QMenu* help = menuBar()->addMenu("&Help");
  help->addAction("&About Tandem", this, [this] {
    QMessageBox::about(this, "About Tandem",
                       QString("<b>Tandem %1</b><p>Data-parallel deep-learning training: one "
                               "model, many devices.</p><p>Engine: %2</p>")
                           .arg(TANDEM_VERSION, engine_path().toHtmlEscaped()));
  });
}

void MainWindow::set_theme(Theme theme) {
  apply_theme(theme);  // every widget gets a PaletteChange; the charts rebuild in its shades
  for (QAction* action : findChildren<QAction*>())
    if (action->isCheckable() && action->data().toString() == theme_name(theme))
      action->setChecked(true);
  if (restore_settings_) QSettings().setValue("view/theme", theme_name(theme));
}

void MainWindow::show_tab(Tab tab) {
  tabs_->setCurrentIndex(static_cast<int>(tab));
}

void MainWindow::set_workspace(const QString& folder) {
  QDir().mkpath(folder);
  runs_->set_workspace(folder);
}

QString MainWindow::workspace() const {
  return runs_->workspace();
}

RunHistory* MainWindow::shown_run() const {
  return live_->run();
}

void MainWindow::show_run(RunHistory* run, bool live) {
  live_->set_run(run, live);  // ends a comparison
  compared_.clear();
  checkpoints_->set_run(run);
  // The Devices dock lists what each device holds in the shown run (it arrives with run_started).
  disconnect(placement_updates_);
  devices_->show_placement(run ? run->placement_lines() : QStringList());
  if (run)
    placement_updates_ = connect(run, &RunHistory::updated, this, [this, run] {
      devices_->show_placement(run->placement_lines());
    });
}

bool MainWindow::start_run(TrainLaunch launch) {
  if (engine_ && engine_->running()) {
    statusBar()->showMessage("A run is in progress: stop it before starting another.", 8000);
    return false;
  }
  if (launch.run_dir.isEmpty()) {
    QString name = "run";
    if (auto config = launch_->config(); config && !launch.config_path.isEmpty())
      name = config->value("name").toString(name);
    const QString stamp = QDateTime::currentDateTimeUtc().toString("yyyyMMdd'T'HHmmss'Z'");
    QString dir = QDir(workspace()).filePath(name + "-" + stamp);
    for (int i = 2; QFileInfo::exists(dir); ++i)
      dir = QDir(workspace()).filePath(QString("%1-%2-%3").arg(name, stamp).arg(i));
    launch.run_dir = dir;
  }
  if (launch.devices.isEmpty() && launch.resume.isEmpty()) {
    // The config's own devices key is what the form shows; nothing to override.
  }
  auto engine = std::make_unique<EngineRun>();
  if (launch.resume.isEmpty()) {
    log_->clear();
  } else {
    // A resumed run is the same run: its charts start from the stream so far (the resumed
    // timeline replaces what came after the checkpoint) and its log goes on.
    const EventFile so_far = read_event_file(QDir(launch.run_dir).filePath("events.jsonl"));
    if (so_far.error.isEmpty()) engine->history()->apply_all(so_far.events);
    log_->show_failure({});  // an earlier part's failure is not this engine's
    log_->append_line("tandem-gui: resuming from " + launch.resume);
  }
  connect(engine.get(), &EngineRun::log_line, log_, &LogPanel::append_line);
  // Checkpoints and callback decisions go to the Log as they happen (those of the stream read
  // back for a resume were told before).
  connect(engine->history(), &RunHistory::marker_added, log_, [this](const RunMarker& m) {
    log_->append_line(QString("tandem-gui: epoch %1, step %2: %3").arg(m.epoch).arg(m.step).arg(m.text));
  });
  connect(engine.get(), &EngineRun::ended, this, &MainWindow::on_run_ended);
  if (!engine->start(launch)) {
    log_->show_failure("Cannot start the engine: " + engine->error());
    show_tab(log_tab);
    return false;
  }
  // The previous run's history goes with its engine; panels switch to the new one first.
  show_run(engine->history(), true);
  engine_ = std::move(engine);
  follower_.reset();
  opened_.reset();
  status_->setText(QString("Running: %1 (pid %2)").arg(launch.run_dir).arg(engine_->pid()));
  show_tab(run_tab);
  return true;
}

void MainWindow::stop_run() {
  if (engine_ && engine_->running()) {
    engine_->stop();
    status_->setText("Stopping: the engine saves a resumable checkpoint…");
  }
}

void MainWindow::on_run_ended(int exit_code, bool crashed, const QString& summary) {
  status_->setText(summary);
  RunHistory* run = engine_ ? engine_->history() : nullptr;
  if (run && run->status() == RunHistory::Status::failed) {
    log_->show_failure("The run failed: " + run->error());
    if (crashed || run->step() == 0) show_tab(log_tab);
  }
  checkpoints_->table()->refresh();
  live_->refresh();
  runs_->rescan();
  Q_EMIT run_ended(exit_code);
}

std::unique_ptr<RunHistory> MainWindow::load_run(const QString& run_dir, EventFile* file,
                                                 bool whole_lines_only) {
  auto run = std::make_unique<RunHistory>();
  *file = read_event_file(QDir(run_dir).filePath("events.jsonl"), whole_lines_only,
                          [&run](const QList<Event>& events) { run->apply_all(events); });
  if (!file->error.isEmpty()) {
    statusBar()->showMessage(file->error, 8000);
    return nullptr;
  }
  run->relocate(run_dir);
  return run;
}

bool MainWindow::open_run(const QString& run_dir) {
  const QString folder = QDir::cleanPath(QDir(run_dir).absolutePath());
  const bool ours =
      engine_ && engine_->running() && QDir::cleanPath(engine_->history()->run_dir()) == folder;
  // An engine elsewhere (a terminal's, another window's) writing it: followed from here on.
  const bool followed = !ours && engine_running_in(run_dir) == std::optional<bool>(true);
  EventFile file;
  auto run = load_run(run_dir, &file, followed);
  if (!run) return false;
  follower_.reset();
  if (followed) {
    follower_ = std::make_unique<RunFollower>(run_dir, file.whole, run.get());
  } else if (run->status() == RunHistory::Status::running && !ours) {
    // The engine's folder lock says whether it still runs (in another window or a terminal).
    const std::optional<bool> elsewhere = engine_running_in(run_dir);
    if (!elsewhere)
      run->mark_ended_abnormally(
          "the stream ends without run_finished (the engine was killed, or "
          "it is still running elsewhere)");
    else if (!*elsewhere)
      run->mark_ended_abnormally(
          "interrupted: the engine ended without finishing (killed or crashed); resume from "
          "its last checkpoint");
  }
  show_run(run.get(), false);
  opened_ = std::move(run);
  status_->setText(QString("Opened %1 (%2 events%3)")
                       .arg(run_dir)
                       .arg(file.event_count)
                       .arg(file.issues.isEmpty()
                                ? QString()
                                : QString(", %1 %2 skipped")
                                      .arg(file.issues.size())
                                      .arg(file.issues.size() == 1 ? "line" : "lines")));
  return true;
}

bool MainWindow::compare_runs(const QStringList& run_dirs) {
  if (run_dirs.isEmpty()) return false;
  if (run_dirs.size() > kMaxComparedRuns) {
    statusBar()->showMessage(QString("Compare at most %1 runs at once (%2 selected)")
                                 .arg(kMaxComparedRuns)
                                 .arg(run_dirs.size()),
                             8000);
    return false;
  }
  std::vector<std::unique_ptr<RunHistory>> others;
  for (qsizetype i = 1; i < run_dirs.size(); ++i) {
    EventFile file;
    auto run = load_run(run_dirs[i], &file);
    if (!run) return false;
    others.push_back(std::move(run));
  }
  if (!open_run(run_dirs.front())) return false;
  QList<RunHistory*> shown;
  for (const auto& run : others) shown << run.get();
  live_->set_compared(shown);
  compared_ = std::move(others);
  status_->setText(QString("Comparing %1 runs").arg(run_dirs.size()));
  return true;
}

void MainWindow::save_settings() const {
  if (!restore_settings_) return;
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  settings.setValue("window/tab", tabs_->currentIndex());
  settings.setValue("workspace", workspace());
  settings.setValue("last_config", launch_->config_path());
  settings.setValue("charts/smoothing", live_->smoothing());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (engine_ && engine_->running() && !quit_anyway_) {
    event->ignore();
    if (quit_dialog_) return;  // already waiting for the engine
    const auto answer = QMessageBox::question(
        this, "A run is in progress",
        "Stop the run and quit? The engine saves a resumable checkpoint before it exits.",
        QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer == QMessageBox::Yes) quit_after_engine();
    return;
  }
  save_settings();
  event->accept();
}

void MainWindow::quit_after_engine() {
  quit_dialog_ = new QProgressDialog(
      "Stopping the run: the engine finishes its batch and saves a resumable checkpoint…",
      "Quit anyway", 0, 0, this);
  quit_dialog_->setWindowTitle("Quitting");
  quit_dialog_->setWindowModality(Qt::WindowModal);
  quit_dialog_->setMinimumDuration(0);
  quit_dialog_->setAutoReset(false);
  quit_dialog_->setAutoClose(false);
  // "Quit anyway" (which loses the checkpoint the engine is writing) only after a while.
  auto* quit_anyway = new QPushButton("Quit anyway", quit_dialog_);
  quit_anyway->setEnabled(false);
  quit_anyway->setToolTip("Stops the engine at once: the checkpoint it is saving is lost");
  quit_dialog_->setCancelButton(quit_anyway);
  QTimer::singleShot(kQuitPatienceMs, quit_anyway, [quit_anyway] { quit_anyway->setEnabled(true); });
  connect(quit_dialog_, &QProgressDialog::canceled, this, [this] {
    quit_anyway_ = true;
    close();
  });
  // The engine's own escalation (SIGTERM, then SIGKILL) starts after a minute.
  engine_->stop();
  connect(engine_.get(), &EngineRun::ended, this, [this] {
    quit_dialog_->hide();
    close();
  });
  quit_dialog_->show();
}

}  // namespace tandem::gui
