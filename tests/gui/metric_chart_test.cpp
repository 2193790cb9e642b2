// Charts draw a decimated copy of the full history and redraw only when the run changed.
#include <QElapsedTimer>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
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
    QVERIFY(!chart.series(0)->pointsVisible());  // a line, not 1,800 dots
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

  // The run's checkpoints and callback decisions sit along the top of the plot at their step
  // (or epoch), one point per place, and hovering tells what happened there.
  void markers_sit_at_their_steps_along_the_top() {
    RunHistory run;
    QList<Event> events;
    for (int step = 1; step <= 20; ++step) events.push_back(batch_event(step, step));
    run.apply_all(events);
    run.apply({"checkpoint_saved", QJsonObject{{"event", "checkpoint_saved"},
                                               {"path", "/r/a.h5"}, {"epoch", 1}}});
    run.apply({"reduce_lr_on_plateau",
               QJsonObject{{"event", "reduce_lr_on_plateau"}, {"epoch", 1}, {"old_lr", 0.1},
                           {"new_lr", 0.05}}});
    MetricChart chart("loss", "step");
    chart.set_lines({{&run, "train", Qt::blue, false, false,
                      [](const RunHistory& r) { return r.batch_series("loss"); }}});
    chart.set_markers(&run, false);
    QCOMPARE(chart.marker_series()->count(), 1);  // both at step 20
    QCOMPARE(chart.marker_series()->at(0).x(), 20.0);
    const QString text = chart.marker_text_at(20);
    QVERIFY2(text.startsWith("step 20\ncheckpoint a.h5"), qPrintable(text));
    QVERIFY2(text.contains("learning rate 0.1 → 0.05"), qPrintable(text));
    QVERIFY(chart.marker_text_at(19).isEmpty());
    // A marker keeps to the top edge of whatever range the data gives.
    run.apply_all({batch_event(21, 1000)});
    chart.refresh();
    QValueAxis* y_axis = nullptr;
    for (QAbstractAxis* axis : chart.marker_series()->attachedAxes())
      if (axis->orientation() == Qt::Vertical) y_axis = qobject_cast<QValueAxis*>(axis);
    QVERIFY(y_axis);
    QVERIFY(y_axis->max() > 1000);
    const double y = chart.marker_series()->at(0).y();
    QVERIFY(y < y_axis->max());
    QVERIFY(y > y_axis->min() + 0.9 * (y_axis->max() - y_axis->min()));
    // Few points are drawn as points too (a lone point would draw no line); many are not
    // (hundred_thousand_points_are_drawn_decimated).
    QVERIFY(chart.series(0)->pointsVisible());
    MetricChart few("loss", "epoch");
    few.set_lines({{&run, "train", Qt::blue, false, false,
                    [](const RunHistory&) { return QList<QPointF>{{1, 0.5}}; }}});
    QVERIFY(few.series(0)->pointsVisible());
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
