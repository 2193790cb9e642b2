// The line of a failed engine's stderr the dashboard shows: its error, not CLI11's trailing hint
// (a deleted run folder's Resume said only "Run with --help for more information.").
#include <QtTest>

#include "engine_run.hpp"

using namespace tandem::gui;

class EngineErrorLineTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void the_error_is_shown_not_the_usage_hint() {
    QCOMPARE(engine_error_line({"[info] reading", "tandem: error: config error at 'epochs': bad",
                                "[info] after"}),
             QString("tandem: error: config error at 'epochs': bad"));
    // CLI11's usage errors: what is wrong, then the hint.
    QCOMPARE(engine_error_line({"--resume: Path does not exist: /gone/run",
                                "Run with --help for more information."}),
             QString("--resume: Path does not exist: /gone/run"));
    QCOMPARE(engine_error_line({"Run with --help for more information."}), QString());
    QCOMPARE(engine_error_line({}), QString());
  }
};

QTEST_MAIN(EngineErrorLineTest)
#include "engine_error_line_test.moc"
