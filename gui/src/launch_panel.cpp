#include "launch_panel.hpp"

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QDoubleValidator>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSaveFile>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBlock>
#include <QToolButton>
#include <QVBoxLayout>

#include "json_locator.hpp"
#include "json_text_patch.hpp"
#include "schema_form.hpp"
#include "theme.hpp"

namespace tandem::gui {

namespace {

// The optimizer's name as the config writes it, "adam" or {"class_name": "Adam", ...}; Adam (the
// engine's default) when it names none.
QString optimizer_name(const QJsonValue& v) {
  const QString name = v.isString() ? v.toString() : v.toObject().value("class_name").toString();
  return name.isEmpty() ? "Adam" : name;
}

// "learning_rate 0.001, beta_1 0.9, ..." for an optimizer's tooltip.
QString defaults_text(const QJsonObject& config) {
  QStringList parts;
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (it.key() == "name") continue;
    const QJsonValue v = it.value();
    const QString text = v.isDouble()   ? QString::number(v.toDouble(), 'g', 10)
                         : v.isBool()   ? QString(v.toBool() ? "true" : "false")
                         : v.isString() ? v.toString()
                                        : QString("null");
    parts << it.key() + " " + text;
  }
  return parts.join(", ");
}

QJsonObject object_at(const QJsonObject& root, const QStringList& path) {
  QJsonObject o = root;
  for (const QString& key : path) o = o.value(key).toObject();
  return o;
}

// Sets root[path...] = value, creating objects on the way.
void set_at(QJsonObject& root, const QStringList& path, const QJsonValue& value) {
  if (path.size() == 1) {
    root.insert(path.front(), value);
    return;
  }
  QJsonObject child = root.value(path.front()).toObject();
  set_at(child, path.mid(1), value);
  root.insert(path.front(), child);
}

void remove_at(QJsonObject& root, const QStringList& path) {
  if (path.size() == 1) {
    root.remove(path.front());
    return;
  }
  if (!root.value(path.front()).isObject()) return;
  QJsonObject child = root.value(path.front()).toObject();
  remove_at(child, path.mid(1));
  root.insert(path.front(), child);
}

QLineEdit* path_edit(QWidget* parent, const QString& placeholder) {
  auto* edit = new QLineEdit(parent);
  edit->setPlaceholderText(placeholder);
  return edit;
}

}  // namespace

LaunchPanel::LaunchPanel(PluginCatalog* catalog, QWidget* parent)
    : QWidget(parent),
      catalog_(catalog),
      optimizer_error_(new QLabel),
      path_label_(new QLabel),
      name_(new QLineEdit),
      epochs_(new QSpinBox),
      batch_(new QSpinBox),
      optimizer_(new QComboBox),
      learning_rate_(new QLineEdit),
      train_x_(path_edit(this, "images (IDX .gz) or HDF5 file")),
      train_y_(path_edit(this, "labels")),
      val_x_(path_edit(this, "none")),
      val_y_(path_edit(this, "none")),
      data_note_(new QLabel),
      devices_(new QComboBox),
      processes_(new QSpinBox),
      callbacks_(new QListWidget),
      add_callback_(new QToolButton),
      remove_callback_(new QPushButton("Remove")),
      up_callback_(new QPushButton("Up")),
      down_callback_(new QPushButton("Down")),
      target_(new QComboBox),
      plugin_description_(new QLabel),
      options_(new SchemaForm),
      editor_(new QPlainTextEdit),
      validation_(new QLabel),
      start_(new QPushButton("Start")),
      start_action_(new QAction("&Start", this)),
      save_action_(new QAction("&Save config", this)),
      new_action_(new QAction("&New config…", this)) {
  start_action_->setShortcut(QKeySequence("Ctrl+R"));
  save_action_->setShortcut(QKeySequence::Save);
  new_action_->setShortcut(QKeySequence::New);
  connect(start_action_, &QAction::triggered, this, &LaunchPanel::start);
  connect(save_action_, &QAction::triggered, this, &LaunchPanel::save);
  // File bar.
  auto* new_button = new QToolButton;
  new_button->setText("New");
  new_button->setToolTip("A new run config from an example (Ctrl+N)");
  new_button->setPopupMode(QToolButton::InstantPopup);
  new_menu_ = new QMenu(new_button);
  for (const QString& example : example_configs())
    new_menu_->addAction(QFileInfo(example).completeBaseName(), this,
                         [this, example] {
                           if (may_discard_edits()) new_from_template(example);
                         });
  new_button->setMenu(new_menu_);
  // Queued: whoever shows the Launch tab on Ctrl+N does so before the menu opens at the button.
  connect(new_action_, &QAction::triggered, new_button, &QToolButton::showMenu,
          Qt::QueuedConnection);
  auto* open_button = new QPushButton("Open…");
  open_button->setToolTip("Open a run config (Ctrl+O)");
  auto* save_button = new QPushButton("Save");
  save_button->setToolTip("Save the config (Ctrl+S)");
  auto* save_as_button = new QPushButton("Save as…");
  path_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* file_bar = new QHBoxLayout;
  for (QWidget* w :
       std::initializer_list<QWidget*>{new_button, open_button, save_button, save_as_button})
    file_bar->addWidget(w);
  file_bar->addWidget(path_label_, 1);

  // Left: the form. Right: the JSON editor and its validation.
  auto* form_host = new QWidget;
  build_form_panel(form_host);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setWidget(form_host);
  scroll->setMinimumWidth(380);

  editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  editor_->setLineWrapMode(QPlainTextEdit::NoWrap);
  editor_->setTabChangesFocus(false);
  validation_->setWordWrap(true);
  validation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  validation_->setMinimumHeight(40);
  auto* editor_host = new QWidget;
  auto* editor_layout = new QVBoxLayout(editor_host);
  editor_layout->setContentsMargins(0, 0, 0, 0);
  editor_layout->addWidget(
      new QLabel("<b>Run config (JSON)</b> — the form and this text stay in step"));
  editor_layout->addWidget(editor_, 1);
  editor_layout->addWidget(validation_);

  auto* splitter = new QSplitter;
  splitter->addWidget(scroll);
  splitter->addWidget(editor_host);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);

  start_->setToolTip("Save the config and start `tandem train` (Ctrl+R)");
  start_->setMinimumWidth(120);
  QFont start_font = start_->font();
  start_font.setBold(true);
  start_->setFont(start_font);
  auto* bottom = new QHBoxLayout;
  bottom->addStretch(1);
  bottom->addWidget(start_);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(file_bar);
  layout->addWidget(splitter, 1);
  layout->addLayout(bottom);

  connect(open_button, &QPushButton::clicked, this, &LaunchPanel::open_dialog);
  connect(save_button, &QPushButton::clicked, save_action_, &QAction::trigger);
  connect(save_as_button, &QPushButton::clicked, this, &LaunchPanel::save_as_dialog);
  connect(start_, &QPushButton::clicked, start_action_, &QAction::trigger);
  connect(editor_, &QPlainTextEdit::textChanged, this, &LaunchPanel::editor_changed);
  connect(&checker_, &ConfigChecker::checked, this, &LaunchPanel::show_check);
  if (catalog_)
    connect(catalog_, &PluginCatalog::loaded, this, [this] {
      auto* menu = new QMenu(add_callback_);
      for (const PluginInfo& p : catalog_->plugins()) {
        QAction* a = menu->addAction(p.name, this, [this, name = p.name] { add_callback(name); });
        a->setToolTip(p.ok ? p.description : p.error);
        a->setEnabled(p.ok);
      }
      delete add_callback_->menu();
      add_callback_->setMenu(menu);
      show_callback(callbacks_->currentRow());
    });
  connect(&optimizers_, &OptimizerCatalog::loaded, this, &LaunchPanel::fill_optimizer_choices);
  connect(&optimizers_, &OptimizerCatalog::failed, this, [this](const QString& why) {
    optimizer_error_->setText("Cannot list the optimizers: " + why);
    optimizer_error_->show();
    optimizer_->setEnabled(false);
    optimizer_->setToolTip(
        "The engine could not list its optimizers; edit \"optimizer\" in the JSON instead.");
    Q_EMIT message("Cannot list the optimizers: " + why);
  });
  set_path({});
  show_callback(-1);
  optimizers_.load();
}

void LaunchPanel::build_form_panel(QWidget* host) {
  auto* layout = new QVBoxLayout(host);

  auto* training = new QGroupBox("Training");
  auto* tf = new QFormLayout(training);
  epochs_->setRange(1, 1000000);
  batch_->setRange(1, 1 << 24);
  // Filled from the engine (`tandem optimizers --json`) once it answers; until then only the
  // config's own optimizer shows.
  optimizer_->setEnabled(false);
  optimizer_->setToolTip("Listing the engine's optimizers…");
  optimizer_error_->setWordWrap(true);
  optimizer_error_->setStyleSheet(QString("color: %1;").arg(semantic_colors().error.name()));
  optimizer_error_->hide();
  learning_rate_->setValidator(new QDoubleValidator(0, 10, 12, learning_rate_));
  learning_rate_->setPlaceholderText("optimizer default");
  tf->addRow("Name", name_);
  tf->addRow("Epochs", epochs_);
  tf->addRow("Batch size", batch_);
  tf->addRow("Optimizer", optimizer_);
  tf->addRow(optimizer_error_);
  tf->addRow("Learning rate", learning_rate_);
  layout->addWidget(training);

  auto* data = new QGroupBox("Dataset");
  auto* df = new QFormLayout(data);
  df->addRow("Train x", train_x_);
  df->addRow("Train y", train_y_);
  df->addRow("Validation x", val_x_);
  df->addRow("Validation y", val_y_);
  data_note_->setWordWrap(true);
  data_note_->setStyleSheet("color: palette(mid);");
  df->addRow(data_note_);
  layout->addWidget(data);

  auto* devices = new QGroupBox("Devices");
  auto* devf = new QFormLayout(devices);
  devices_->setEditable(true);
  devices_->setToolTip(
      "auto: every GPU, else the CPU; cpu:N: N CPU replicas; cuda:0,2: those GPUs; cuda:all");
  set_plan_choices({});
  devf->addRow("Device plan", devices_);
  processes_->setRange(1, 1024);
  processes_->setToolTip(
      "More than 1: run under `mpirun -np N`; each process takes the device plan (auto: the GPU "
      "of its local rank) and the global batch is split across processes, then replicas");
  devf->addRow("Processes (MPI)", processes_);
  layout->addWidget(devices);

  auto* cbs = new QGroupBox("Callbacks");
  auto* cl = new QVBoxLayout(cbs);
  callbacks_->setMaximumHeight(150);
  add_callback_->setText("Add");
  add_callback_->setPopupMode(QToolButton::InstantPopup);
  add_callback_->setToolTip("Add a callback plugin (from `tandem plugins`)");
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add_callback_);
  buttons->addWidget(remove_callback_);
  buttons->addWidget(up_callback_);
  buttons->addWidget(down_callback_);
  buttons->addStretch(1);
  target_->addItem("template", "template");
  target_->addItem("meta", "meta");
  target_->setToolTip(
      "template: the single-device model (device-agnostic checkpoints); meta: the replicated "
      "model with its device plan");
  plugin_description_->setWordWrap(true);
  auto* target_row = new QFormLayout;
  target_row->addRow("Target", target_);
  cl->addWidget(callbacks_);
  cl->addLayout(buttons);
  cl->addWidget(plugin_description_);
  cl->addLayout(target_row);
  cl->addWidget(options_);
  layout->addWidget(cbs);
  layout->addStretch(1);

  for (QLineEdit* e : {name_, learning_rate_, train_x_, train_y_, val_x_, val_y_})
    connect(e, &QLineEdit::textEdited, this, &LaunchPanel::apply_form_to_config);
  connect(epochs_, &QSpinBox::valueChanged, this, &LaunchPanel::apply_form_to_config);
  connect(batch_, &QSpinBox::valueChanged, this, &LaunchPanel::apply_form_to_config);
  connect(optimizer_, &QComboBox::currentIndexChanged, this, &LaunchPanel::apply_form_to_config);
  connect(devices_, &QComboBox::currentTextChanged, this, &LaunchPanel::apply_form_to_config);
  connect(callbacks_, &QListWidget::currentRowChanged, this, &LaunchPanel::show_callback);
  connect(target_, &QComboBox::currentIndexChanged, this, &LaunchPanel::callback_target_changed);
  // The engine checks the options form (SchemaForm::validated): a user's edit reaches the config
  // once the engine has accepted it.
  connect(options_, &SchemaForm::changed, this, [this] {
    if (!updating_) options_edited_ = true;
  });
  connect(options_, &SchemaForm::validated, this, &LaunchPanel::callback_options_checked);
  connect(remove_callback_, &QPushButton::clicked, this, [this] {
    const int row = callbacks_->currentRow();
    QJsonArray list = config_.value("callbacks").toArray();
    if (row < 0 || row >= list.size()) return;
    list.removeAt(row);
    config_.insert("callbacks", list);
    write_config_to_editor();
    refresh_callback_list();
    callbacks_->setCurrentRow(std::min(row, static_cast<int>(list.size()) - 1));
  });
  auto move = [this](int delta) {
    const int row = callbacks_->currentRow();
    QJsonArray list = config_.value("callbacks").toArray();
    const int to = row + delta;
    if (row < 0 || to < 0 || to >= list.size()) return;
    const QJsonValue v = list.at(row);
    list.removeAt(row);
    list.insert(to, v);
    config_.insert("callbacks", list);
    write_config_to_editor();
    refresh_callback_list();
    callbacks_->setCurrentRow(to);
  };
  connect(up_callback_, &QPushButton::clicked, this, [move] { move(-1); });
  connect(down_callback_, &QPushButton::clicked, this, [move] { move(1); });
}

QStringList LaunchPanel::example_configs() {
  QStringList found;
  const QDir app(QCoreApplication::applicationDirPath());
  for (const QString& dir : {app.filePath("../share/tandem/configs"),
                             QString(TANDEM_SOURCE_DIR) + "/resources/configs"}) {
    const QDir d(dir);
    for (const QString& f : d.entryList({"*.json"}, QDir::Files, QDir::Name))
      found << QFileInfo(d.filePath(f)).canonicalFilePath();
    if (!found.isEmpty()) break;
  }
  return found;
}

void LaunchPanel::set_plan_choices(const QStringList& plans) {
  const QString current = devices_->currentText();
  const QStringList choices = plans.isEmpty() ? QStringList{"cpu", "cpu:2", "auto"} : plans;
  QStringList existing;
  for (int i = 0; i < devices_->count(); ++i) existing << devices_->itemText(i);
  if (existing == choices) return;
  const QSignalBlocker block(devices_);
  devices_->clear();
  devices_->addItems(choices);
  devices_->setCurrentText(current.isEmpty() ? "cpu" : current);
}

void LaunchPanel::set_path(const QString& path) {
  path_ = path;
  path_label_->setText(path.isEmpty() ? QString("<i>unsaved config</i>") + (modified_ ? " *" : "")
                                      : path.toHtmlEscaped() + (modified_ ? " *" : ""));
  Q_EMIT config_path_changed(path);
}

bool LaunchPanel::open_config(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    show_error(QString("Cannot open %1: %2").arg(path, file.errorString()), 0);
    return false;
  }
  const QByteArray bytes = file.readAll();
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
  modified_ = false;
  set_path(QFileInfo(path).absoluteFilePath());
  // A config that is not valid JSON still opens, so it can be fixed here.
  set_editor_text(QString::fromUtf8(bytes));
  modified_ = false;
  set_path(path_);
  return error.error == QJsonParseError::NoError && doc.isObject();
}

bool LaunchPanel::new_from_template(const QString& template_path) {
  QFile file(template_path);
  if (!file.open(QIODevice::ReadOnly)) {
    show_error(QString("Cannot open %1: %2").arg(template_path, file.errorString()), 0);
    return false;
  }
  modified_ = true;
  path_.clear();
  set_editor_text(QString::fromUtf8(file.readAll()));
  // Relative paths of the example resolve against its folder until the config is saved.
  set_path({});
  return true;
}

bool LaunchPanel::save_config(const QString& path) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(editor_->toPlainText().toUtf8()) < 0 ||
      !file.commit()) {
    Q_EMIT message(QString("Cannot save %1: %2").arg(path, file.errorString()));
    return false;
  }
  modified_ = false;
  set_path(QFileInfo(path).absoluteFilePath());
  return true;
}

bool LaunchPanel::save() {
  return path_.isEmpty() ? save_as_dialog() : save_config(path_);
}

bool LaunchPanel::save_as_dialog() {
  const QString suggested =
      path_.isEmpty() ? QDir::current().filePath(config_.value("name").toString("run") + ".json")
                      : path_;
  const QString path =
      QFileDialog::getSaveFileName(this, "Save run config", suggested, "Run configs (*.json)");
  return !path.isEmpty() && save_config(path);
}

bool LaunchPanel::may_discard_edits() {
  if (!modified_) return true;
  QMessageBox box(QMessageBox::Warning, "Unsaved changes",
                  path_.isEmpty() ? QString("The new config has not been saved.")
                                  : QString("%1 has unsaved changes.").arg(QFileInfo(path_).fileName()),
                  QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, this);
  box.setObjectName("unsaved_changes");
  box.setInformativeText("Save them before you leave this config?");
  box.setDefaultButton(QMessageBox::Save);
  switch (box.exec()) {
    case QMessageBox::Save:
      return save();
    case QMessageBox::Discard:
      return true;
    default:
      return false;
  }
}

void LaunchPanel::open_dialog() {
  if (!may_discard_edits()) return;
  const QString path = QFileDialog::getOpenFileName(
      this, "Open run config", path_.isEmpty() ? QDir::currentPath() : QFileInfo(path_).path(),
      "Run configs (*.json);;All files (*)");
  if (!path.isEmpty()) open_config(path);
}

std::optional<QJsonObject> LaunchPanel::config() const {
  const QJsonDocument doc = QJsonDocument::fromJson(editor_->toPlainText().toUtf8());
  if (!doc.isObject()) return std::nullopt;
  return doc.object();
}

QString LaunchPanel::editor_text() const {
  return editor_->toPlainText();
}

void LaunchPanel::set_editor_text(const QString& text) {
  editor_->setPlainText(text);
}

QString LaunchPanel::validation_text() const {
  return validation_->text();
}

void LaunchPanel::editor_changed() {
  if (!updating_) {
    modified_ = true;
    set_path(path_);
  }
  const QString text = editor_->toPlainText();
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8(), &error);
  if (error.error != QJsonParseError::NoError || !doc.isObject()) {
    valid_ = false;
    if (error.error != QJsonParseError::NoError) {
      // QJsonParseError::offset counts UTF-8 bytes.
      const int offset =
          static_cast<int>(QString::fromUtf8(text.toUtf8().left(error.offset)).size());
      const TextPosition at = position_of_offset(text, offset);
      show_error(QString("JSON syntax error at line %1, column %2: %3")
                     .arg(at.line)
                     .arg(at.column)
                     .arg(error.errorString()),
                 at.line);
    } else {
      show_error("A run config is a JSON object ({ ... })", 1);
    }
    return;
  }
  config_ = doc.object();
  if (!updating_) load_form_from_config();
  validation_->setText("Checking with the engine…");
  validation_->setStyleSheet("color: palette(mid);");
  checker_.request(text, path_.isEmpty() ? QString() : path_);
}

void LaunchPanel::show_error(const QString& message, int line) {
  valid_ = false;
  error_line_ = line;
  validation_->setText(message);
  validation_->setStyleSheet(banner_style(true));
  QList<QTextEdit::ExtraSelection> marks;
  if (line > 0) {
    QTextEdit::ExtraSelection mark;
    mark.format.setBackground(semantic_colors().error_mark);
    mark.format.setProperty(QTextFormat::FullWidthSelection, true);
    mark.cursor = QTextCursor(editor_->document()->findBlockByNumber(line - 1));
    marks << mark;
  }
  editor_->setExtraSelections(marks);
}

void LaunchPanel::show_check(const ConfigCheck& check) {
  if (!check.ok) {
    int line = 0;
    if (!check.path.isEmpty()) {
      if (auto at = locate_json_path(editor_->toPlainText(), check.path)) line = at->line;
    }
    QString text = check.error;
    // The check ran on a temporary copy: name the config the user knows instead.
    text.replace(QRegularExpression("\\.?tandem-check-\\w+\\.json"),
                 path_.isEmpty() ? "the config" : QFileInfo(path_).fileName());
    show_error(line > 0 ? QString("Line %1: %2").arg(line).arg(text) : text, line);
    return;
  }
  valid_ = true;
  error_line_ = 0;
  editor_->setExtraSelections({});
  const QJsonObject s = check.summary;
  validation_->setText(
      QString("Valid: %1 parameters, devices %2, batch %3, %4 training and %5 validation samples, "
              "%6 %7")
          .arg(s.value("parameters").toInteger())
          .arg(s.value("devices").toObject().value("plan").toString())
          .arg(s.value("batch_size").toInteger())
          .arg(s.value("train_samples").toInteger())
          .arg(s.value("validation_samples").toInteger())
          .arg(s.value("plugins").toArray().size())
          .arg(s.value("plugins").toArray().size() == 1 ? "plugin" : "plugins"));
  validation_->setStyleSheet(banner_style(false));
}

void LaunchPanel::fill_optimizer_choices() {
  const bool was_updating = updating_;
  updating_ = true;
  optimizer_->clear();
  for (const OptimizerInfo& info : optimizers_.optimizers()) {
    optimizer_->addItem(info.class_name);
    optimizer_->setItemData(optimizer_->count() - 1, "Defaults: " + defaults_text(info.config),
                            Qt::ToolTipRole);
  }
  optimizer_->setEnabled(true);
  optimizer_->setToolTip("The optimizers the engine knows (`tandem optimizers`)");
  optimizer_error_->hide();
  show_optimizer(optimizer_name(config_.value("optimizer")));
  updating_ = was_updating;
}

void LaunchPanel::show_optimizer(const QString& written) {
  // A name the engine does not list (not yet, or not at all: the engine's check says so) shows
  // as an extra item, so that the form always shows what the config says.
  for (int i = optimizer_->count() - 1; i >= 0; --i)
    if (optimizer_->itemData(i).toBool()) optimizer_->removeItem(i);
  const QString known = optimizers_.class_of(written);
  const QString shown = known.isEmpty() ? written : known;
  int index = optimizer_->findText(shown);
  if (index < 0) {
    optimizer_->addItem(shown, true);
    index = optimizer_->count() - 1;
  }
  optimizer_->setCurrentIndex(index);
}

void LaunchPanel::load_form_from_config() {
  updating_ = true;
  name_->setText(config_.value("name").toString());
  epochs_->setValue(config_.value("epochs").toInt(1));
  batch_->setValue(config_.value("batch_size").toInt(32));
  const QJsonValue opt = config_.value("optimizer");
  show_optimizer(optimizer_name(opt));
  const QJsonValue lr = opt.toObject().value("config").toObject().value("learning_rate");
  learning_rate_->setText(lr.isDouble() ? QString::number(lr.toDouble(), 'g', 10) : QString());
  // A Keras schedule is edited in the JSON: the field shows its name and leaves it alone.
  learning_rate_->setEnabled(!lr.isObject());
  learning_rate_->setPlaceholderText(lr.isObject()
                                         ? QString("%1 schedule (edit it in the JSON)")
                                               .arg(lr.toObject().value("class_name").toString("a"))
                                         : QString("optimizer default"));
  const QJsonObject data = config_.value("data").toObject();
  const QJsonObject train = data.value("train").toObject();
  const QJsonObject val = data.value("validation").toObject();
  const bool files = train.value("type").toString() != "synthetic";
  for (QLineEdit* e : {train_x_, train_y_, val_x_, val_y_}) e->setEnabled(files);
  const QString train_x = train.value("type").toString() == "hdf5" ? train.value("path").toString()
                                                                   : train.value("x").toString();
  train_x_->setText(files ? train_x : QString());
  train_y_->setText(files && train.value("type").toString() != "hdf5" ? train.value("y").toString()
                                                                      : QString());
  val_x_->setText(files && val.value("type").toString() == "idx" ? val.value("x").toString()
                                                                 : QString());
  val_y_->setText(files && val.value("type").toString() == "idx" ? val.value("y").toString()
                                                                 : QString());
  data_note_->setText(QString("Type: %1. Other dataset keys (HDF5 dataset names, synthetic "
                              "shapes, validation_split) are edited in the JSON.")
                          .arg(train.value("type").toString("?")));
  devices_->setCurrentText(config_.value("devices").toString("cpu"));
  updating_ = false;
  refresh_callback_list();
}

void LaunchPanel::apply_form_to_config() {
  if (updating_) return;
  auto set_or_remove = [this](const QStringList& path, const QString& text) {
    if (text.isEmpty())
      remove_at(config_, path);
    else
      set_at(config_, path, text);
  };
  set_or_remove({"name"}, name_->text());
  config_.insert("epochs", epochs_->value());
  config_.insert("batch_size", batch_->value());
  QJsonValue opt = config_.value("optimizer");
  QJsonObject opt_object = opt.isObject() ? opt.toObject() : QJsonObject{};
  if (!optimizer_->currentText().isEmpty())
    opt_object.insert("class_name", optimizer_->currentText());
  QJsonObject opt_config = opt_object.value("config").toObject();
  bool ok = false;
  const double lr = QLocale::c().toDouble(learning_rate_->text(), &ok);
  // A disabled field stands for a schedule, kept as the JSON has it (the empty field removed it).
  if (learning_rate_->isEnabled()) {
    if (ok)
      opt_config.insert("learning_rate", lr);
    else if (learning_rate_->text().isEmpty())
      opt_config.remove("learning_rate");
  }
  opt_object.insert("config", opt_config);
  config_.insert("optimizer", opt_object);
  const QString train_type = object_at(config_, {"data", "train"}).value("type").toString();
  if (train_type == "idx") {
    set_or_remove({"data", "train", "x"}, train_x_->text());
    set_or_remove({"data", "train", "y"}, train_y_->text());
  } else if (train_type == "hdf5") {
    set_or_remove({"data", "train", "path"}, train_x_->text());
  }
  if (!val_x_->text().isEmpty() || !val_y_->text().isEmpty()) {
    if (object_at(config_, {"data", "validation"}).isEmpty())
      set_at(config_, {"data", "validation", "type"}, QString("idx"));
    set_or_remove({"data", "validation", "x"}, val_x_->text());
    set_or_remove({"data", "validation", "y"}, val_y_->text());
  }
  set_or_remove({"devices"}, devices_->currentText().trimmed());
  write_config_to_editor();
}

void LaunchPanel::write_config_to_editor() {
  updating_ = true;
  // Only the values the form changed: the user's formatting and key order stay.
  const QString text = patch_json_text(editor_->toPlainText(), config_);
  // Keep the cursor's line when the text is rewritten from the form.
  const int block = editor_->textCursor().blockNumber();
  editor_->setPlainText(text);
  QTextCursor cursor(editor_->document()->findBlockByNumber(block));
  editor_->setTextCursor(cursor);
  modified_ = true;
  updating_ = false;
  set_path(path_);
}

void LaunchPanel::refresh_callback_list() {
  const int row = callbacks_->currentRow();
  const QSignalBlocker block(callbacks_);
  callbacks_->clear();
  for (const QJsonValue& v : config_.value("callbacks").toArray()) {
    const QJsonObject cb = v.toObject();
    callbacks_->addItem(
        QString("%1  →  %2")
            .arg(cb.value("plugin").toString("?"), cb.value("target").toString("template")));
  }
  const int count = callbacks_->count();
  callbacks_->setCurrentRow(count == 0 ? -1 : std::clamp(row, 0, count - 1));
  show_callback(callbacks_->currentRow());
}

void LaunchPanel::show_callback(int row) {
  const QJsonArray list = config_.value("callbacks").toArray();
  const bool valid_row = row >= 0 && row < list.size();
  remove_callback_->setEnabled(valid_row);
  up_callback_->setEnabled(valid_row && row > 0);
  down_callback_->setEnabled(valid_row && row + 1 < list.size());
  target_->setEnabled(valid_row);
  options_edited_ = false;  // an edit of another callback's options is not this one's
  updating_ = true;
  if (!valid_row) {
    plugin_description_->setText(list.isEmpty() ? "No callbacks: add one with Add." : QString());
    options_->set_schema({});
    options_->setEnabled(false);
    updating_ = false;
    return;
  }
  const QJsonObject cb = list.at(row).toObject();
  const QString name = cb.value("plugin").toString();
  target_->setCurrentIndex(cb.value("target").toString("template") == "meta" ? 1 : 0);
  const PluginInfo* info = catalog_ ? catalog_->find(name) : nullptr;
  if (!info) {
    plugin_description_->setText(
        catalog_ && catalog_->is_loaded()
            ? QString("<b>%1</b>: no such plugin on the search path (see `tandem plugins`)")
                  .arg(name.toHtmlEscaped())
            : QString("<b>%1</b>").arg(name.toHtmlEscaped()));
    options_->set_schema({});
    options_->setEnabled(false);
  } else {
    plugin_description_->setText(QString("<b>%1</b> %2 — %3")
                                     .arg(info->name.toHtmlEscaped(), info->version.toHtmlEscaped(),
                                          info->description.toHtmlEscaped()));
    options_->set_schema(info->options_schema);
    options_->set_values(cb.value("options").toObject());  // the engine checks them
    options_->setEnabled(true);
  }
  updating_ = false;
}

void LaunchPanel::callback_target_changed() {
  if (updating_) return;
  const int row = callbacks_->currentRow();
  QJsonArray list = config_.value("callbacks").toArray();
  if (row < 0 || row >= list.size()) return;
  QJsonObject cb = list.at(row).toObject();
  cb.insert("target", target_->currentData().toString());
  list.replace(row, cb);
  config_.insert("callbacks", list);
  write_config_to_editor();
  if (QListWidgetItem* item = callbacks_->item(row))
    item->setText(
        QString("%1  →  %2").arg(cb.value("plugin").toString(), cb.value("target").toString()));
}

void LaunchPanel::callback_options_checked() {
  const bool edited = options_edited_;
  options_edited_ = false;
  const int row = callbacks_->currentRow();
  QJsonArray list = config_.value("callbacks").toArray();
  if (edited && !updating_ && options_->isEnabled() && row >= 0 && row < list.size()) {
    QJsonObject cb = list.at(row).toObject();
    // An option being typed that is not valid yet stays in the form (marked there); the config
    // keeps its last valid options until it is fixed.
    const QStringList problems = options_->problems();
    if (!problems.isEmpty()) {
      show_error(QString("Callback %1 (%2): %3")
                     .arg(row + 1)
                     .arg(cb.value("plugin").toString(), problems.front()),
                 0);
    } else {
      const QJsonObject options = options_->values();
      if (options.isEmpty())
        cb.remove("options");
      else
        cb.insert("options", options);
      list.replace(row, cb);
      config_.insert("callbacks", list);
      write_config_to_editor();
    }
  }
  if (start_pending_) {
    start_pending_ = false;
    start();
  }
}

void LaunchPanel::add_callback(const QString& plugin) {
  QJsonArray list = config_.value("callbacks").toArray();
  list.append(QJsonObject{{"plugin", plugin}, {"target", "template"}});
  config_.insert("callbacks", list);
  write_config_to_editor();
  refresh_callback_list();
  callbacks_->setCurrentRow(static_cast<int>(list.size()) - 1);
}

void LaunchPanel::start() {
  if (!config()) {
    Q_EMIT message("The config is not valid JSON; fix it before starting.");
    return;
  }
  if (options_->isEnabled()) {
    if (options_edited_ && options_->checking()) {
      start_pending_ = true;  // once the engine has checked the options just edited
      return;
    }
    if (!options_->problems().isEmpty()) {
      Q_EMIT message("Fix the callback options marked in red before starting.");
      return;
    }
  }
  if ((modified_ || path_.isEmpty()) && !save()) return;
  TrainLaunch launch;
  launch.config_path = path_;
  launch.processes = processes_->value();
  Q_EMIT start_requested(launch);
}

}  // namespace tandem::gui
