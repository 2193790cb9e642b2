// Axis ranges and ticks people can read: round steps (1, 2 or 5 × 10^k), whole numbers where
// the quantity counts something (epochs), labels without exponents below a billion, and a
// sensible range for a series that never changes.
#pragma once

#include <QString>

namespace tandem::gui {

/// A value axis' range and its ticks: one every `interval`, anchored at 0.
struct AxisTicks {
  double low = 0, high = 1;
  double interval = 0.2;
  int decimals = 1;  // digits after the point that tell the ticks apart
  /// printf format for the labels ("%.3f"): as many decimals as needed, an exponent only beyond
  /// a billion ("%.3g": a diverged loss).
  QString label_format() const;
};

/// Ticks for showing exactly [low, high] (low < high) with about `target` intervals; with
/// `integers`, the interval is a whole number of at least 1.
AxisTicks round_ticks(double low, double high, int target = 5, bool integers = false);

/// The range that shows data spanning [min, max]: 5% of the span above and below; a quantity
/// that is never negative keeps 0 as its floor; a constant value c (no span) shows [0, 2c]
/// (or [2c, 0]; [−1, 1] for 0) instead of magnifying rounding noise.
struct ValueRange {
  double low, high;
};
ValueRange padded_range(double min, double max);

}  // namespace tandem::gui
