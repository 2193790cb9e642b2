// Editing a user's config text from the form without reformatting it (issue: Start rewrote the
// user's file with sorted keys and Qt's indentation).
#include <QJsonDocument>
#include <QtTest>

#include "json_text_patch.hpp"

using namespace tandem::gui;

namespace {

// The user's style: 2-space indentation, keys in their own order (not sorted), one-line lists,
// a number written 1e-3, a line with several members, a blank line between sections.
const char* const kUserText = R"({
  "name": "mine",
  "seed": 42,
  "model": {
    "class_name": "Sequential",
    "config": {"layers": [
      {"class_name": "Dense", "config": {"units": 64, "activation": "relu", "input_shape": [784]}},
      {"class_name": "Dense", "config": {"units": 10}}
    ]}
  },
  "optimizer": {"class_name": "Adam", "config": {"learning_rate": 1e-3}},
  "loss": "sparse_categorical_crossentropy",

  "epochs": 5,
  "batch_size": 128,
  "data": {
    "train": {"type": "idx", "x": "train-images.gz", "y": "train-labels.gz"}
  }
}
)";

QJsonObject parsed(const QString& text) {
  return QJsonDocument::fromJson(text.toUtf8()).object();
}

// `text` with the first occurrence of `from` replaced by `to`.
QString with(QString text, const QString& from, const QString& to) {
  const qsizetype at = text.indexOf(from);
  Q_ASSERT(at >= 0);
  return text.replace(at, from.size(), to);
}

}  // namespace

class JsonTextPatchTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void an_unchanged_config_keeps_its_text_byte_for_byte() {
    const QString text = kUserText;
    QCOMPARE(patch_json_text(text, parsed(text)), text);
  }

  void a_changed_value_is_rewritten_in_place_and_nothing_else_moves() {
    const QString text = kUserText;
    QJsonObject config = parsed(text);
    config.insert("epochs", 12);
    QCOMPARE(patch_json_text(text, config), with(text, "\"epochs\": 5", "\"epochs\": 12"));

    QJsonObject optimizer = config.value("optimizer").toObject();
    optimizer.insert("config", QJsonObject{{"learning_rate", 0.01}});
    config.insert("optimizer", optimizer);
    QCOMPARE(patch_json_text(text, config),
             with(with(text, "\"epochs\": 5", "\"epochs\": 12"), "1e-3", "0.01"));
  }

  void an_added_key_goes_after_its_siblings_with_their_indentation() {
    const QString text = kUserText;
    QJsonObject config = parsed(text);
    config.insert("devices", "cpu:2");
    QJsonObject data = config.value("data").toObject();
    data.insert("validation", QJsonObject{{"type", "idx"}, {"x", "v.gz"}, {"y", "l.gz"}});
    config.insert("data", data);
    const QString patched = patch_json_text(text, config);
    QCOMPARE(parsed(patched), config);
    QVERIFY2(patched.contains("  \"data\": {\n"
                              "    \"train\": {\"type\": \"idx\", \"x\": \"train-images.gz\", "
                              "\"y\": \"train-labels.gz\"},\n"
                              "    \"validation\": {\n"
                              "      \"type\": \"idx\",\n"),
             qPrintable(patched));
    QVERIFY2(patched.endsWith("  },\n  \"devices\": \"cpu:2\"\n}\n"), qPrintable(patched));
    // The rest is as it was: the user's key order at the top.
    QVERIFY(patched.startsWith("{\n  \"name\": \"mine\",\n  \"seed\": 42,\n  \"model\": {\n"));
  }

  void a_removed_key_goes_with_its_separator() {
    const QString text = kUserText;
    for (const char* key : {"name", "loss", "data"}) {
      QJsonObject config = parsed(text);
      config.remove(key);
      const QString patched = patch_json_text(text, config);
      QCOMPARE(parsed(patched), config);
      QVERIFY2(!patched.contains(QString("\"%1\"").arg(key)), qPrintable(patched));
    }
    QJsonObject config = parsed(text);
    config.remove("seed");
    QCOMPARE(patch_json_text(text, config), with(text, "  \"seed\": 42,\n", ""));
  }

  void lists_grow_and_shrink_in_their_own_layout() {
    const QString text = kUserText;
    QJsonObject config = parsed(text);
    QJsonObject model = config.value("model").toObject();
    QJsonObject model_config = model.value("config").toObject();
    QJsonArray layers = model_config.value("layers").toArray();
    layers.append(QJsonObject{{"class_name", "Softmax"}, {"config", QJsonObject{}}});
    model_config.insert("layers", layers);
    model.insert("config", model_config);
    config.insert("model", model);
    QString patched = patch_json_text(text, config);
    QCOMPARE(parsed(patched), config);
    QVERIFY2(patched.contains("{\"class_name\": \"Dense\", \"config\": {\"units\": 10}},\n      {\n"),
             qPrintable(patched));

    layers.removeAt(0);
    layers.removeAt(1);
    model_config.insert("layers", layers);
    model.insert("config", model_config);
    config.insert("model", model);
    patched = patch_json_text(text, config);
    QCOMPARE(parsed(patched), config);
    QVERIFY2(patched.contains("\"config\": {\"layers\": [\n      {\"class_name\": \"Dense\", "
                              "\"config\": {\"units\": 10}}\n    ]}"),
             qPrintable(patched));
  }

  void a_value_of_another_type_is_written_anew() {
    const QString text = kUserText;
    QJsonObject config = parsed(text);
    config.insert("optimizer", "sgd");
    config.insert("seed", QJsonValue::Null);
    const QString patched = patch_json_text(text, config);
    QCOMPARE(parsed(patched), config);
    QVERIFY(patched.contains("  \"optimizer\": \"sgd\",\n"));
    QVERIFY(patched.contains("  \"seed\": null,\n"));
  }

  void empty_and_one_line_objects_get_members_the_readable_way() {
    QJsonObject config{{"a", 1}, {"b", QJsonObject{{"c", 2}}}};
    QCOMPARE(patch_json_text("{\"a\": 1, \"b\": {}}", config),
             QString("{\"a\": 1, \"b\": {\n  \"c\": 2\n}}"));
    config = {{"a", 1}, {"z", true}};
    QCOMPARE(patch_json_text("{\"a\": 1}", config), QString("{\"a\": 1, \"z\": true}"));
    QCOMPARE(patch_json_text("{\"a\": 1, \"z\": true}", QJsonObject{}), QString("{}"));
  }

  void text_that_is_not_a_json_object_is_replaced_by_the_config() {
    const QJsonObject config{{"epochs", 2}};
    for (const char* text : {"", "{\"epochs\": 1,", "[1, 2]", "{\"epochs\": 1} trailing"}) {
      const QString patched = patch_json_text(text, config);
      QCOMPARE(parsed(patched), config);
    }
  }

  void escaped_keys_and_strings_are_matched_by_their_value() {
    const QString text = "{\"na\\u006de\": \"a \\\"quoted\\\" name\", \"epochs\": 1}";
    QJsonObject config = parsed(text);
    QCOMPARE(config.value("name").toString(), QString("a \"quoted\" name"));
    config.insert("epochs", 2);
    QCOMPARE(patch_json_text(text, config),
             QString("{\"na\\u006de\": \"a \\\"quoted\\\" name\", \"epochs\": 2}"));
  }
};

QTEST_GUILESS_MAIN(JsonTextPatchTest)
#include "json_text_patch_test.moc"
