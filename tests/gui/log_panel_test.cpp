// The Log panel: lines kept in order up to a bound, errors marked, a failure banner.
#include <QPlainTextEdit>
#include <QtTest>

#include "log_panel.hpp"

using namespace tandem::gui;

class LogPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lines_errors_and_the_banner() {
    LogPanel panel;
    panel.append_line("Epoch 1/3");
    panel.append_line("tandem: error: config error at 'epochs': expected a positive integer");
    panel.append_line("<b>not html</b>");
    QCOMPARE(panel.text(),
             QString("Epoch 1/3\ntandem: error: config error at 'epochs': expected a positive "
                     "integer\n<b>not html</b>"));
    auto* edit = panel.findChild<QPlainTextEdit*>();
    QVERIFY(edit);
    QVERIFY(edit->document()->toHtml().contains("#b3261e"));  // the error line is red
    QCOMPARE(panel.failure(), QString());
    panel.show_failure("The run failed: the loss became NaN");
    QCOMPARE(panel.failure(), QString("The run failed: the loss became NaN"));
    panel.clear();
    QCOMPARE(panel.text(), QString());
    QCOMPARE(panel.failure(), QString());
  }

  void the_log_keeps_the_newest_lines() {
    LogPanel panel;
    for (int i = 0; i < LogPanel::kMaxLines + 50; ++i) panel.append_line(QString::number(i));
    const QStringList lines = panel.text().split('\n');
    QCOMPARE(lines.size(), LogPanel::kMaxLines);
    QCOMPARE(lines.back(), QString::number(LogPanel::kMaxLines + 49));
  }
};

QTEST_MAIN(LogPanelTest)
#include "log_panel_test.moc"
