// tandem-gui's main window: the Launch, Run, Checkpoints, Runs and Log panels as tabs, the
// Devices panel as a dock, menus with shortcuts, and the window state kept in QSettings.
#pragma once

#include <QMainWindow>
#include <QProgressDialog>
#include <memory>
#include <vector>

#include "device_monitor.hpp"
#include "engine_run.hpp"
#include "plugin_catalog.hpp"
#include "run_follower.hpp"
#include "theme.hpp"

class QTabWidget;
class QDockWidget;
class QLabel;

namespace tandem::gui {

class CheckpointsPanel;
class DevicesPanel;
class LaunchPanel;
class LiveRunPanel;
class LogPanel;
class RunsPanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Tab { launch_tab, run_tab, checkpoints_tab, runs_tab, log_tab };

  /// Restores the last window state and workspace from QSettings unless `restore_settings` is
  /// false (tests). Starts the device monitor and loads the plugin catalog.
  explicit MainWindow(bool restore_settings = true, QWidget* parent = nullptr);
  ~MainWindow() override;

  /// The folder whose subfolders are run folders; new runs are created in it.
  void set_workspace(const QString& folder);
  QString workspace() const;

  /// Starts a training run in a new folder of the workspace (or as `launch.run_dir` says).
  /// Returns false when one is already running or the engine cannot start (the reason is shown).
  bool start_run(TrainLaunch launch);
  /// Shows a finished run read from its folder's events.jsonl.
  bool open_run(const QString& run_dir);
  /// Opens the first run folder and compares the others with it (Run tab: a colour per run and
  /// a table of what differs). False, with the reason shown, when one cannot be read.
  bool compare_runs(const QStringList& run_dirs);
  void stop_run();
  /// Switches the look (View > Theme) and remembers it (QSettings "view/theme").
  void set_theme(Theme theme);

  EngineRun* engine_run() const { return engine_.get(); }
  /// The run the panels show: the live one or an opened one.
  RunHistory* shown_run() const;
  LaunchPanel* launch_panel() const { return launch_; }
  LiveRunPanel* live_panel() const { return live_; }
  CheckpointsPanel* checkpoints_panel() const { return checkpoints_; }
  RunsPanel* runs_panel() const { return runs_; }
  LogPanel* log_panel() const { return log_; }
  DevicesPanel* devices_panel() const { return devices_; }
  QDockWidget* devices_dock() const { return devices_dock_; }
  QTabWidget* tabs() const { return tabs_; }
  void show_tab(Tab tab);
  /// While quitting during a run: the dialog that waits for the engine to save its checkpoint
  /// (null otherwise). Its button, "Quit anyway", is enabled after kQuitPatienceMs.
  QProgressDialog* quit_dialog() const { return quit_dialog_; }
  static constexpr int kQuitPatienceMs = 15000;

 Q_SIGNALS:
  void run_ended(int exit_code);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void build_menus();
  void show_run(RunHistory* run, bool live);
  /// A run rebuilt from its folder's events.jsonl; null (with the reason shown) when unreadable.
  std::unique_ptr<RunHistory> load_run(const QString& run_dir, EventFile* file,
                                       bool whole_lines_only = false);
  void save_settings() const;
  void on_run_ended(int exit_code, bool crashed, const QString& summary);
  /// Closing during a run: stops the engine (SIGINT: it saves a resumable checkpoint) and closes
  /// the window when it has ended, or at once when the user chooses "Quit anyway".
  void quit_after_engine();

  PluginCatalog catalog_;
  DeviceMonitor monitor_;
  std::unique_ptr<EngineRun> engine_;
  std::unique_ptr<RunHistory> opened_;
  std::unique_ptr<RunFollower> follower_;  // reads on into opened_ while an engine elsewhere writes
  std::vector<std::unique_ptr<RunHistory>> compared_;  // while the Run tab compares runs
  QMetaObject::Connection placement_updates_;  // the shown run's updates to the Devices dock
  bool restore_settings_;

  QTabWidget* tabs_;
  LaunchPanel* launch_;
  LiveRunPanel* live_;
  CheckpointsPanel* checkpoints_;
  RunsPanel* runs_;
  LogPanel* log_;
  DevicesPanel* devices_;
  QDockWidget* devices_dock_;
  QLabel* status_;
  QProgressDialog* quit_dialog_ = nullptr;
  bool quit_anyway_ = false;
};

}  // namespace tandem::gui
