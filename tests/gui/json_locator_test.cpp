// Locating the engine's JSON paths in config text.
#include <QtTest>

#include "json_locator.hpp"

using namespace tandem::gui;

class JsonLocatorTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void finds_nested_keys_and_array_elements() {
    const QString text =
        "{\n"
        "  \"epochs\": 3,\n"
        "  \"model\": {\"config\": {\"layers\": [\n"
        "    {\"class_name\": \"Dense\", \"config\": {\"units\": 4}},\n"
        "    {\"class_name\": \"Dense\", \"config\": {\"units\": \"ten\"}}\n"
        "  ]}},\n"
        "  \"name\": \"a \\\"quoted\\\" name\"\n"
        "}\n";
    auto at = locate_json_path(text, "model.config.layers[1].config.units");
    QVERIFY(at);
    QCOMPARE(at->line, 5);
    QCOMPARE(text.mid(at->offset, 5), QString("\"ten\""));
    QCOMPARE(locate_json_path(text, "epochs")->line, 2);
    QCOMPARE(locate_json_path(text, "name")->line, 7);
    // A missing key points at the deepest part that exists.
    QCOMPARE(locate_json_path(text, "model.config.layers[0].config.activation")->line, 4);
    QCOMPARE(locate_json_path(text, "optimizer")->line, 1);
  }

  void text_that_is_not_json_gives_nothing_past_the_break() {
    QVERIFY(!locate_json_path("", "epochs"));
    auto at = locate_json_path("{\"a\": {\"b\": 1,, }}", "a.b");
    QVERIFY(at);
    QCOMPARE(at->column, 13);  // b's value (1-based column) is found before the syntax error
  }

  void positions_count_lines_and_columns_from_one() {
    const TextPosition p = position_of_offset("ab\ncd", 4);
    QCOMPARE(p.line, 2);
    QCOMPARE(p.column, 2);
  }
};

QTEST_GUILESS_MAIN(JsonLocatorTest)
#include "json_locator_test.moc"
