// Adaptive pooling (Keras 3's AdaptiveAveragePooling1D/2D/3D and AdaptiveMaxPooling1D/2D/3D,
// PyTorch's adaptive_avg_pool / adaptive_max_pool): output cell i of an axis of `in` input cells
// pooled to `out` covers the input cells [floor(i·in/out), ceil((i+1)·in/out)) — windows whose
// size varies and which overlap where `out` does not divide `in`. Channels last. The arithmetic
// of one output value and of one input value's gradient, shared by the CPU backend and the CUDA
// kernels so that both give the same bits.
//
// Header rules: kernel_math.hpp's (compiles with nvcc -std=c++17).
#pragma once

#include <cstdint>

#include "backend/kernel_math.hpp"

namespace tandem::backend {

/// Samples (batch, depth, rows, cols, channels) pooled to (batch, out[0], out[1], out[2],
/// channels); an axis the layer lacks has one cell in and out.
struct AdaptivePoolDesc {
  bool max = false;  // else the average
  std::int64_t batch = 0, channels = 0;
  std::int64_t in[3] = {1, 1, 1};   // depth, rows, cols
  std::int64_t out[3] = {1, 1, 1};  // the same, pooled
};

namespace math {

/// The first input cell of output cell i: floor(i·in/out).
TANDEM_HD inline std::int64_t adaptive_start(std::int64_t i, std::int64_t in, std::int64_t out) {
  return i * in / out;
}

/// One past the last input cell of output cell i: ceil((i+1)·in/out).
TANDEM_HD inline std::int64_t adaptive_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

TANDEM_HD inline std::int64_t adaptive_in_cells(const AdaptivePoolDesc& d) {
  return d.in[0] * d.in[1] * d.in[2];
}

TANDEM_HD inline std::int64_t adaptive_out_cells(const AdaptivePoolDesc& d) {
  return d.out[0] * d.out[1] * d.out[2];
}

/// Channel c of output cell `cell` (flat over out[0], out[1], out[2]) of the sample x (its
/// input cells, channels last). The average sums in double, in scan order; the maximum is the
/// first in scan order (a NaN wins and stays, as PyTorch's), its flat input cell in *arg.
TANDEM_HD inline float adaptive_pool_value(const AdaptivePoolDesc& d, const float* x,
                                           std::int64_t cell, std::int64_t c, float* arg) {
  const std::int64_t o2 = cell % d.out[2], o1 = cell / d.out[2] % d.out[1],
                     o0 = cell / (d.out[2] * d.out[1]);
  const std::int64_t s0 = adaptive_start(o0, d.in[0], d.out[0]),
                     e0 = adaptive_end(o0, d.in[0], d.out[0]);
  const std::int64_t s1 = adaptive_start(o1, d.in[1], d.out[1]),
                     e1 = adaptive_end(o1, d.in[1], d.out[1]);
  const std::int64_t s2 = adaptive_start(o2, d.in[2], d.out[2]),
                     e2 = adaptive_end(o2, d.in[2], d.out[2]);
  double sum = 0.0;
  float best = 0.0f;
  std::int64_t best_at = -1;
  for (std::int64_t i0 = s0; i0 < e0; ++i0)
    for (std::int64_t i1 = s1; i1 < e1; ++i1)
      for (std::int64_t i2 = s2; i2 < e2; ++i2) {
        const std::int64_t at = (i0 * d.in[1] + i1) * d.in[2] + i2;
        const float v = x[at * d.channels + c];
        if (!d.max) {
          sum = dadd(sum, f2d(v));
        } else if (best_at < 0 || (best == best && (v > best || v != v))) {
          best = v;
          best_at = at;
        }
      }
  if (!d.max) return d2f(ddiv(sum, i2d((e0 - s0) * (e1 - s1) * (e2 - s2))));
  *arg = static_cast<float>(best_at);
  return best;
}

/// The gradient of channel c of the sample's input cell `cell` (flat over in[0], in[1], in[2]):
/// the sum, in output order, over the output cells whose window holds it of dy / the window's
/// size (average) or of dy where the cell was the window's maximum (arg, adaptive_pool_value's).
TANDEM_HD inline float adaptive_pool_input_gradient(const AdaptivePoolDesc& d, const float* dy,
                                                    const float* arg, std::int64_t cell,
                                                    std::int64_t c) {
  const std::int64_t at[3] = {cell / (d.in[2] * d.in[1]), cell / d.in[2] % d.in[1], cell % d.in[2]};
  // The output cells of each axis whose window holds the cell: from floor(at·out/in) while
  // their window starts at or before it.
  std::int64_t first[3], last[3];
  for (int a = 0; a < 3; ++a) {
    first[a] = at[a] * d.out[a] / d.in[a];
    last[a] = first[a];
    while (last[a] + 1 < d.out[a] && adaptive_start(last[a] + 1, d.in[a], d.out[a]) <= at[a])
      ++last[a];
  }
  float sum = 0.0f;
  for (std::int64_t o0 = first[0]; o0 <= last[0]; ++o0)
    for (std::int64_t o1 = first[1]; o1 <= last[1]; ++o1)
      for (std::int64_t o2 = first[2]; o2 <= last[2]; ++o2) {
        const std::int64_t o = ((o0 * d.out[1] + o1) * d.out[2] + o2) * d.channels + c;
        if (d.max) {
          if (arg[o] == static_cast<float>(cell)) sum = fadd(sum, dy[o]);
        } else {
          const std::int64_t size =
              (adaptive_end(o0, d.in[0], d.out[0]) - adaptive_start(o0, d.in[0], d.out[0])) *
              (adaptive_end(o1, d.in[1], d.out[1]) - adaptive_start(o1, d.in[1], d.out[1])) *
              (adaptive_end(o2, d.in[2], d.out[2]) - adaptive_start(o2, d.in[2], d.out[2]));
          sum = fadd(sum, fdiv(dy[o], static_cast<float>(size)));
        }
      }
  return sum;
}

}  // namespace math
}  // namespace tandem::backend
