// Smoothing (TensorBoard's debiased EMA) and decimation against hand-computed values.
#include <QtTest>
#include <cmath>

#include "series_math.hpp"

using namespace tandem::gui;

class SeriesMathTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void smoothing_is_the_debiased_ema() {
    const QList<QPointF> in = {{0, 1}, {1, 3}, {2, 2}};
    const QList<QPointF> out = smooth(in, 0.5);
    // last = 0.5, 0.5·0.5 + 0.5·3 = 1.75, 0.875 + 1 = 1.875; debias by 1 − 0.5^n.
    QCOMPARE(out[0].y(), 1.0);
    QCOMPARE(out[1].y(), 1.75 / 0.75);
    QCOMPARE(out[2].y(), 1.875 / 0.875);
    QCOMPARE(out[2].x(), 2.0);
    QCOMPARE(smooth(in, 0), in);
  }

  void non_finite_values_pass_through_the_smoothing() {
    const QList<QPointF> out = smooth({{0, 2}, {1, NAN}, {2, 2}}, 0.9);
    QCOMPARE(out[0].y(), 2.0);
    QVERIFY(std::isnan(out[1].y()));
    QCOMPARE(out[2].y(), 2.0);  // a constant stays constant once debiased
  }

  void small_series_are_not_decimated() {
    const QList<QPointF> in = {{0, 1}, {1, 2}, {2, 3}};
    QCOMPARE(decimate(in, 10), in);
  }

  void decimation_keeps_extremes_ends_and_order() {
    QList<QPointF> in;
    for (int i = 0; i < 100000; ++i) in.push_back({double(i), std::sin(i * 0.001)});
    in[54321].setY(7);  // a spike must survive
    in[12345].setY(-7);
    const QList<QPointF> out = decimate(in, 1000);
    QVERIFY(out.size() <= 1000);
    QVERIFY(out.size() >= 900);
    QCOMPARE(out.front(), in.front());
    QCOMPARE(out.back(), in.back());
    QVERIFY(out.contains(in[54321]));
    QVERIFY(out.contains(in[12345]));
    for (qsizetype i = 1; i < out.size(); ++i) QVERIFY(out[i].x() > out[i - 1].x());
  }
};

QTEST_GUILESS_MAIN(SeriesMathTest)
#include "series_math_test.moc"
