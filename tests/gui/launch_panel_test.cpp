// The Launch panel: form and JSON editor in step, validation errors at their line (JSON syntax
// here, everything else from `tandem check`), callbacks from the plugin catalog with option forms
// checked by the engine, optimizers from `tandem optimizers --json`.
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QtTest>

#include "launch_panel.hpp"
#include "schema_form.hpp"

using namespace tandem::gui;

class LaunchPanelTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;
  QString config_;

  /// TANDEM_ENGINE = a shell script with this body while it lives.
  class FakeEngine {
   public:
    explicit FakeEngine(const QByteArray& script) : old_(qgetenv("TANDEM_ENGINE")) {
      const QString path = dir_.filePath("tandem");
      QFile file(path);
      if (!file.open(QIODevice::WriteOnly)) qFatal("cannot write the fake engine");
      file.write("#!/bin/sh\n" + script);
      file.close();
      file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
      qputenv("TANDEM_ENGINE", path.toUtf8());
    }
    ~FakeEngine() { qputenv("TANDEM_ENGINE", old_); }

   private:
    QTemporaryDir dir_;
    QByteArray old_;
  };

  static QStringList items(const QComboBox* box) {
    QStringList out;
    for (int i = 0; i < box->count(); ++i) out << box->itemText(i);
    return out;
  }

  static QString tiny_text() {
    QFile f(QString(TANDEM_GUI_TEST_DATA) + "/tiny-run.json");
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read tiny-run.json");
    return QString::fromUtf8(f.readAll());
  }

 private Q_SLOTS:
  void initTestCase() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    config_ = tmp_.filePath("tiny-run.json");
    QVERIFY(QFile::copy(QString(TANDEM_GUI_TEST_DATA) + "/tiny-run.json", config_));
    QFile::setPermissions(config_, QFile::ReadOwner | QFile::WriteOwner);
  }

  void a_valid_config_is_confirmed_by_the_engine() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QVERIFY(!panel.modified());
    QTRY_VERIFY_WITH_TIMEOUT(panel.config_valid(), 30000);
    QVERIFY2(panel.validation_text().contains("195 parameters"),
             qPrintable(panel.validation_text()));
    QTRY_VERIFY_WITH_TIMEOUT(panel.optimizer_catalog()->is_loaded(), 30000);
    QCOMPARE(panel.epochs_box()->value(), 3);
    QCOMPARE(panel.batch_box()->value(), 32);
    QCOMPARE(panel.optimizer_box()->currentText(), QString("Adam"));
    QCOMPARE(panel.learning_rate_edit()->text(), QString("0.01"));
    QCOMPARE(panel.devices_box()->currentText(), QString("cpu:2"));
    QCOMPARE(panel.callback_list()->count(), 4);
  }

  void form_edits_reach_the_json_and_json_edits_reach_the_form() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QTRY_VERIFY_WITH_TIMEOUT(panel.optimizer_catalog()->is_loaded(), 30000);
    panel.epochs_box()->setValue(7);
    panel.optimizer_box()->setCurrentText("SGD");
    panel.learning_rate_edit()->clear();
    QTest::keyClicks(panel.learning_rate_edit(), "0.05");
    panel.devices_box()->setCurrentText("cpu");
    auto config = panel.config();
    QVERIFY(config);
    QCOMPARE(config->value("epochs").toInt(), 7);
    QCOMPARE(config->value("optimizer").toObject().value("class_name").toString(), QString("SGD"));
    QCOMPARE(config->value("optimizer")
                 .toObject()
                 .value("config")
                 .toObject()
                 .value("learning_rate")
                 .toDouble(),
             0.05);
    QCOMPARE(config->value("devices").toString(), QString("cpu"));
    QVERIFY(panel.modified());

    QString text = panel.editor_text();
    text.replace("\"batch_size\": 32", "\"batch_size\": 64");
    panel.set_editor_text(text);
    QCOMPARE(panel.batch_box()->value(), 64);
    QCOMPARE(panel.epochs_box()->value(), 7);
  }

  // A learning rate that is a Keras schedule is shown by name and kept through form edits (the
  // empty field removed it from the config when anything else on the form changed).
  void a_learning_rate_schedule_survives_form_edits() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QString text = panel.editor_text();
    const QJsonObject schedule{
        {"class_name", "ExponentialDecay"},
        {"config",
         QJsonObject{{"initial_learning_rate", 0.1}, {"decay_steps", 10}, {"decay_rate", 0.5}}}};
    QJsonObject config = QJsonDocument::fromJson(text.toUtf8()).object();
    QJsonObject optimizer = config.value("optimizer").toObject();
    QJsonObject optimizer_config = optimizer.value("config").toObject();
    optimizer_config.insert("learning_rate", schedule);
    optimizer.insert("config", optimizer_config);
    config.insert("optimizer", optimizer);
    panel.set_editor_text(QString::fromUtf8(QJsonDocument(config).toJson()));
    QVERIFY(!panel.learning_rate_edit()->isEnabled());
    QVERIFY(panel.learning_rate_edit()->placeholderText().startsWith("ExponentialDecay schedule"));
    panel.epochs_box()->setValue(9);
    const auto edited = panel.config();
    QVERIFY(edited);
    QCOMPARE(edited->value("epochs").toInt(), 9);
    QCOMPARE(
        edited->value("optimizer").toObject().value("config").toObject().value("learning_rate"),
        QJsonValue(schedule));
  }

  void a_json_syntax_error_points_at_its_line() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    panel.set_editor_text("{\n  \"name\": \"x\",\n  \"epochs\": 3\n  \"seed\": 1\n}\n");
    QVERIFY(!panel.config_valid());
    QCOMPARE(panel.error_line(), 4);
    QVERIFY2(panel.validation_text().contains("line 4"), qPrintable(panel.validation_text()));
    panel.set_editor_text("[1, 2]");
    QVERIFY(panel.validation_text().contains("JSON object"));
  }

  void an_engine_error_points_at_the_line_of_its_json_path() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QString text = panel.editor_text();
    text.replace("\"units\": 3}", "\"units\": \"three\"}");
    panel.set_editor_text(text);
    QTRY_VERIFY_WITH_TIMEOUT(panel.validation_text().contains("units"), 30000);
    QVERIFY(!panel.config_valid());
    int expected = 0;
    const QStringList lines = text.split('\n');
    for (int i = 0; i < lines.size(); ++i)
      if (lines[i].contains("\"three\"")) expected = i + 1;
    QCOMPARE(panel.error_line(), expected);
    QVERIFY(panel.validation_text().contains("model.config.layers[2].config.units"));
    // The temporary copy the engine checked is not what the user is told about.
    QVERIFY(!panel.validation_text().contains("tandem-check"));
    QVERIFY(QDir(tmp_.path()).entryList({".tandem-check-*"}, QDir::Files | QDir::Hidden).isEmpty());
  }

  void callbacks_come_from_the_catalog_with_a_schema_form() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QSignalSpy loaded(&catalog, &PluginCatalog::loaded);
    catalog.load();
    QVERIFY(loaded.wait(30000));
    QVERIFY(catalog.find("checkpoint"));
    QVERIFY(panel.open_config(config_));
    panel.callback_list()->setCurrentRow(1);  // early_stopping, patience 2
    auto* patience = qobject_cast<QLineEdit*>(panel.options_form()->field("patience"));
    QVERIFY(patience);
    QCOMPARE(patience->text(), QString("2"));
    patience->selectAll();
    QTest::keyClicks(patience, "5");
    // The engine accepts it (`tandem check-options`), then it reaches the config.
    const auto patience_in_config = [&panel] {
      return panel.config()
          ->value("callbacks")
          .toArray()
          .at(1)
          .toObject()
          .value("options")
          .toObject()
          .value("patience")
          .toInt();
    };
    QTRY_COMPARE_WITH_TIMEOUT(patience_in_config(), 5, 30000);

    // A bad value stays in the form, marked in the engine's words, and keeps Start from running.
    patience->selectAll();
    QTest::keyClicks(patience, "-3");
    QTRY_VERIFY_WITH_TIMEOUT(panel.validation_text().contains("patience"), 30000);
    QCOMPARE(patience_in_config(), 5);
    QCOMPARE(panel.options_form()->field_problem("patience"),
             QString("patience: expected an integer >= 0 and <= 2147483647, got -3"));
    QVERIFY2(panel.validation_text().contains("expected an integer >= 0 and <= 2147483647, got -3"),
             qPrintable(panel.validation_text()));
    QSignalSpy started(&panel, &LaunchPanel::start_requested);
    QSignalSpy message(&panel, &LaunchPanel::message);
    panel.start();
    QCOMPARE(started.count(), 0);
    QCOMPARE(message.count(), 1);

    // Target and a new callback.
    panel.callback_list()->setCurrentRow(0);
    panel.target_box()->setCurrentIndex(1);
    QCOMPARE(
        panel.config()->value("callbacks").toArray().at(0).toObject().value("target").toString(),
        QString("meta"));
    panel.add_callback("terminate_on_nan");
    QCOMPARE(panel.callback_list()->count(), 5);
    QCOMPARE(
        panel.config()->value("callbacks").toArray().at(4).toObject().value("plugin").toString(),
        QString("terminate_on_nan"));
  }

  void the_optimizer_choice_is_the_engines_list() {
    // The real engine's answer, asked the way a user would.
    QProcess engine;
    engine.start(qEnvironmentVariable("TANDEM_ENGINE"), {"optimizers", "--json"});
    QVERIFY(engine.waitForFinished(30000));
    QCOMPARE(engine.exitCode(), 0);
    QStringList expected;
    for (const QJsonValue& o :
         QJsonDocument::fromJson(engine.readAllStandardOutput()).object()["optimizers"].toArray())
      expected << o["class_name"].toString();
    QVERIFY(expected.contains("Adam"));

    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QTRY_VERIFY_WITH_TIMEOUT(panel.optimizer_catalog()->is_loaded(), 30000);
    QCOMPARE(items(panel.optimizer_box()), expected);
    QVERIFY(panel.optimizer_box()->isEnabled());
    QCOMPARE(panel.optimizer_box()->currentText(), QString("Adam"));
    QVERIFY(panel.optimizer_error_label()->isHidden());
  }

  void the_optimizer_choice_follows_whatever_the_engine_lists() {
    // Another engine, another list: nothing is hard-coded in the dashboard.
    FakeEngine engine(R"(case "$1" in
  optimizers) echo '{"schema": 1, "optimizers": [
      {"class_name": "Lion", "aliases": ["lion"], "config": {"name": "Lion", "learning_rate": 0.0001}},
      {"class_name": "SGD", "aliases": ["sgd"], "config": {"name": "SGD", "learning_rate": 0.01}}]}' ;;
  *) echo "not in this test" >&2; exit 1 ;;
esac
)");
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    QTRY_VERIFY_WITH_TIMEOUT(panel.optimizer_catalog()->is_loaded(), 30000);
    // The config's Adam is not in this engine's list: it still shows, after the listed ones.
    QCOMPARE(items(panel.optimizer_box()), QStringList({"Lion", "SGD", "Adam"}));
    QCOMPARE(panel.optimizer_box()->currentText(), QString("Adam"));
    QVERIFY(panel.optimizer_box()->itemData(0, Qt::ToolTipRole).toString().contains("0.0001"));
    panel.optimizer_box()->setCurrentIndex(0);
    QCOMPARE(panel.config()->value("optimizer").toObject().value("class_name").toString(),
             QString("Lion"));
  }

  void an_engine_that_cannot_list_optimizers_is_reported() {
    FakeEngine engine("echo 'optimizers: something broke' >&2\nexit 1\n");
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QSignalSpy message(&panel, &LaunchPanel::message);
    QVERIFY(panel.open_config(config_));
    QTRY_VERIFY_WITH_TIMEOUT(!panel.optimizer_catalog()->error().isEmpty(), 30000);
    QVERIFY(panel.optimizer_error_label()->isVisibleTo(&panel));
    QVERIFY2(panel.optimizer_error_label()->text().contains("optimizers: something broke"),
             qPrintable(panel.optimizer_error_label()->text()));
    QVERIFY(!panel.optimizer_box()->isEnabled());
    QCOMPARE(items(panel.optimizer_box()), QStringList{"Adam"});  // the config's, still shown
    QVERIFY(std::any_of(message.begin(), message.end(), [](const QList<QVariant>& args) {
      return args.front().toString().contains("Cannot list the optimizers");
    }));
  }

  void start_saves_the_config_and_asks_for_the_run() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    panel.epochs_box()->setValue(2);
    QSignalSpy started(&panel, &LaunchPanel::start_requested);
    panel.start();
    QCOMPARE(started.count(), 1);
    QCOMPARE(started.front().front().value<TrainLaunch>().config_path,
             QFileInfo(config_).absoluteFilePath());
    QVERIFY(!panel.modified());
    QFile saved(config_);
    QVERIFY(saved.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(saved.readAll());
    QCOMPARE(QJsonDocument::fromJson(text.toUtf8()).object().value("epochs").toInt(), 2);
    // The user's formatting is kept: the file is the original with only "epochs" changed (Qt's
    // writer would have sorted the keys and put every member on a line of its own).
    QString expected = tiny_text();
    expected.replace("\"epochs\": 3,", "\"epochs\": 2,");
    QCOMPARE(text, expected);
  }

  // Leaving a config with unsaved edits (New from an example, Open) asks first: Cancel keeps the
  // edits, Discard drops them.
  void leaving_unsaved_edits_asks_first() {
    PluginCatalog catalog;
    LaunchPanel panel(&catalog);
    QVERIFY(panel.open_config(config_));
    panel.epochs_box()->setValue(7);
    QVERIFY(panel.modified());
    const QString edited = panel.editor_text();
    const QStringList examples = LaunchPanel::example_configs();
    QVERIFY(!examples.isEmpty());
    QAction* example = panel.new_menu()->actions().front();

    auto answer_with = [](QMessageBox::StandardButton button, bool* asked) {
      QTimer::singleShot(0, [button, asked] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        *asked = box && box->objectName() == "unsaved_changes";
        if (box) box->button(button)->click();
      });
    };
    bool asked = false;
    answer_with(QMessageBox::Cancel, &asked);
    example->trigger();
    QVERIFY(asked);
    QCOMPARE(panel.editor_text(), edited);
    QCOMPARE(panel.config_path(), QFileInfo(config_).absoluteFilePath());

    asked = false;
    answer_with(QMessageBox::Discard, &asked);
    example->trigger();
    QVERIFY(asked);
    QVERIFY(panel.editor_text() != edited);
    QVERIFY(panel.config_path().isEmpty());  // the example, unsaved
    // The file on disk never saw the discarded edit.
    QFile file(config_);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QVERIFY(!QString::fromUtf8(file.readAll()).contains("\"epochs\": 7"));
  }
};

QTEST_MAIN(LaunchPanelTest)
#include "launch_panel_test.moc"
