// The Launch panel: open or create a run config, edit its common keys in a form or the whole of it
// as JSON (validated by the engine, errors shown at their line), pick the devices, list the
// callbacks with their target and a form generated from each plugin's option schema, and Start.
#pragma once

#include <QAction>
#include <QJsonObject>
#include <QMenu>
#include <QPointer>
#include <QWidget>

#include "config_checker.hpp"
#include "engine_run.hpp"
#include "optimizer_catalog.hpp"
#include "plugin_catalog.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace tandem::gui {

class SchemaForm;

class LaunchPanel : public QWidget {
  Q_OBJECT
 public:
  /// `catalog` (not owned) supplies the plugins; it must outlive the panel. The optimizers come
  /// from the engine too (`tandem optimizers --json`, run at construction): until it answers, or
  /// when it cannot, the optimizer choice shows only the config's own optimizer, and a failure
  /// is shown under it and sent as message().
  explicit LaunchPanel(PluginCatalog* catalog, QWidget* parent = nullptr);

  /// Loads a config file into the form and the editor. Returns false (with a message shown) when
  /// it cannot be read or is not a JSON object.
  bool open_config(const QString& path);
  /// Starts a new, unsaved config from a bundled example (a path to one of them).
  bool new_from_template(const QString& template_path);
  /// Whether the editor's unsaved edits may go: true when there are none; otherwise asks (Save,
  /// Discard or Cancel) and says whether the user saved or discarded them. The New menu and Open
  /// ask this first.
  bool may_discard_edits();
  /// Writes the editor's text to `path` and makes it the config's file.
  bool save_config(const QString& path);
  QString config_path() const { return path_; }
  bool modified() const { return modified_; }

  /// The config as the editor holds it, if it is a JSON object.
  std::optional<QJsonObject> config() const;
  QString editor_text() const;
  void set_editor_text(const QString& text);
  /// The last validation message under the editor ("" while unchecked) and the highlighted
  /// line (1-based; 0 when none).
  QString validation_text() const;
  int error_line() const { return error_line_; }
  bool config_valid() const { return valid_; }
  ConfigChecker* checker() { return &checker_; }

  /// The device plans the picker offers ("auto", "cpu", "cpu:2", "cuda:0", ...); free text is
  /// accepted too. Empty: a CPU-only default list.
  void set_plan_choices(const QStringList& plans);
  /// The bundled example configs (share/tandem/configs or the source tree's resources/configs).
  static QStringList example_configs();

  // Form widgets, for tests and shortcuts.
  QSpinBox* epochs_box() const { return epochs_; }
  QSpinBox* batch_box() const { return batch_; }
  QComboBox* optimizer_box() const { return optimizer_; }
  /// Why the optimizers could not be listed (hidden when they could).
  QLabel* optimizer_error_label() const { return optimizer_error_; }
  OptimizerCatalog* optimizer_catalog() { return &optimizers_; }
  QLineEdit* learning_rate_edit() const { return learning_rate_; }
  QComboBox* devices_box() const { return devices_; }
  QSpinBox* processes_box() const { return processes_; }
  QListWidget* callback_list() const { return callbacks_; }
  QComboBox* target_box() const { return target_; }
  SchemaForm* options_form() const { return options_; }
  QPushButton* start_button() const { return start_; }
  /// The commands of this panel, one action each: its button triggers it and the main window's
  /// menu shows it, with the shortcut (Ctrl+R, Ctrl+S, Ctrl+N: the examples menu). A shortcut
  /// lives on the action only, so it works on every tab, this one included.
  QAction* start_action() const { return start_action_; }
  QAction* save_action() const { return save_action_; }
  QAction* new_action() const { return new_action_; }
  /// The menu of example configs under the New button.
  QMenu* new_menu() const { return new_menu_; }

 public Q_SLOTS:
  /// Saves the config (asking where when it has no file yet) and emits start_requested.
  void start();
  void open_dialog();
  bool save();
  bool save_as_dialog();
  /// Adds a callback of this plugin (target template) and selects it.
  void add_callback(const QString& plugin);

 Q_SIGNALS:
  void start_requested(const tandem::gui::TrainLaunch& launch);
  void config_path_changed(const QString& path);
  void message(const QString& text);

 private:
  void build_form_panel(QWidget* host);
  void editor_changed();
  void apply_form_to_config();
  void load_form_from_config();
  void show_callback(int row);
  void callback_target_changed();
  void callback_options_checked();
  void fill_optimizer_choices();
  void show_optimizer(const QString& written);
  void write_config_to_editor();
  void show_check(const ConfigCheck& check);
  void show_error(const QString& message, int line);
  void refresh_callback_list();
  void set_path(const QString& path);

  PluginCatalog* catalog_;
  OptimizerCatalog optimizers_;
  QLabel* optimizer_error_;
  bool options_edited_ = false;  // the user edited the options form; its check is awaited
  bool start_pending_ = false;   // start() waits for that check
  QString path_;
  bool modified_ = false;
  bool updating_ = false;  // guards form <-> editor feedback loops
  QJsonObject config_;
  bool valid_ = false;
  int error_line_ = 0;
  ConfigChecker checker_;

  QLabel* path_label_;
  QLineEdit* name_;
  QSpinBox* epochs_;
  QSpinBox* batch_;
  QComboBox* optimizer_;
  QLineEdit* learning_rate_;
  QLineEdit* train_x_;
  QLineEdit* train_y_;
  QLineEdit* val_x_;
  QLineEdit* val_y_;
  QLabel* data_note_;
  QComboBox* devices_;
  QSpinBox* processes_;
  QListWidget* callbacks_;
  QToolButton* add_callback_;
  QPushButton* remove_callback_;
  QPushButton* up_callback_;
  QPushButton* down_callback_;
  QComboBox* target_;
  QLabel* plugin_description_;
  SchemaForm* options_;
  QPlainTextEdit* editor_;
  QLabel* validation_;
  QPushButton* start_;
  QAction* start_action_;
  QAction* save_action_;
  QAction* new_action_;
  QMenu* new_menu_ = nullptr;
};

}  // namespace tandem::gui
