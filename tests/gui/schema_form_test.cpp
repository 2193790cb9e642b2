// SchemaForm: typed values, the engine's validation messages (`tandem check-options`) and inline
// marks on a hand-written schema; that the messages are the engine's (a fake engine's answer is
// shown as it is, and without an engine nothing is validated); and a usable form for the options
// schema of every plugin the engine ships (`tandem plugins --json`).
#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QVariant>
// The widget half of QtTest (keyClicks on a QWidget, QApplication in QTEST_MAIN) even where
// QT_WIDGETS_LIB is not defined (scripts/gui-syntax-check).
#include <QtTest/qtest_widgets.h>
#include <QtTest>

#include "schema_form.hpp"

using tandem::gui::SchemaForm;

namespace {

/// The kinds of field the built-in plugins use, in one schema.
QJsonObject test_schema() {
  return QJsonDocument::fromJson(R"({
    "type": "object",
    "properties": {
      "count": {"type": "integer", "minimum": 0, "default": 0, "description": "how many"},
      "rate": {"type": "number", "exclusiveMinimum": 0, "description": "how fast"},
      "mode": {"type": "string", "enum": ["auto", "min", "max"], "default": "auto"},
      "flag": {"type": "boolean", "default": false},
      "freq": {"type": ["string", "integer"], "minimum": 1, "default": "epoch"},
      "threshold": {"type": ["number", "null"], "default": null},
      "name": {"type": "string", "minLength": 1, "description": "who"}
    },
    "required": ["name"],
    "additionalProperties": false
  })")
      .object();
}

QString json_text(const QJsonValue& value) {
  const QByteArray wrapped = QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact);
  return QString::fromUtf8(wrapped.mid(1, wrapped.size() - 2));
}

/// Each key with its JSON kind and value, so that comparisons see integers and doubles apart:
/// {"count": 3, "rate": 0.5} -> "count=integer:3 rate=double:0.5".
QString typed(const QJsonObject& object) {
  QStringList entries;
  for (auto it = object.begin(); it != object.end(); ++it) {
    QString kind;
    switch (it.value().type()) {
      case QJsonValue::Double:
        kind = it.value().toVariant().typeId() == QMetaType::LongLong ? "integer" : "double";
        break;
      case QJsonValue::String:
        kind = "string";
        break;
      case QJsonValue::Bool:
        kind = "boolean";
        break;
      case QJsonValue::Null:
        kind = "null";
        break;
      case QJsonValue::Array:
        kind = "array";
        break;
      case QJsonValue::Object:
        kind = "object";
        break;
      case QJsonValue::Undefined:
        kind = "undefined";
        break;
    }
    entries << QStringLiteral("%1=%2:%3").arg(it.key(), kind, json_text(it.value()));
  }
  return entries.join(' ');
}

QLineEdit* line_edit(const SchemaForm& form, const QString& option) {
  return qobject_cast<QLineEdit*>(form.field(option));
}

/// Replaces the text of a line-edit field the way a user does: key by key.
void type_into(SchemaForm& form, const QString& option, const QString& text) {
  QLineEdit* edit = line_edit(form, option);
  QVERIFY2(edit, qPrintable(option + " has no line edit"));
  edit->clear();  // programmatic: no textEdited, no changed()
  QTest::keyClicks(edit, text);
  QCOMPARE(edit->text(), text);
}

/// Asks the engine to check the form and waits for its answer: the problems it found.
QStringList checked(SchemaForm& form) {
  QSignalSpy validated(&form, &SchemaForm::validated);
  form.validate(0);
  if (!validated.wait(30000)) return {QStringLiteral("(no answer from the engine)")};
  return form.problems();
}

/// TANDEM_ENGINE = a shell script (`script` is its body) while it lives.
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

bool starts_any(const QStringList& messages, const QString& prefix) {
  return std::any_of(messages.begin(), messages.end(),
                     [&](const QString& message) { return message.startsWith(prefix); });
}

}  // namespace

class SchemaFormTest : public QObject {
  Q_OBJECT

 private:
  QJsonArray plugins_;  // "plugins" of `tandem plugins --json`; empty when TANDEM_ENGINE is unset

 private Q_SLOTS:
  void initTestCase();
  void builds_a_row_per_option();
  void untouched_form_sets_nothing();
  void bad_values_are_reported_and_left_out();
  void good_values_are_typed_by_the_schema();
  void set_values_round_trips();
  void values_of_the_wrong_type_are_reported();
  void unknown_keys_are_reported();
  void required_choice_without_default();
  void integer_enum_and_empty_string();
  void json_lists();
  void set_schema_clears_the_form();
  void the_messages_are_the_engines();
  void without_an_engine_nothing_is_validated();
  void real_plugin_schemas_data();
  void real_plugin_schemas();
};

void SchemaFormTest::initTestCase() {
  const QString engine = qEnvironmentVariable("TANDEM_ENGINE");
  if (engine.isEmpty()) return;  // real_plugin_schemas skips
  QProcess process;
  process.start(engine, {QStringLiteral("plugins"), QStringLiteral("--json")});
  QVERIFY2(process.waitForFinished(60000), qPrintable(engine + ": " + process.errorString()));
  QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0,
           qPrintable(QString::fromUtf8(process.readAllStandardError())));
  QJsonParseError error;
  const QJsonDocument document = QJsonDocument::fromJson(process.readAllStandardOutput(), &error);
  QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
  plugins_ = document.object().value("plugins").toArray();
  QVERIFY2(std::any_of(plugins_.begin(), plugins_.end(),
                       [](const QJsonValue& plugin) { return plugin["ok"].toBool(); }),
           "the engine lists no working plugin");
}

void SchemaFormTest::builds_a_row_per_option() {
  SchemaForm form;
  form.set_schema(test_schema());
  QCOMPARE(form.option_names(), QStringList({"name", "count", "flag", "freq", "mode", "rate",
                                             "threshold"}));  // required first
  for (const char* option : {"name", "count", "freq", "rate", "threshold"})
    QVERIFY2(line_edit(form, option), option);
  QVERIFY(qobject_cast<QCheckBox*>(form.field("flag")));
  auto* mode = qobject_cast<QComboBox*>(form.field("mode"));
  QVERIFY(mode);
  QVERIFY(!form.field("nope"));

  QCOMPARE(mode->count(), 4);
  QCOMPARE(mode->itemText(0), QStringLiteral("(default: auto)"));
  QCOMPARE(mode->itemText(2), QStringLiteral("min"));
  QCOMPARE(line_edit(form, "count")->placeholderText(), QStringLiteral("default: 0"));
  QCOMPARE(line_edit(form, "freq")->placeholderText(), QStringLiteral("default: epoch"));
  QCOMPARE(line_edit(form, "threshold")->placeholderText(), QStringLiteral("default: null"));
  QVERIFY(form.field("count")->toolTip().contains("how many"));
  // The description is also shown as a label.
  const QList<QLabel*> labels = form.findChildren<QLabel*>();
  QVERIFY(std::any_of(labels.begin(), labels.end(),
                      [](const QLabel* label) { return label->text() == "how fast"; }));
  // The name of a required option is bold.
  const auto name_label = std::find_if(labels.begin(), labels.end(),
                                       [](const QLabel* label) { return label->text() == "name"; });
  QVERIFY(name_label != labels.end());
  QVERIFY((*name_label)->font().bold());
  QCOMPARE((*name_label)->buddy(), form.field("name"));
}

void SchemaFormTest::untouched_form_sets_nothing() {
  SchemaForm form;
  form.set_schema(test_schema());
  QCOMPARE(typed(form.values()), QString());
  QCOMPARE(checked(form), QStringList{"name: required option is missing"});
  QVERIFY(form.field("name")->property("invalid").toBool());
  QVERIFY(!form.field("count")->property("invalid").toBool());
  QCOMPARE(form.field_problem("name"), QStringLiteral("name: required option is missing"));
  QCOMPARE(form.field_problem("count"), QString());
}

void SchemaFormTest::bad_values_are_reported_and_left_out() {
  SchemaForm form;
  form.set_schema(test_schema());
  form.show();
  QSignalSpy changed(&form, &SchemaForm::changed);
  type_into(form, "count", "abc");
  QCOMPARE(changed.count(), 3);  // one per key, each asking the engine to check
  checked(form);
  QVERIFY(form.field("count")->property("invalid").toBool());
  type_into(form, "rate", "0");
  type_into(form, "freq", "0");
  type_into(form, "threshold", "abc");

  const QStringList expected = {
      QStringLiteral("name: required option is missing"),
      QStringLiteral("count: expected an integer >= 0, got \"abc\""),
      QStringLiteral("freq: expected a string or an integer >= 1, got 0"),
      QStringLiteral("rate: expected a number > 0, got 0"),
      QStringLiteral("threshold: expected a number or null, got \"abc\""),
  };
  QCOMPARE(checked(form), expected);
  QCOMPARE(typed(form.values()), QString());

  // Marked inline: the property for style sheets, the message in the tooltip and under the field.
  for (const char* option : {"name", "count", "freq", "rate", "threshold"})
    QVERIFY2(form.field(option)->property("invalid").toBool(), option);
  QVERIFY(!form.field("mode")->property("invalid").toBool());
  QVERIFY(!form.field("flag")->property("invalid").toBool());
  QCOMPARE(form.field_problem("count"), expected[1]);
  QVERIFY(form.field("count")->toolTip().contains(expected[1]));
  QVERIFY(form.field("count")->toolTip().contains("how many"));
  const QList<QLabel*> labels = form.findChildren<QLabel*>();
  QVERIFY(std::any_of(labels.begin(), labels.end(), [](const QLabel* label) {
    return label->isVisible() &&
           label->text() == QStringLiteral("expected an integer >= 0, got \"abc\"");
  }));

  type_into(form, "count", "-1");
  checked(form);
  QCOMPARE(form.field_problem("count"), QStringLiteral("count: expected an integer >= 0, got -1"));
  type_into(form, "count", "1.5");
  checked(form);
  QCOMPARE(form.field_problem("count"), QStringLiteral("count: expected an integer >= 0, got 1.5"));

  // Fixing a field clears its mark and puts it in values().
  type_into(form, "count", "2");
  checked(form);
  QCOMPARE(form.field_problem("count"), QString());
  QVERIFY(!form.field("count")->property("invalid").toBool());
  QVERIFY(!form.field("count")->toolTip().contains("expected an integer >= 0, got"));
  QCOMPARE(typed(form.values()), QStringLiteral("count=integer:2"));
  QCOMPARE(checked(form).size(), expected.size() - 1);
}

void SchemaFormTest::good_values_are_typed_by_the_schema() {
  SchemaForm form;
  form.set_schema(test_schema());
  form.show();
  QSignalSpy changed(&form, &SchemaForm::changed);
  type_into(form, "name", "run");
  type_into(form, "count", "3");
  type_into(form, "rate", "0.5");
  type_into(form, "freq", "7");
  type_into(form, "threshold", "null");
  auto* mode = qobject_cast<QComboBox*>(form.field("mode"));
  mode->setCurrentIndex(mode->findText("min"));
  auto* flag = qobject_cast<QCheckBox*>(form.field("flag"));
  const int edits = changed.count();
  flag->click();
  QCOMPARE(changed.count(), edits + 1);

  QCOMPARE(checked(form), QStringList());
  const QJsonObject expected{{"name", "run"},
                             {"count", 3},
                             {"rate", 0.5},
                             {"freq", 7},
                             {"mode", "min"},
                             {"flag", true},
                             {"threshold", QJsonValue::Null}};
  QCOMPARE(typed(form.values()), typed(expected));
  QCOMPARE(typed(form.values()),
           QStringLiteral("count=integer:3 flag=boolean:true freq=integer:7 mode=string:\"min\" "
                          "name=string:\"run\" rate=double:0.5 threshold=null:null"));

  // The other types a union allows; integral numbers.
  type_into(form, "freq", "epoch");
  type_into(form, "threshold", "2.5");
  type_into(form, "count", "4.0");
  QCOMPARE(checked(form), QStringList());
  const QJsonObject values = form.values();
  QCOMPARE(typed({{"freq", values.value("freq")},
                  {"threshold", values.value("threshold")},
                  {"count", values.value("count")}}),
           QStringLiteral("count=integer:4 freq=string:\"epoch\" threshold=double:2.5"));
  // Qt 6 stores a double with an integral value as a JSON integer; the value is what counts.
  type_into(form, "rate", "2");
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(form.values().value("rate").toDouble(), 2.0);

  // Back to the default: unset again.
  flag->click();
  mode->setCurrentIndex(0);
  QVERIFY(!form.values().contains("flag"));
  QVERIFY(!form.values().contains("mode"));
  type_into(form, "count", "");
  QVERIFY(!form.values().contains("count"));
}

void SchemaFormTest::set_values_round_trips() {
  SchemaForm form;
  form.set_schema(test_schema());
  QSignalSpy changed(&form, &SchemaForm::changed);
  const QJsonObject options{{"name", "x"},
                            {"count", 5},
                            {"rate", 0.25},
                            {"freq", "epoch"},
                            {"mode", "max"},
                            {"flag", true},
                            {"threshold", QJsonValue::Null}};
  form.set_values(options);
  QCOMPARE(changed.count(), 0);  // only user edits
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), typed(options));
  QCOMPARE(line_edit(form, "count")->text(), QStringLiteral("5"));
  QCOMPARE(line_edit(form, "rate")->text(), QStringLiteral("0.25"));
  QCOMPARE(line_edit(form, "threshold")->text(), QStringLiteral("null"));
  QCOMPARE(line_edit(form, "freq")->text(), QStringLiteral("epoch"));
  QCOMPARE(qobject_cast<QComboBox*>(form.field("mode"))->currentText(), QStringLiteral("max"));
  QVERIFY(qobject_cast<QCheckBox*>(form.field("flag"))->isChecked());

  // A string that would read as another type is quoted, so it stays a string. set_values replaces
  // everything: count and the others are unset again.
  form.set_values({{"name", "x"}, {"freq", "5"}});
  QCOMPARE(line_edit(form, "freq")->text(), QStringLiteral("\"5\""));
  QCOMPARE(line_edit(form, "count")->text(), QString());
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("freq=string:\"5\" name=string:\"x\""));

  // A boolean equal to its default is not an option the user set.
  form.set_values({{"name", "x"}, {"flag", false}});
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("name=string:\"x\""));
}

void SchemaFormTest::values_of_the_wrong_type_are_reported() {
  SchemaForm form;
  form.set_schema(test_schema());
  form.show();
  form.set_values({{"name", "x"},
                   {"count", "3"},
                   {"flag", "yes"},
                   {"mode", "fast"},
                   {"threshold", QJsonArray{1}}});
  const QStringList expected = {
      QStringLiteral("count: expected an integer >= 0, got \"3\""),
      QStringLiteral("flag: expected true or false, got \"yes\""),
      QStringLiteral("mode: expected one of auto, min, max, got \"fast\""),
      QStringLiteral("threshold: expected a number or null, got [1]"),
  };
  QCOMPARE(checked(form), expected);
  QCOMPARE(typed(form.values()), QStringLiteral("name=string:\"x\""));
  QCOMPARE(line_edit(form, "count")->text(), QStringLiteral("\"3\""));

  // The user's edit replaces the value that came in.
  type_into(form, "count", "3");
  qobject_cast<QCheckBox*>(form.field("flag"))->click();
  QCOMPARE(checked(form), expected.mid(2));
  QCOMPARE(typed(form.values()),
           QStringLiteral("count=integer:3 flag=boolean:true name=string:\"x\""));
}

void SchemaFormTest::unknown_keys_are_reported() {
  SchemaForm form;
  form.set_schema(test_schema());
  form.set_values({{"name", "x"}, {"bogus", 1}});
  QCOMPARE(checked(form),
           QStringList{"bogus: unknown option (known: count, flag, freq, mode, name, rate, "
                       "threshold)"});
  QCOMPARE(typed(form.values()), QStringLiteral("name=string:\"x\""));
  form.set_values({{"name", "x"}});
  QCOMPARE(checked(form), QStringList());
}

void SchemaFormTest::required_choice_without_default() {
  // As lr_scheduler's "schedule".
  SchemaForm form;
  form.set_schema(QJsonDocument::fromJson(R"({"type": "object", "properties": {
      "schedule": {"type": "string", "enum": ["step", "cosine"]}},
      "required": ["schedule"], "additionalProperties": false})")
                      .object());
  auto* schedule = qobject_cast<QComboBox*>(form.field("schedule"));
  QVERIFY(schedule);
  QCOMPARE(schedule->itemText(0), QStringLiteral("(not set)"));
  QCOMPARE(checked(form), QStringList{"schedule: required option is missing"});
  schedule->setCurrentIndex(2);
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("schedule=string:\"cosine\""));
}

void SchemaFormTest::integer_enum_and_empty_string() {
  // As the "verbose" of several plugins and the "path" of events ("" for none).
  SchemaForm form;
  form.set_schema(QJsonDocument::fromJson(R"({"type": "object", "properties": {
      "verbose": {"type": "integer", "enum": [0, 1], "default": 0},
      "path": {"type": "string", "default": "events.jsonl"}},
      "additionalProperties": false})")
                      .object());
  form.show();
  auto* verbose = qobject_cast<QComboBox*>(form.field("verbose"));
  QVERIFY(verbose);
  QCOMPARE(verbose->itemText(0), QStringLiteral("(default: 0)"));
  verbose->setCurrentIndex(verbose->findText("1"));
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("verbose=integer:1"));

  type_into(form, "path", "\"\"");
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("path=string:\"\" verbose=integer:1"));
  type_into(form, "path", "a b");
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(form.values().value("path").toString(), QStringLiteral("a b"));

  form.set_values({{"path", ""}, {"verbose", 2}});
  QCOMPARE(line_edit(form, "path")->text(), QStringLiteral("\"\""));
  QCOMPARE(checked(form), QStringList{"verbose: expected one of 0, 1, got 2"});
  QCOMPARE(typed(form.values()), QStringLiteral("path=string:\"\""));
}

void SchemaFormTest::json_lists() {
  SchemaForm form;
  form.set_schema(QJsonDocument::fromJson(R"({"type": "object", "properties": {
      "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}}}})")
                      .object());
  form.show();
  type_into(form, "sizes", "[1, 2]");
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("sizes=array:[1,2]"));
  type_into(form, "sizes", "[1, 0]");
  QCOMPARE(checked(form), QStringList{"sizes[1]: expected an integer >= 1, got 0"});
  type_into(form, "sizes", "[1");
  QCOMPARE(checked(form), QStringList{"sizes: expected a JSON list, got \"[1\""});
  QCOMPARE(typed(form.values()), QString());
  form.set_values({{"sizes", QJsonArray{3, 4}}});
  QCOMPARE(line_edit(form, "sizes")->text(), QStringLiteral("[3,4]"));

  // Without "additionalProperties": false, keys the form does not show pass through.
  form.set_values({{"other", "kept"}});
  QCOMPARE(checked(form), QStringList());
  QCOMPARE(typed(form.values()), QStringLiteral("other=string:\"kept\""));
}

void SchemaFormTest::set_schema_clears_the_form() {
  SchemaForm form;
  form.set_schema(test_schema());
  form.set_values({{"name", "x"}, {"count", 1}, {"bogus", 1}});
  form.set_schema(test_schema());
  QCOMPARE(typed(form.values()), QString());
  QCOMPARE(line_edit(form, "count")->text(), QString());
  QCOMPARE(checked(form), QStringList{"name: required option is missing"});

  form.set_schema(QJsonObject{{"type", "object"}, {"properties", QJsonObject()}});
  QVERIFY(!form.field("count"));
  QCOMPARE(form.option_names(), QStringList());
  QCOMPARE(checked(form), QStringList());
}

void SchemaFormTest::the_messages_are_the_engines() {
  // The form shows what the engine says, word for word, and where it says it: it has no
  // validator of its own that could disagree.
  FakeEngine engine(R"(cat > /dev/null
echo '{"schema": 1, "ok": false, "options": null,
       "problems": [{"option": "count", "path": "count", "message": "not on a Tuesday"},
                    {"option": "extra", "path": "extra", "message": "the engine dislikes it"}],
       "expects": {"count": "a number the engine likes"}}'
exit 2
)");
  SchemaForm form;
  form.set_schema(test_schema());
  form.set_values({{"name", "x"}, {"count", 1}, {"extra", true}});
  QCOMPARE(checked(form),
           QStringList({"count: not on a Tuesday", "extra: the engine dislikes it"}));
  QCOMPARE(form.field_problem("count"), QStringLiteral("count: not on a Tuesday"));
  QVERIFY(form.field("count")->property("invalid").toBool());
  QVERIFY(form.field("count")->toolTip().contains("Expects a number the engine likes."));
  QVERIFY(!form.field("name")->property("invalid").toBool());  // the engine found nothing there
  QCOMPARE(typed(form.values()), QStringLiteral("name=string:\"x\""));
}

void SchemaFormTest::without_an_engine_nothing_is_validated() {
  const QByteArray old = qgetenv("TANDEM_ENGINE");
  qputenv("TANDEM_ENGINE", "/nonexistent/tandem");
  SchemaForm form;
  form.set_schema(test_schema());
  form.set_values({{"name", "x"}, {"count", -1}});
  const QStringList problems = checked(form);
  qputenv("TANDEM_ENGINE", old);
  QCOMPARE(problems.size(), 1);
  QVERIFY2(problems.front().startsWith("The options cannot be checked: TANDEM_ENGINE is "
                                       "/nonexistent/tandem"),
           qPrintable(problems.front()));
  QVERIFY(!form.field("count")->property("invalid").toBool());
  QCOMPARE(typed(form.values()), QString());  // nothing is taken unchecked
  const QList<QLabel*> labels = form.findChildren<QLabel*>();
  QVERIFY(std::any_of(labels.begin(), labels.end(), [](const QLabel* label) {
    return label->text().contains("The options cannot be checked");
  }));
}

void SchemaFormTest::real_plugin_schemas_data() {
  QTest::addColumn<QJsonObject>("schema");
  if (plugins_.isEmpty()) {
    QTest::newRow("no engine") << QJsonObject();
    return;
  }
  for (const QJsonValue& plugin : plugins_) {
    if (!plugin["ok"].toBool()) continue;  // a broken plugin has an error instead of a schema
    QTest::addRow("%s", qPrintable(plugin["name"].toString()))
        << plugin["options_schema"].toObject();
  }
}

void SchemaFormTest::real_plugin_schemas() {
  if (qEnvironmentVariable("TANDEM_ENGINE").isEmpty())
    QSKIP("TANDEM_ENGINE is not set (the engine binary lists the plugins)");
  QFETCH(QJsonObject, schema);
  SchemaForm form;
  form.set_schema(schema);
  const QJsonObject properties = schema.value("properties").toObject();
  QStringList required;
  for (const QJsonValue& name : schema.value("required").toArray()) required << name.toString();

  QCOMPARE(form.option_names().size(), properties.size());
  for (const QString& option : properties.keys()) {
    const QJsonObject property = properties[option].toObject();
    const QWidget* input = form.field(option);
    QVERIFY2(input, qPrintable(option));
    const char* expected_class = property.contains("enum")                   ? "QComboBox"
                                 : property["type"] == QJsonValue("boolean") ? "QCheckBox"
                                                                             : "QLineEdit";
    QVERIFY2(qstrcmp(input->metaObject()->className(), expected_class) == 0,
             qPrintable(option + " is a " + input->metaObject()->className()));
    QVERIFY2(input->toolTip().contains(property["description"].toString()), qPrintable(option));
  }

  // Untouched, the form sets nothing and is valid unless something is required.
  QCOMPARE(typed(form.values()), QString());
  QStringList problems = checked(form);
  QStringList missing;
  for (const QString& name : required) missing << name + ": required option is missing";
  problems.sort();
  missing.sort();
  QCOMPARE(problems, missing);
  QCOMPARE(problems.isEmpty(), required.isEmpty());

  for (const QString& option : properties.keys()) {
    const QJsonObject property = properties[option].toObject();
    const QString prefix = option + ": ";
    // The default shows, is valid and comes back by value (a boolean at its default is unset).
    if (property.contains("default")) {
      form.set_values({{option, property["default"]}});
      problems = checked(form);
      QVERIFY2(!starts_any(problems, prefix), qPrintable(problems.join("; ")));
      if (property["type"] == QJsonValue("boolean"))
        QVERIFY2(!form.values().contains(option), qPrintable(option));
      else
        QVERIFY2(json_text(form.values().value(option)) == json_text(property["default"]),
                 qPrintable(option + " = " + json_text(form.values().value(option))));
    }
    // Every choice can be picked.
    if (auto* choice = qobject_cast<QComboBox*>(form.field(option))) {
      const QJsonArray choices = property["enum"].toArray();
      QCOMPARE(qsizetype{choice->count()}, choices.size() + 1);
      for (int i = 1; i < choice->count(); ++i) {
        form.set_values({});
        choice->setCurrentIndex(i);
        QVERIFY2(!starts_any(checked(form), prefix), qPrintable(option));
        QCOMPARE(json_text(form.values().value(option)), json_text(choices[i - 1]));
      }
    }
    // A value of a type none of them takes is reported and left out.
    form.set_values({{option, QJsonObject{{"x", 1}}}});
    problems = checked(form);
    QVERIFY2(starts_any(problems, prefix + "expected "), qPrintable(option));
    QVERIFY2(!form.values().contains(option), qPrintable(option));
  }
}

QTEST_MAIN(SchemaFormTest)
#include "schema_form_test.moc"
