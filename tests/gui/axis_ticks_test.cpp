// Axis ticks and ranges people can read, against hand-worked values: round steps, whole
// epochs, labels without exponents, and a constant series shown as itself, not as noise.
#include <QtTest>

#include "axis_ticks.hpp"

using namespace tandem::gui;

class AxisTicksTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void steps_are_one_two_or_five_times_a_power_of_ten() {
    AxisTicks t = round_ticks(0, 100000, 5);
    QCOMPARE(t.interval, 20000.0);
    QCOMPARE(t.label_format(), QString("%.0f"));  // "60000", never "6e+04"
    QCOMPARE(QString::asprintf(qPrintable(t.label_format()), 60000.0), QString("60000"));
    t = round_ticks(0.3, 0.8, 5);
    QCOMPARE(t.interval, 0.1);
    QCOMPARE(t.decimals, 1);
    t = round_ticks(0, 1.2, 5);  // 0.24 rounds up to 0.5
    QCOMPARE(t.interval, 0.5);
    t = round_ticks(0.00095, 0.00105, 5);
    QCOMPARE(t.interval, 2e-5);
    QCOMPARE(t.decimals, 5);
    QCOMPARE(QString::asprintf(qPrintable(t.label_format()), 0.00098), QString("0.00098"));
    t = round_ticks(0, 2.5, 10);  // 0.25 → 0.5 (1, 2, 5 only)
    QCOMPARE(t.interval, 0.5);
    // A diverged loss: its labels were 31 digits wide ("9999999999999999873517636949...").
    t = round_ticks(0, 1e30, 5);
    QCOMPARE(QString::asprintf(qPrintable(t.label_format()), 6e29), QString("6e+29"));
  }

  void epoch_axes_tick_whole_numbers() {
    AxisTicks t = round_ticks(1, 3, 6, true);  // 0.33 would give 0.5; epochs are whole
    QCOMPARE(t.interval, 1.0);
    QCOMPARE(t.label_format(), QString("%.0f"));
    t = round_ticks(1, 200, 6, true);
    QCOMPARE(t.interval, 50.0);
  }

  void ranges_pad_the_data_and_keep_a_floor_at_zero() {
    ValueRange r = padded_range(1, 2);
    QCOMPARE(r.low, 0.95);
    QCOMPARE(r.high, 2.05);
    r = padded_range(0.01, 1);  // never negative: no axis below 0
    QCOMPARE(r.low, 0.0);
    r = padded_range(-1, 1);
    QCOMPARE(r.low, -1.1);
    QCOMPARE(r.high, 1.1);
  }

  void a_constant_series_is_shown_from_zero_not_magnified() {
    ValueRange r = padded_range(0.001, 0.001);  // a constant learning rate
    QCOMPARE(r.low, 0.0);
    QCOMPARE(r.high, 0.002);
    r = padded_range(-3, -3);
    QCOMPARE(r.low, -6.0);
    QCOMPARE(r.high, 0.0);
    r = padded_range(0, 0);
    QCOMPARE(r.low, -1.0);
    QCOMPARE(r.high, 1.0);
    // Rounding noise on a constant is still a constant.
    r = padded_range(0.1, 0.1 + 1e-12);
    QCOMPARE(r.low, 0.0);
  }
};

QTEST_MAIN(AxisTicksTest)
#include "axis_ticks_test.moc"
