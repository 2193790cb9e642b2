// Reading the engine's JSON answers the dashboard depends on: `tandem plugins --json`,
// `tandem optimizers --json`, `tandem check --json` and `tandem check-options --json`, real and
// garbage.
#include <QJsonDocument>
#include <QtTest>

#include "config_checker.hpp"
#include "optimizer_catalog.hpp"
#include "options_checker.hpp"
#include "plugin_catalog.hpp"

using namespace tandem::gui;

class PluginCatalogTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void the_real_engine_lists_every_built_in_plugin() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    PluginCatalog catalog;
    QSignalSpy loaded(&catalog, &PluginCatalog::loaded);
    catalog.load();
    QVERIFY(loaded.wait(30000));
    for (const char* name :
         {"checkpoint", "early_stopping", "reduce_lr_on_plateau", "lr_scheduler", "csv_logger",
          "terminate_on_nan", "backup_and_restore", "replica_stats", "progress", "events"}) {
      const PluginInfo* p = catalog.find(name);
      QVERIFY2(p, name);
      QVERIFY(p->ok);
      QCOMPARE(p->options_schema.value("type").toString(), QString("object"));
      QVERIFY(!p->description.isEmpty());
    }
    QVERIFY(!catalog.find("no_such_plugin"));
  }

  void broken_plugins_keep_their_error() {
    QList<PluginInfo> plugins;
    QString error;
    QVERIFY(parse_plugin_catalog(
        R"({"plugin_abi_version": 2, "plugins": [
             {"name": "good", "ok": true, "version": "1.0", "options_schema": {"type": "object"}},
             {"name": "bad", "ok": false, "error": "ABI version 1, this Tandem uses 2"},
             {"ok": true}]})",
        &plugins, &error));
    QCOMPARE(plugins.size(), 2);  // the entry without a name is dropped
    QVERIFY(!plugins[1].ok);
    QCOMPARE(plugins[1].error, QString("ABI version 1, this Tandem uses 2"));
  }

  void garbage_is_refused_with_a_reason() {
    QList<PluginInfo> plugins;
    QString error;
    QVERIFY(!parse_plugin_catalog("not json", &plugins, &error));
    QVERIFY(error.contains("not the expected JSON"));
    QVERIFY(!parse_plugin_catalog(R"({"plugins": 3})", &plugins, &error));
    QVERIFY(error.contains("no \"plugins\" list"));
    QVERIFY(!parse_plugin_catalog("", &plugins, &error));
  }

  void the_real_engine_lists_its_optimizers() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    OptimizerCatalog catalog;
    QSignalSpy loaded(&catalog, &OptimizerCatalog::loaded);
    catalog.load();
    QVERIFY(loaded.wait(30000));
    QStringList names;
    for (const OptimizerInfo& o : catalog.optimizers()) names << o.class_name;
    QCOMPARE(names, QStringList({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                 "Adamax", "Nadam", "Lion"}));
    QCOMPARE(catalog.class_of("adamw"), QString("AdamW"));
    QCOMPARE(catalog.class_of("ADAM"), QString("Adam"));
    QCOMPARE(catalog.class_of("Adafactor"), QString());  // a Keras optimizer Tandem lacks
    QCOMPARE(catalog.optimizers()[0].config.value("learning_rate").toDouble(), 0.01);
  }

  void optimizer_lists_and_garbage() {
    QList<OptimizerInfo> optimizers;
    QString error;
    QVERIFY(parse_optimizer_catalog(
        R"({"schema": 1, "optimizers": [{"class_name": "Lion", "aliases": ["lion"],
             "config": {"learning_rate": 0.0001}}, {"aliases": ["nameless"]}]})",
        &optimizers, &error));
    QCOMPARE(optimizers.size(), 1);  // the entry without a class name is dropped
    QCOMPARE(optimizers[0].aliases, QStringList{"lion"});
    QVERIFY(!parse_optimizer_catalog("not json", &optimizers, &error));
    QVERIFY(error.contains("not the expected JSON"));
    QVERIFY(!parse_optimizer_catalog(R"({"optimizers": []})", &optimizers, &error));
    QVERIFY(error.contains("no optimizer"));
    QCOMPARE(optimizers.size(), 1);  // a failed parse leaves the list as it was
  }

  void options_check_answers_and_garbage() {
    const OptionsCheck bad = parse_options_check(
        R"({"schema": 1, "ok": false, "options": null, "expects": {"patience": "an integer >= 0"},
            "problems": [{"option": "patience", "path": "patience", "message": "expected an integer >= 0, got -1"}]})",
        2, "");
    QVERIFY(!bad.ok);
    QVERIFY(bad.error.isEmpty());
    QCOMPARE(bad.problems.size(), 1);
    QCOMPARE(bad.problems[0].text(), QString("patience: expected an integer >= 0, got -1"));
    QCOMPARE(bad.expects.value("patience").toString(), QString("an integer >= 0"));
    const OptionsCheck refused = parse_options_check(
        R"({"schema": 1, "ok": false, "error": "config error at 'schema': a schema must be a JSON object", "path": "schema"})",
        2, "");
    QVERIFY(refused.error.contains("a schema must be a JSON object"));
    const OptionsCheck crashed = parse_options_check("", 134, "tandem: error: boom\n");
    QVERIFY(!crashed.ok);
    QVERIFY(crashed.error.contains("exit code 134"));
    QVERIFY(crashed.error.contains("boom"));
  }

  void the_options_checker_reports_the_newest_request_only() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    const QJsonObject schema = QJsonDocument::fromJson(R"({"type": "object", "properties":
        {"n": {"type": "integer", "minimum": 1}}, "additionalProperties": false})")
                                   .object();
    OptionsChecker checker;
    QSignalSpy checked(&checker, &OptionsChecker::checked);
    checker.request(schema, {{"n", 0}}, 50);
    checker.request(schema, {{"n", 2}}, 50);
    QVERIFY(checker.busy());
    QVERIFY(checked.wait(30000));
    QTest::qWait(300);
    QCOMPARE(checked.count(), 1);
    const auto result = checked.front().front().value<OptionsCheck>();
    QVERIFY2(result.ok, qPrintable(result.error));
    QCOMPARE(result.options.value("n").toInt(), 2);
    QCOMPARE(result.expects.value("n").toString(), QString("an integer >= 1"));
    QVERIFY(!checker.busy());
  }

  void check_answers_and_garbage() {
    ConfigCheck ok = parse_config_check(
        R"({"ok": true, "summary": {"parameters": 195, "devices": {"plan": "cpu:2"}}})", 0, "");
    QVERIFY(ok.ok);
    QCOMPARE(ok.summary.value("parameters").toInt(), 195);
    ConfigCheck bad = parse_config_check(
        R"({"ok": false, "error": "config error at 'epochs': expected a positive integer, got 0", "path": "epochs"})",
        2, "");
    QVERIFY(!bad.ok);
    QCOMPARE(bad.path, QString("epochs"));
    ConfigCheck crashed = parse_config_check("Segmentation fault", 139, "tandem: error: boom\n");
    QVERIFY(!crashed.ok);
    QVERIFY(crashed.error.contains("exit code 139"));
    QVERIFY(crashed.error.contains("boom"));
    QVERIFY(!parse_config_check("", 1, "").ok);
  }

  void the_checker_reports_the_newest_text_only() {
    if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty()) QSKIP("TANDEM_ENGINE is not set");
    QTemporaryDir dir;
    ConfigChecker checker;
    QSignalSpy checked(&checker, &ConfigChecker::checked);
    // Two requests in quick succession: only the second (valid JSON, bad value) is reported.
    checker.request("{", dir.filePath("a.json"), 50);
    checker.request(R"({"epochs": 0})", dir.filePath("a.json"), 50);
    QVERIFY(checked.wait(30000));
    QTest::qWait(300);
    QCOMPARE(checked.count(), 1);
    const auto result = checked.front().front().value<ConfigCheck>();
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains("epochs") || result.error.contains("model"),
             qPrintable(result.error));
    // The temporary copy beside the config is gone.
    QVERIFY(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).isEmpty());
  }

  // An engine that cannot run answers both checkers with why (EngineQuery): one that is not
  // there, and one that fails to start (an interpreter that does not exist).
  void an_engine_that_cannot_run_is_the_answer() {
    const QByteArray saved = qgetenv("TANDEM_ENGINE");
    QTemporaryDir dir;
    const QString broken = dir.filePath("tandem");
    QFile file(broken);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("#!/nonexistent/interpreter\n");
    file.close();
    QVERIFY(file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
    for (const QString& engine : {dir.filePath("missing"), broken}) {
      qputenv("TANDEM_ENGINE", engine.toUtf8());
      const QString expected =
          engine == broken ? QString("cannot run the engine: ") : QString("is not an executable");
      ConfigChecker config;
      QSignalSpy config_checked(&config, &ConfigChecker::checked);
      config.request("{}", dir.filePath("a.json"), 0);
      QVERIFY(config_checked.wait(10000));
      const auto c = config_checked.front().front().value<ConfigCheck>();
      QVERIFY(!c.ok);
      QVERIFY2(c.error.contains(expected), qPrintable(c.error));
      OptionsChecker options;
      QSignalSpy options_checked(&options, &OptionsChecker::checked);
      options.request(QJsonObject{{"type", "object"}}, QJsonObject{{"n", 1}}, 0);
      QVERIFY(options_checked.wait(10000));
      const auto o = options_checked.front().front().value<OptionsCheck>();
      QVERIFY(!o.ok);
      QVERIFY2(o.error.contains(expected), qPrintable(o.error));
      QCOMPARE(o.options.value("n").toInt(), 1);
      QVERIFY(!options.busy());
    }
    if (saved.isNull())
      qunsetenv("TANDEM_ENGINE");
    else
      qputenv("TANDEM_ENGINE", saved);
    // The temporary copies of the config are gone.
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"tandem"});
  }
};

QTEST_GUILESS_MAIN(PluginCatalogTest)
#include "plugin_catalog_test.moc"
