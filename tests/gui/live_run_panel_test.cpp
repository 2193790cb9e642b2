// The Run panel on a recorded run: a chart per metric plus lr, samples/s and replica times, the
// x axis and smoothing controls, comparing runs, and Stop only for a live, running engine.
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPushButton>
#include <QTableWidget>
#include <QtTest>

#include "live_run_panel.hpp"

using namespace tandem::gui;

class LiveRunPanelTest : public QObject {
  Q_OBJECT
 private:
  static RunHistory* recorded(QObject* parent) {
    auto* run = new RunHistory(parent);
    const EventFile file = read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/tiny-events.jsonl");
    run->apply_all(file.events);
    return run;
  }

 private Q_SLOTS:
  void header_names_a_pipeline() {
    LiveRunPanel panel;
    auto* run = new RunHistory(&panel);
    const EventFile file =
        read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/pipeline-events.jsonl");
    run->apply_all(file.events);
    panel.set_run(run, false);
    QVERIFY2(panel.status_line().contains("cpu:2 in 2 stages × 4 micro-batches (1f1b)"),
             qPrintable(panel.status_line()));
  }

  // A loss-scaled run: the header gives the scale and the skipped steps, a chart (log axis)
  // follows the scale.
  void loss_scale_in_the_header_and_its_chart() {
    LiveRunPanel panel;
    auto* run = new RunHistory(&panel);
    run->apply_all(
        read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/loss-scale-events.jsonl").events);
    panel.set_run(run, false);
    QVERIFY2(panel.status_line().contains("loss scale 3.323e+35 (12 skipped)"),
             qPrintable(panel.status_line()));
    MetricChart* chart = panel.chart("loss scale");
    QVERIFY(chart != nullptr);
    QCOMPARE(chart->history_points(0), 24);
  }

  void charts_controls_and_comparison() {
    LiveRunPanel panel;
    panel.resize(1200, 900);
    panel.show();  // legends and their markers are visible only on screen
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    RunHistory* run = recorded(&panel);
    panel.set_run(run, false);
    QStringList titles;
    for (MetricChart* c : panel.charts()) titles << c->title();
    QCOMPARE(titles, QStringList({"loss", "accuracy", "learning rate", "samples/s",
                                  "replica step time (ms)"}));
    QVERIFY(panel.status_line().contains("epoch 3/3"));
    QVERIFY(panel.status_line().contains("finished"));
    QVERIFY(panel.status_line().contains("cpu:2"));
    QVERIFY(!panel.status_line().contains("stages"));  // data parallel only
    QVERIFY(!panel.stop_button()->isEnabled());  // not a live engine

    // Per batch: 48 points; per epoch: 3 (the charts are rebuilt for the axis).
    QCOMPARE(panel.chart("loss")->history_points(0), 48);
    panel.set_x_axis(LiveRunPanel::XAxis::epoch);
    QCOMPARE(panel.chart("loss")->history_points(0), 3);
    QCOMPARE(panel.chart("loss")->x_title(), QString("epoch"));
    QCOMPARE(panel.chart("loss")->x_ticks().interval, 1.0);  // whole epochs
    // Wall time: the same points against seconds since the start (the recorded run took < 1 s).
    panel.set_x_axis(LiveRunPanel::XAxis::wall_time);
    QCOMPARE(panel.chart("loss")->x_title(), QString("wall time (s)"));
    QCOMPARE(panel.chart("loss")->history_points(0), 48);
    const QList<QPointF> timed = panel.chart("loss")->series(0)->points();
    QVERIFY(timed.front().x() >= 0 && timed.back().x() < 5 && timed.back().x() > timed.front().x());
    QCOMPARE(panel.chart("loss")->x_range().high, run->elapsed_seconds());
    panel.set_x_axis(LiveRunPanel::XAxis::step);

    // Log y on every chart, and on the charts rebuilt afterwards.
    panel.set_log_y(true);
    for (MetricChart* c : panel.charts()) QCOMPARE(c->y_scale(), MetricChart::YScale::log);
    panel.set_x_axis(LiveRunPanel::XAxis::epoch);
    for (MetricChart* c : panel.charts()) QCOMPARE(c->y_scale(), MetricChart::YScale::log);
    panel.set_log_y(false);
    panel.set_x_axis(LiveRunPanel::XAxis::step);
    QCOMPARE(panel.chart("loss")->y_scale(), MetricChart::YScale::linear);

    // Smoothing changes what is drawn, not the history.
    panel.set_smoothing(0);
    const QList<QPointF> raw = panel.chart("loss")->series(0)->points();
    panel.set_smoothing(0.9);
    QCOMPARE(panel.smoothing(), 0.9);
    const QList<QPointF> smooth = panel.chart("loss")->series(0)->points();
    QCOMPARE(raw.size(), smooth.size());
    QVERIFY(raw != smooth);
    panel.set_smoothing(5);  // clamped
    QCOMPARE(panel.smoothing(), 0.999);

    // Three runs compared: a colour per run (validation dashed, same colour), unique labels,
    // and the table; set_run() ends the comparison.
    RunHistory* second = recorded(&panel);
    RunHistory* third = recorded(&panel);
    panel.set_compared({second, third});
    QVERIFY(panel.comparing());
    MetricChart* loss = panel.chart("loss");
    QCOMPARE(loss->line_count(), 6);
    const QStringList full = panel.run_labels();
    QCOMPARE(QSet<QString>(full.begin(), full.end()).size(), 3);
    const QStringList labels = panel.legend_labels();
    QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), 3);
    QCOMPARE(loss->series(2)->name(), labels[1]);
    QCOMPARE(loss->series(3)->name(), labels[1] + " val");
    QCOMPARE(loss->series(2)->pen().color(), LiveRunPanel::run_color(1));
    QCOMPARE(loss->series(3)->pen().color(), LiveRunPanel::run_color(1));
    QCOMPARE(loss->series(3)->pen().style(), Qt::DashLine);
    // The legend names each run once, by its train line (once the new charts are on screen).
    QTest::qWait(50);
    QStringList legend;
    for (QLegendMarker* marker : loss->chart()->legend()->markers())
      if (marker->isVisible()) legend << marker->label();
    QCOMPARE(legend, labels);
    QCOMPARE(panel.chart("learning rate")->line_count(), 3);
    QCOMPARE(panel.comparison_table()->table()->rowCount(), 3);
    panel.set_run(run, false);
    QVERIFY(!panel.comparing());
    QCOMPARE(panel.chart("loss")->line_count(), 2);
    QVERIFY(panel.chart("loss")->chart()->legend()->isVisible());
  }

  void stop_is_offered_while_a_live_run_runs() {
    LiveRunPanel panel;
    RunHistory run;
    QJsonObject started{{"schema", 1}, {"event", "run_started"}, {"time", "t"}, {"name", "x"}};
    run.apply({"run_started", started});
    panel.set_run(&run, true);
    QVERIFY(panel.stop_button()->isEnabled());
    QSignalSpy stop(&panel, &LiveRunPanel::stop_requested);
    panel.stop_button()->click();
    QCOMPARE(stop.count(), 1);
    run.mark_ended_abnormally("killed");
    panel.refresh();
    QVERIFY(!panel.stop_button()->isEnabled());
    QVERIFY(panel.status_line().contains("failed: killed"));
  }
};

QTEST_MAIN(LiveRunPanelTest)
#include "live_run_panel_test.moc"
