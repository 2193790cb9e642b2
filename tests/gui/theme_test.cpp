// The look: light and dark palettes applied to the whole application, meaningful colours that
// follow them, charts drawn in the palette's shades (rebuilt when it changes), and "system"
// going back to the platform's own palette.
#include <QChart>
#include <QtTest>

#include "live_run_panel.hpp"
#include "metric_chart.hpp"
#include "theme.hpp"

using namespace tandem::gui;

class ThemeTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void names_round_trip_and_garbage_means_system() {
    for (Theme t : {Theme::system, Theme::light, Theme::dark})
      QCOMPARE(theme_from_name(theme_name(t)), t);
    QCOMPARE(theme_from_name("purple"), Theme::system);
    QCOMPARE(theme_from_name(""), Theme::system);
  }

  void dark_and_light_palettes_and_their_colours() {
    const QPalette platform = QApplication::palette();
    QVERIFY(apply_theme(Theme::dark));
    QCOMPARE(current_theme(), Theme::dark);
    QVERIFY(palette_is_dark());
    QVERIFY(QApplication::palette().color(QPalette::Text).lightness() > 200);
    const SemanticColors dark = semantic_colors();
    // Error text reads on the dark window: much lighter than it.
    QVERIFY(dark.error.lightness() >
            QApplication::palette().color(QPalette::Window).lightness() + 80);
    QVERIFY(banner_style(true).contains(dark.error_background.name()));

    QVERIFY(!apply_theme(Theme::light));
    QVERIFY(!palette_is_dark());
    const SemanticColors light = semantic_colors();
    QVERIFY(light.error != dark.error);
    QVERIFY(light.error.lightness() <
            QApplication::palette().color(QPalette::Window).lightness() - 80);
    QVERIFY(banner_style(false).contains(light.ok_background.name()));

    apply_theme(Theme::system);
    QCOMPARE(QApplication::palette().color(QPalette::Window), platform.color(QPalette::Window));
    QCOMPARE(QApplication::palette().color(QPalette::Text), platform.color(QPalette::Text));
  }

  void charts_follow_the_palette_and_are_rebuilt_when_it_changes() {
    apply_theme(Theme::light);
    LiveRunPanel panel;
    RunHistory run;
    run.apply({"run_started", QJsonObject{{"event", "run_started"}, {"name", "x"}}});
    run.apply({"batch_ended", QJsonObject{{"event", "batch_ended"},
                                          {"epoch", 1},
                                          {"batch", 1},
                                          {"step", 1},
                                          {"size", 1},
                                          {"logs", QJsonObject{{"loss", 0.5}}}}});
    panel.set_run(&run, false);
    MetricChart* before = panel.chart("loss");
    QVERIFY(before);
    QCOMPARE(before->chart()->theme(), QChart::ChartThemeLight);
    apply_theme(Theme::dark);
    QTRY_VERIFY(panel.chart("loss") &&
                panel.chart("loss")->chart()->theme() == QChart::ChartThemeDark);
    QCOMPARE(panel.chart("loss")->chart()->backgroundBrush().color(),
             QApplication::palette().color(QPalette::Base));
    apply_theme(Theme::system);
  }
};

QTEST_MAIN(ThemeTest)
#include "theme_test.moc"
