// Private (backend): the axes of a weight (or of a sample) split in two kinds, for the operations
// that reduce over some axes and broadcast the result back along them. The grouped axes are
// reduced over; the others name the group. PReLU: one alpha per group, its shared axes grouped;
// a norm constraint: one norm per group, over the grouped axes. Plain data without
// dependencies, so host and device code both take it (kernel_math.hpp's group_of/member_of).
#pragma once

#include <cstdint>

namespace tandem::backend {

struct AxisGroups {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  std::int64_t dims[kMaxRank] = {};
  bool grouped[kMaxRank] = {};
  std::int64_t size = 1;       // values (the product of the dims)
  std::int64_t groups = 1;     // the product of the dims not grouped
  std::int64_t per_group = 1;  // values per group (the product of the grouped dims)
};

/// Sets `g`'s size, groups and per_group from its rank, dims and grouped flags (the only way the
/// layers fill them).
inline void count_groups(AxisGroups& g) {
  g.size = g.groups = g.per_group = 1;
  for (int a = 0; a < g.rank; ++a) {
    g.size *= g.dims[a];
    (g.grouped[a] ? g.per_group : g.groups) *= g.dims[a];
  }
}

/// Keras' PReLU layer over samples of `dims`, its shared axes grouped.
using PreluDesc = AxisGroups;

/// An L2 normalization of each group (kernel_math's unit_normalize_*): x · rsqrt(max(Σ x²,
/// square_floor)). UnitNormalization and tf.math.l2_normalize (Keras 2's Dot) floor the square
/// sum at 1e-12; Keras 3's ops.normalize, which its Dot calls, bounds rsqrt by 1 / ε (ε = 1e-7),
/// a floor of ε² = 1e-14.
struct UnitNormDesc : AxisGroups {
  double square_floor = 1e-12;
};

/// Keras' weight constraints, applied after each optimizer step (nn/constraint.hpp):
/// max_norm, unit_norm and min_max_norm scale each group (the norm over the grouped axes, Keras'
/// `axis`) to its clipped norm; non_neg zeroes the negative values.
struct ConstraintDesc {
  enum class Kind { max_norm, non_neg, unit_norm, min_max_norm };
  Kind kind = Kind::max_norm;
  float max_value = 2.0f, min_value = 0.0f, rate = 1.0f;
  AxisGroups axes;
};

}  // namespace tandem::backend
