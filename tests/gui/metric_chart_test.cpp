// Charts draw a decimated copy of the full history and redraw only when the run changed; the
// read-out, zoom, log scale, ticks and exports a user works with.
#include <QElapsedTimer>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QProcess>
#include <QScatterSeries>
#include <QTemporaryDir>
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

// Steps 1..n whose per-batch losses are 1, 3, 5, ... (running means 1, 2, 3, ...).
void fill(RunHistory& run, int n) {
  QList<Event> events;
  for (int step = 1; step <= n; ++step) events.push_back(batch_event(step, step));
  run.apply_all(events);
}

ChartLine loss_line(RunHistory* run, bool smoothed) {
  return {run,   "train",  Qt::blue,
          false, smoothed, [](const RunHistory& r) { return r.batch_series("loss"); }};
}

// A line of fixed points. It needs a run (any) to be drawn: a line without one is empty.
ChartLine fixed_line(RunHistory* run, const QString& label, QList<QPointF> points) {
  return {run,   label, QColor("#ff7f0e"),
          false, false, [points](const RunHistory&) { return points; }};
}

// Shows `chart` at `size` and waits until it is on screen.
bool show_at(MetricChart& chart, QSize size) {
  chart.resize(size);
  chart.show();
  return QTest::qWaitForWindowExposed(&chart);
}

// Runs /usr/bin/python3 (another reader than Qt) on `code` with `args`; its stdout.
QString python(const QString& code, const QStringList& args) {
  QProcess p;
  p.start("/usr/bin/python3", QStringList{"-c", code} + args);
  if (!p.waitForFinished(60000) || p.exitCode() != 0)
    qWarning("python failed: %s", p.readAllStandardError().constData());
  return QString::fromUtf8(p.readAllStandardOutput()).trimmed();
}

void send_mouse(QWidget* to, QEvent::Type type, QPoint at, Qt::MouseButton button,
                Qt::MouseButtons buttons, Qt::KeyboardModifiers modifiers = {}) {
  QMouseEvent event(type, QPointF(at), to->mapToGlobal(QPointF(at)), button, buttons, modifiers);
  QApplication::sendEvent(to, &event);
}

QRect plot_rect(MetricChart& chart) {
  return chart.mapFromScene(chart.chart()->plotArea()).boundingRect();
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
    QVERIFY(show_at(chart, QSize(900, 400)));
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

    // The redraw a user waits for: new data, decimation and painting the chart (median of 9).
    QList<qint64> redraws;
    for (int i = 0; i < 9; ++i) {
      run.apply(batch_event(100003 + i, 100003 + i));
      timer.restart();
      chart.refresh();
      chart.viewport()->repaint();
      redraws.push_back(timer.nsecsElapsed() / 1000);
    }
    std::sort(redraws.begin(), redraws.end());
    qInfo("redraw of a 100,000-point line (refresh + paint), median of 9: %.1f ms",
          redraws[4] / 1000.0);
    // Zoomed in to 100 steps of the 100,000, every point there is drawn as it is.
    chart.zoom_to(50001, 50100);
    QCOMPARE(chart.drawn_points(0), 102);
    QCOMPARE(chart.series(0)->at(1), QPointF(50001, 100001));
  }

  // The run's checkpoints and callback decisions sit along the top of the plot at their step
  // (or epoch), one point per place, and hovering tells what happened there.
  void markers_sit_at_their_steps_along_the_top() {
    RunHistory run;
    QList<Event> events;
    for (int step = 1; step <= 20; ++step) events.push_back(batch_event(step, step));
    run.apply_all(events);
    run.apply({"checkpoint_saved",
               QJsonObject{{"event", "checkpoint_saved"}, {"path", "/r/a.h5"}, {"epoch", 1}}});
    run.apply(
        {"reduce_lr_on_plateau",
         QJsonObject{
             {"event", "reduce_lr_on_plateau"}, {"epoch", 1}, {"old_lr", 0.1}, {"new_lr", 0.05}}});
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
    few.set_lines({{&run, "train", Qt::blue, false, false, [](const RunHistory&) {
                      return QList<QPointF>{{1, 0.5}};
                    }}});
    QVERIFY(few.series(0)->pointsVisible());
  }

  // The read-out lists each line's point nearest the cursor: smoothed value and raw value, and
  // where a line's nearest point is elsewhere, its x.
  void hover_reads_out_every_line_at_the_cursor() {
    RunHistory run;
    fill(run, 10);
    MetricChart chart("loss", "step");
    QVERIFY(show_at(chart, QSize(800, 400)));
    chart.set_lines(
        {loss_line(&run, true), fixed_line(&run, "validation", {{5, 0.5}, {10, 0.25}})});
    chart.set_smoothing(0.5);
    // Debiased EMA (w = 0.5) of 1, 3, 5, 7: 1, 2.3333, 3.8571, 5.5333 (worked by hand).
    QCOMPARE(chart.readout_at(4.2),
             QStringList({"step 4", "train 5.5333 (raw 7)", "validation 0.5 at 5"}));
    QVERIFY(!chart.readout_visible());
    chart.show_readout_at(4.2);
    QVERIFY(chart.readout_visible());
    // Moving the mouse over the plot shows it; leaving the chart hides it.
    chart.hide_readout();
    send_mouse(chart.viewport(), QEvent::MouseMove, plot_rect(chart).center(), Qt::NoButton,
               Qt::NoButton);
    QVERIFY(chart.readout_visible());
    QEvent leave(QEvent::Leave);
    QApplication::sendEvent(&chart, &leave);
    QVERIFY(!chart.readout_visible());
  }

  void zoom_by_rectangle_wheel_and_pan_and_back_by_double_click() {
    RunHistory run;
    fill(run, 1000);
    MetricChart chart("loss", "step");
    QVERIFY(show_at(chart, QSize(800, 400)));
    chart.set_lines({loss_line(&run, false)});
    QCOMPARE(chart.x_range().low, 1.0);
    QCOMPARE(chart.x_range().high, 1000.0);

    // x fixed to [100, 200]: y fits the values there (199..399, padded by 5% of 200).
    chart.zoom_to(100, 200);
    QVERIFY(chart.zoomed());
    QCOMPARE(chart.y_range().low, 189.0);
    QCOMPARE(chart.y_range().high, 409.0);
    // Every point in view is drawn as it is (no decimation), plus one beyond each edge.
    QCOMPARE(chart.drawn_points(0), 103);
    QCOMPARE(chart.series(0)->at(0), QPointF(99, 197));
    QCOMPARE(chart.series(0)->at(102), QPointF(201, 401));
    chart.zoom_x(0.5, 150);
    QCOMPARE(chart.x_range().low, 125.0);
    QCOMPARE(chart.x_range().high, 175.0);
    chart.reset_zoom();
    QVERIFY(!chart.zoomed());
    QCOMPARE(chart.x_range().high, 1000.0);

    // A flat drag across the middle half of the plot zooms x to about that half.
    const QRect plot = plot_rect(chart);
    const int y = plot.center().y();
    const QPoint from(plot.left() + plot.width() / 4, y), to(plot.left() + 3 * plot.width() / 4, y);
    send_mouse(chart.viewport(), QEvent::MouseButtonPress, from, Qt::LeftButton, Qt::LeftButton);
    send_mouse(chart.viewport(), QEvent::MouseMove, to, Qt::NoButton, Qt::LeftButton);
    send_mouse(chart.viewport(), QEvent::MouseButtonRelease, to, Qt::LeftButton, Qt::NoButton);
    QVERIFY(chart.zoomed());
    const double quarter = 999.0 / 4;
    QVERIFY2(std::abs(chart.x_range().low - (1 + quarter)) < 5,
             qPrintable(QString::number(chart.x_range().low)));
    QVERIFY(std::abs(chart.x_range().high - (1 + 3 * quarter)) < 5);
    // Double-click: everything again.
    send_mouse(chart.viewport(), QEvent::MouseButtonDblClick, plot.center(), Qt::LeftButton,
               Qt::LeftButton);
    QVERIFY(!chart.zoomed());

    // Ctrl+wheel one notch: x 20% closer about the cursor; a plain wheel is the page's.
    auto wheel = [&](Qt::KeyboardModifiers modifiers) {
      QWheelEvent event(QPointF(plot.center()),
                        chart.viewport()->mapToGlobal(QPointF(plot.center())), QPoint(),
                        QPoint(0, 120), Qt::NoButton, modifiers, Qt::NoScrollPhase, false);
      QApplication::sendEvent(chart.viewport(), &event);
      return event.isAccepted();
    };
    QVERIFY(!wheel(Qt::NoModifier));
    QVERIFY(!chart.zoomed());
    QVERIFY(wheel(Qt::ControlModifier));
    QVERIFY(std::abs((chart.x_range().high - chart.x_range().low) - 0.8 * 999) < 1e-6);

    // Shift+drag pans: 100 px to the right moves the view left by 100 px worth of x.
    chart.zoom_to(400, 600);
    const double per_pixel = 200.0 / plot.width();
    send_mouse(chart.viewport(), QEvent::MouseButtonPress, plot.center(), Qt::LeftButton,
               Qt::LeftButton, Qt::ShiftModifier);
    send_mouse(chart.viewport(), QEvent::MouseMove, plot.center() + QPoint(100, 0), Qt::NoButton,
               Qt::LeftButton, Qt::ShiftModifier);
    send_mouse(chart.viewport(), QEvent::MouseButtonRelease, plot.center() + QPoint(100, 0),
               Qt::LeftButton, Qt::NoButton, Qt::ShiftModifier);
    QVERIFY(std::abs(chart.x_range().low - (400 - 100 * per_pixel)) < 1e-6);
  }

  void log_scale_leaves_out_values_that_are_not_positive() {
    MetricChart chart("loss", "step");
    RunHistory run;
    chart.set_lines({fixed_line(&run, "train", {{1, 0}, {2, 0.1}, {3, 10}, {4, -1}, {5, 1000}})});
    QCOMPARE(chart.drawn_points(0), 5);
    chart.set_y_scale(MetricChart::YScale::log);
    QCOMPARE(chart.drawn_points(0), 3);
    bool log_axis = false;
    for (QAbstractAxis* axis : chart.series(0)->attachedAxes())
      log_axis |= qobject_cast<QLogValueAxis*>(axis) != nullptr;
    QVERIFY(log_axis);
    QVERIFY(chart.y_range().low < 0.1 && chart.y_range().low > 0);
    QVERIFY(chart.y_range().high > 1000);
    QCOMPARE(chart.readout_at(1).value(1), QString("train 0 (not on a log scale)"));
    chart.set_y_scale(MetricChart::YScale::linear);
    QCOMPARE(chart.drawn_points(0), 5);
    QCOMPARE(chart.y_range().low, -1 - 0.05 * 1001);
  }

  void ticks_are_round_whole_for_epochs_and_a_constant_is_not_magnified() {
    RunHistory run;
    fill(run, 100000);
    MetricChart steps("loss", "step");
    steps.set_lines({loss_line(&run, false)});
    QCOMPARE(steps.x_ticks().interval, 20000.0);
    QCOMPARE(steps.x_ticks().label_format(), QString("%.0f"));

    MetricChart epochs("loss", "epoch", nullptr, true);
    epochs.set_lines({fixed_line(&run, "train", {{1, 0.9}, {2, 0.5}, {3, 0.4}})});
    QCOMPARE(epochs.x_ticks().interval, 1.0);

    MetricChart lr("learning rate", "step");
    lr.set_lines({fixed_line(&run, "lr", {{1, 0.001}, {2, 0.001}, {3, 0.001}})});
    QCOMPARE(lr.y_range().low, 0.0);
    QCOMPARE(lr.y_range().high, 0.002);
    QCOMPARE(lr.y_ticks().interval, 0.0005);
  }

  // PNG and SVG as they look, the data as CSV; read back by OpenCV, Python's XML parser and
  // Python's csv module.
  void exports_that_other_readers_read() {
    RunHistory run;
    fill(run, 5);
    MetricChart chart("loss", "step");
    QVERIFY(show_at(chart, QSize(640, 360)));
    chart.set_lines({loss_line(&run, true), fixed_line(&run, "val, \"held out\"", {{5, 0.5}})});
    chart.set_smoothing(0.6);
    QTemporaryDir dir;
    const QString png = dir.filePath("loss.png"), svg = dir.filePath("loss.svg"),
                  csv = dir.filePath("loss.csv");
    chart.show_readout_at(3);
    QCOMPARE(chart.save_png(png), QString());
    QVERIFY(chart.readout_visible());  // put back after the export
    QCOMPARE(python("import cv2, sys; print(cv2.imread(sys.argv[1]).shape)", {png}),
             QString("(720, 1280, 3)"));
    QCOMPARE(chart.save_svg(svg), QString());
    QCOMPARE(python("import sys, xml.etree.ElementTree as ET\n"
                    "root = ET.parse(sys.argv[1]).getroot()\n"
                    "ns = '{http://www.w3.org/2000/svg}'\n"
                    "print(root.tag == ns + 'svg', root.find(ns + 'title').text,\n"
                    "      len(list(root.iter(ns + 'path'))) > 0)",
                    {svg}),
             QString("True loss True"));
    QCOMPARE(chart.save_csv(csv), QString());
    // Raw values (not the smoothed ones), an empty cell where a line has no point.
    QCOMPARE(python("import csv, sys; print(list(csv.reader(open(sys.argv[1]))))", {csv}),
             QString("[['step', 'train', 'val, \"held out\"'], ['1', '1', ''], ['2', '3', ''], "
                     "['3', '5', ''], ['4', '7', ''], ['5', '9', '0.5']]"));
    // A place that cannot be written: an error naming it, nothing left behind.
    const QString missing = dir.filePath("no-such-folder/loss.png");
    QVERIFY(chart.save_png(missing).contains(missing));
    QVERIFY(chart.save_svg(dir.filePath("no-such-folder/loss.svg")).contains("no-such-folder"));
    QVERIFY(chart.save_csv(dir.filePath("no-such-folder/loss.csv")).contains("no-such-folder"));
    QVERIFY(!QFileInfo::exists(dir.filePath("no-such-folder")));
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
