#include "axis_ticks.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::gui {

namespace {

constexpr int kMaxDecimals = 12;

}  // namespace

QString AxisTicks::label_format() const {
  // A diverged loss of 1e30 printed all its 31 digits: beyond a billion, significant digits.
  if (std::max(std::abs(low), std::abs(high)) >= 1e9) return "%.3g";
  return QString("%.%1f").arg(decimals);
}

AxisTicks round_ticks(double low, double high, int target, bool integers) {
  AxisTicks t;
  t.low = low;
  t.high = high > low ? high : low + 1;
  const double rough = (t.high - t.low) / std::max(target, 1);
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  t.interval = 10 * power;
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= rough * (1 - 1e-9)) {
      t.interval = m * power;
      break;
    }
  if (integers) t.interval = std::max(1.0, std::round(t.interval));
  // Enough decimals that neighbouring ticks differ: 0.25 steps need 2, 0.2 steps need 1.
  t.decimals = 0;
  while (t.decimals < kMaxDecimals) {
    const double scale = std::pow(10.0, t.decimals);
    const double scaled = t.interval * scale;
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) break;
    ++t.decimals;
  }
  return t;
}

ValueRange padded_range(double min, double max) {
  const double span = max - min;
  const double magnitude = std::max(std::abs(min), std::abs(max));
  if (!(span > 1e-9 * magnitude)) {  // constant (or equal to rounding)
    const double c = (min + max) / 2;
    if (c == 0) return {-1, 1};
    return c > 0 ? ValueRange{0, 2 * c} : ValueRange{2 * c, 0};
  }
  const double pad = span * 0.05;
  const double low = min >= 0 ? std::max(0.0, min - pad) : min - pad;
  return {low, max + pad};
}

}  // namespace tandem::gui
