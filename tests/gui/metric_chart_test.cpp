// Charts draw a decimated copy of the full history and redraw only when the run changed.
#include <QElapsedTimer>
#include <QLineSeries>
#include <QtTest>

#include "metric_chart.hpp"

using namespace tandem::gui;

namespace {

Event batch_event(int step, double loss) {
  QJsonObject o{{"schema", 1},
                {"event", "batch_ended"},
                {"time", "t"},
                {"epoch", 1},
                {"batch", step},
                {"step", step},
                {"size", 1},
                {"lr", 0.01},
                {"logs", QJsonObject{{"loss", loss}}}};
  return {"batch_ended", o};
}

}  // namespace

class MetricChartTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void hundred_thousand_points_are_drawn_decimated() {
    RunHistory run;
    QList<Event> events;
    // Running means of 1, 2, 3, ... : the per-batch values are 1, 3, 5, ...
    for (int step = 1; step <= 100000; ++step) events.push_back(batch_event(step, step));
    run.apply_all(events);
    MetricChart chart("loss", "step");
    chart.resize(900, 400);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.set_lines({{&run, "train", Qt::blue, false, true,
                      [](const RunHistory& r) { return r.batch_series("loss"); }}});
    QCOMPARE(chart.history_points(0), 100000);
    QVERIFY(chart.drawn_points(0) <= chart.max_drawn_points());
    QVERIFY(chart.drawn_points(0) > 100);
    // The last drawn point is the last batch's own value (2·100000 − 1), smoothing off.
    chart.set_smoothing(0);
    QCOMPARE(chart.series(0)->points().back(), QPointF(100000, 199999));

    // Appending one more batch and refreshing redraws; refreshing again without a change does not.
    QElapsedTimer timer;
    timer.start();
    run.apply(batch_event(100001, 100001));
    chart.refresh();
    const qint64 ms = timer.elapsed();
    qInfo("refresh of a 100,001-point history: %lld ms", static_cast<long long>(ms));
    QCOMPARE(chart.history_points(0), 100001);
    QSignalSpy replaced(chart.series(0), &QXYSeries::pointsReplaced);
    chart.refresh();
    QCOMPARE(replaced.count(), 0);
    run.apply(batch_event(100002, 100002));
    chart.refresh();
    QCOMPARE(replaced.count(), 1);
  }

  void a_destroyed_run_leaves_an_empty_line() {
    auto* run = new RunHistory;
    run->apply(batch_event(1, 1));
    MetricChart chart("loss", "step");
    chart.set_lines({{run, "train", Qt::blue, false, false,
                      [](const RunHistory& r) { return r.batch_series("loss"); }}});
    QCOMPARE(chart.drawn_points(0), 1);
    delete run;
    chart.refresh();
    QCOMPARE(chart.drawn_points(0), 0);
  }
};

QTEST_MAIN(MetricChartTest)
#include "metric_chart_test.moc"
