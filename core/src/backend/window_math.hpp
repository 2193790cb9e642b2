// Private (CUDA module): the index math of the sliding-window device layers (Conv2D's implicit
// im2col and its col2im gather, max and average pooling and their gradient gathers), NHWC, as
// plain __host__ __device__ inline functions: the kernels call them per element, and a CPU unit
// test (tests/core/cuda/window_math_test.cpp) checks them against naive references and
// nn::window_along, so this header must compile with g++ alone (C++17, no CUDA, no Tandem
// headers).
//
// Every sum here adds its terms in an order fixed by the geometry alone (taps or outputs in
// ascending order), so results are the same bits run to run. Ownership: none (pure functions on
// borrowed pointers). Thread-safety: pure, any thread.
#pragma once

#include <cstdint>

// As backend/kernel_math.hpp defines it (the same tokens, so both headers may be included).
#ifndef TANDEM_HD
#ifdef __CUDACC__
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif
#endif

namespace tandem::backend::window {

/// One axis of a sliding window: the input and output lengths (out and pad_before exactly as
/// nn::window_along computes them) and the window's taps, stride and dilation.
struct Axis {
  std::int64_t in = 0;          // input length
  std::int64_t out = 0;         // output length
  std::int64_t kernel = 1;      // taps per window
  std::int64_t stride = 1;      // input steps between two outputs
  std::int64_t dilation = 1;    // input steps between two taps
  std::int64_t pad_before = 0;  // zero padding before the input (the rest of SAME's is after)
};

/// Both spatial axes of an NHWC image and its channel count (input channels for Conv2D).
struct Geometry2D {
  Axis rows, cols;
  std::int64_t channels = 1;
};

/// The zero padding after the input along `a` (what SAME pads beyond pad_before; 0 for valid).
TANDEM_HD inline std::int64_t pad_after(const Axis& a) {
  const std::int64_t after = (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1 - a.in -
                             a.pad_before;
  return after > 0 ? after : 0;
}

/// floor(a / b) for b > 0, also for negative a.
TANDEM_HD inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// ceil(a / b) for b > 0, also for negative a.
TANDEM_HD inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

/// The input position that tap k of output o reads (outside [0, in) when it is padding).
TANDEM_HD inline std::int64_t tap_position(const Axis& a, std::int64_t o, std::int64_t k) {
  return o * a.stride - a.pad_before + k * a.dilation;
}

TANDEM_HD inline bool inside(const Axis& a, std::int64_t i) {
  return i >= 0 && i < a.in;
}

/// The output whose tap k reads input position i, or -1 when no output's tap k does.
TANDEM_HD inline std::int64_t output_of_tap(const Axis& a, std::int64_t i, std::int64_t k) {
  const std::int64_t t = i + a.pad_before - k * a.dilation;
  if (t < 0 || t % a.stride != 0) return -1;
  const std::int64_t o = t / a.stride;
  return o < a.out ? o : -1;
}

/// The taps of output o that read inside the input: [*first, *last) (empty when none do).
TANDEM_HD inline void valid_taps(const Axis& a, std::int64_t o, std::int64_t* first,
                                 std::int64_t* last) {
  const std::int64_t start = tap_position(a, o, 0);
  std::int64_t f = ceil_div(-start, a.dilation);
  std::int64_t l = floor_div(a.in - 1 - start, a.dilation) + 1;
  if (f < 0) f = 0;
  if (l > a.kernel) l = a.kernel;
  if (l < f) l = f;
  *first = f;
  *last = l;
}

/// The outputs one of whose taps reads input position i, for an undilated window (pooling):
/// [*first, *last), ascending (empty when none do).
TANDEM_HD inline void covering_outputs(const Axis& a, std::int64_t i, std::int64_t* first,
                                       std::int64_t* last) {
  std::int64_t f = ceil_div(i + a.pad_before - (a.kernel - 1), a.stride);
  std::int64_t l = floor_div(i + a.pad_before, a.stride) + 1;
  if (f < 0) f = 0;
  if (l > a.out) l = a.out;
  if (l < f) l = f;
  *first = f;
  *last = l;
}

// ---- Conv2D: implicit im2col -------------------------------------------------------------------

/// Columns of the im2col matrix: one per (tap row, tap col, input channel), in that order, which
/// is the row order of a Keras HWIO kernel viewed as a (kh*kw*in) x filters matrix.
TANDEM_HD inline std::int64_t patch_size(const Geometry2D& g) {
  return g.rows.kernel * g.cols.kernel * g.channels;
}

/// Column j of the im2col row of output (oy, ox) of one sample: the offset into the sample's
/// input, (iy * in_cols + ix) * channels + ci, or -1 where the tap reads padding (a zero).
TANDEM_HD inline std::int64_t im2col_source(const Geometry2D& g, std::int64_t oy, std::int64_t ox,
                                            std::int64_t j) {
  const std::int64_t ci = j % g.channels;
  const std::int64_t tap = j / g.channels;
  const std::int64_t kx = tap % g.cols.kernel;
  const std::int64_t ky = tap / g.cols.kernel;
  const std::int64_t iy = tap_position(g.rows, oy, ky);
  const std::int64_t ix = tap_position(g.cols, ox, kx);
  if (!inside(g.rows, iy) || !inside(g.cols, ix)) return -1;
  return (iy * g.cols.in + ix) * g.channels + ci;
}

/// Element e of the im2col matrix of samples laid out one after another (row = (sample, oy, ox),
/// column j): the value it holds, read from x (the same samples' inputs).
TANDEM_HD inline float im2col_element(const Geometry2D& g, const float* x, std::int64_t e) {
  const std::int64_t patch = patch_size(g);
  const std::int64_t j = e % patch;
  const std::int64_t row = e / patch;
  const std::int64_t ox = row % g.cols.out;
  const std::int64_t oy = (row / g.cols.out) % g.rows.out;
  const std::int64_t sample = row / (g.cols.out * g.rows.out);
  const std::int64_t src = im2col_source(g, oy, ox, j);
  return src < 0 ? 0.0f : x[sample * g.rows.in * g.cols.in * g.channels + src];
}

/// col2im as a gather: dL/dx at input element e (NHWC, samples one after another) is the sum of
/// the im2col-matrix gradients dcols of every (output, tap) that read it, taps in ascending
/// (row tap, col tap) order.
TANDEM_HD inline float col2im_element(const Geometry2D& g, const float* dcols, std::int64_t e) {
  const std::int64_t ci = e % g.channels;
  const std::int64_t ix = (e / g.channels) % g.cols.in;
  const std::int64_t iy = (e / (g.channels * g.cols.in)) % g.rows.in;
  const std::int64_t sample = e / (g.channels * g.cols.in * g.rows.in);
  const std::int64_t patch = patch_size(g);
  const float* d = dcols + sample * g.rows.out * g.cols.out * patch;
  float s = 0.0f;
  for (std::int64_t ky = 0; ky < g.rows.kernel; ++ky) {
    const std::int64_t oy = output_of_tap(g.rows, iy, ky);
    if (oy < 0) continue;
    for (std::int64_t kx = 0; kx < g.cols.kernel; ++kx) {
      const std::int64_t ox = output_of_tap(g.cols, ix, kx);
      if (ox < 0) continue;
      s += d[(oy * g.cols.out + ox) * patch + (ky * g.cols.kernel + kx) * g.channels + ci];
    }
  }
  return s;
}

// ---- Grouped convolution, computed directly (the CUDA backend's groups > 1) --------------------
// `filters` filters in `groups` groups over an NHWC input of g.channels channels; kernel
// (kh, kw, channels / groups, filters), filter f reading channels [group · cg, (group + 1) · cg),
// group = f / (filters / groups), cg = channels / groups. No bias.

/// Output element e (NHWC, samples one after another): the sum over the taps inside the input,
/// in (row tap, col tap) order, and over the group's channels in order.
TANDEM_HD inline float grouped_conv_output(const Geometry2D& g, std::int64_t filters,
                                           std::int64_t groups, const float* x, const float* k,
                                           std::int64_t e) {
  const std::int64_t f = e % filters;
  const std::int64_t ox = (e / filters) % g.cols.out;
  const std::int64_t oy = (e / (filters * g.cols.out)) % g.rows.out;
  const std::int64_t sample = e / (filters * g.cols.out * g.rows.out);
  const std::int64_t cg = g.channels / groups;
  const std::int64_t c0 = f / (filters / groups) * cg;
  const float* xs = x + sample * g.rows.in * g.cols.in * g.channels;
  std::int64_t ky0, ky1, kx0, kx1;
  valid_taps(g.rows, oy, &ky0, &ky1);
  valid_taps(g.cols, ox, &kx0, &kx1);
  float s = 0.0f;
  for (std::int64_t ky = ky0; ky < ky1; ++ky) {
    const std::int64_t iy = tap_position(g.rows, oy, ky);
    for (std::int64_t kx = kx0; kx < kx1; ++kx) {
      const std::int64_t ix = tap_position(g.cols, ox, kx);
      const float* xp = xs + (iy * g.cols.in + ix) * g.channels + c0;
      const float* kp = k + (ky * g.cols.kernel + kx) * cg * filters + f;
      for (std::int64_t ci = 0; ci < cg; ++ci) s += xp[ci] * kp[ci * filters];
    }
  }
  return s;
}

/// dL/dx at input element e: over the (row tap, col tap) pairs whose output reads it, in order,
/// the sum over its group's filters of dy · kernel.
TANDEM_HD inline float grouped_conv_input_grad(const Geometry2D& g, std::int64_t filters,
                                               std::int64_t groups, const float* dy,
                                               const float* k, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t ix = (e / g.channels) % g.cols.in;
  const std::int64_t iy = (e / (g.channels * g.cols.in)) % g.rows.in;
  const std::int64_t sample = e / (g.channels * g.cols.in * g.rows.in);
  const std::int64_t cg = g.channels / groups, per_group = filters / groups;
  const std::int64_t f0 = c / cg * per_group, ci = c % cg;
  float s = 0.0f;
  for (std::int64_t ky = 0; ky < g.rows.kernel; ++ky) {
    const std::int64_t oy = output_of_tap(g.rows, iy, ky);
    if (oy < 0) continue;
    for (std::int64_t kx = 0; kx < g.cols.kernel; ++kx) {
      const std::int64_t ox = output_of_tap(g.cols, ix, kx);
      if (ox < 0) continue;
      const float* d = dy + ((sample * g.rows.out + oy) * g.cols.out + ox) * filters + f0;
      const float* kp = k + ((ky * g.cols.kernel + kx) * cg + ci) * filters + f0;
      for (std::int64_t f = 0; f < per_group; ++f) s += d[f] * kp[f];
    }
  }
  return s;
}

/// One term of dL/dkernel at kernel element w = (ky, kx, ci, f): x at the tap of output row
/// `row` (= (sample, oy, ox), samples one after another) times dy there; 0 where the tap reads
/// padding. The gradient is the sum over every row.
TANDEM_HD inline float grouped_conv_kernel_term(const Geometry2D& g, std::int64_t filters,
                                                std::int64_t groups, const float* x,
                                                const float* dy, std::int64_t w,
                                                std::int64_t row) {
  const std::int64_t cg = g.channels / groups;
  const std::int64_t f = w % filters;
  const std::int64_t ci = (w / filters) % cg;
  const std::int64_t tap = w / (filters * cg);
  const std::int64_t kx = tap % g.cols.kernel, ky = tap / g.cols.kernel;
  const std::int64_t ox = row % g.cols.out;
  const std::int64_t oy = (row / g.cols.out) % g.rows.out;
  const std::int64_t sample = row / (g.cols.out * g.rows.out);
  const std::int64_t iy = tap_position(g.rows, oy, ky), ix = tap_position(g.cols, ox, kx);
  if (!inside(g.rows, iy) || !inside(g.cols, ix)) return 0.0f;
  const std::int64_t c = f / (filters / groups) * cg + ci;
  return x[((sample * g.rows.in + iy) * g.cols.in + ix) * g.channels + c] * dy[row * filters + f];
}

// ---- Pooling -----------------------------------------------------------------------------------

/// The lowest float, max pooling's starting value (as oneDNN's; a window whose cells are all
/// -inf or NaN yields it).
constexpr float kLowest = -3.40282347e+38f;

/// Output element e of max pooling (NHWC, samples one after another; channels = the image's):
/// the window's maximum, and in *argmax the input cell (iy * in_cols + ix) it came from, or -1.
/// As oneDNN (the CPU backend): starting from kLowest at tap (0, 0), the cells inside the input
/// are scanned in (row tap, col tap) order and a cell wins only when strictly greater, so the
/// first of equal maxima wins, NaN never does, and padding never does (a window whose maximum
/// never rose above kLowest keeps tap (0, 0), which gets the gradient only when it is inside).
TANDEM_HD inline float max_pool_element(const Geometry2D& g, const float* x, std::int64_t e,
                                        std::int32_t* argmax) {
  const std::int64_t c = e % g.channels;
  const std::int64_t ox = (e / g.channels) % g.cols.out;
  const std::int64_t oy = (e / (g.channels * g.cols.out)) % g.rows.out;
  const std::int64_t sample = e / (g.channels * g.cols.out * g.rows.out);
  const float* xs = x + sample * g.rows.in * g.cols.in * g.channels;
  const std::int64_t y0 = tap_position(g.rows, oy, 0), x0 = tap_position(g.cols, ox, 0);
  std::int64_t best_cell = inside(g.rows, y0) && inside(g.cols, x0) ? y0 * g.cols.in + x0 : -1;
  float best = kLowest;
  std::int64_t ky0, ky1, kx0, kx1;
  valid_taps(g.rows, oy, &ky0, &ky1);
  valid_taps(g.cols, ox, &kx0, &kx1);
  for (std::int64_t ky = ky0; ky < ky1; ++ky) {
    const std::int64_t iy = tap_position(g.rows, oy, ky);
    for (std::int64_t kx = kx0; kx < kx1; ++kx) {
      const std::int64_t ix = tap_position(g.cols, ox, kx);
      const float v = xs[(iy * g.cols.in + ix) * g.channels + c];
      if (v > best) {
        best = v;
        best_cell = iy * g.cols.in + ix;
      }
    }
  }
  *argmax = static_cast<std::int32_t>(best_cell);
  return best;
}

/// dL/dx at input element e of max pooling: the sum of the output gradients dy of the windows
/// whose argmax is this cell, outputs in ascending (row, col) order. argmax as max_pool_element
/// wrote it, per output element.
TANDEM_HD inline float max_pool_grad_element(const Geometry2D& g, const float* dy,
                                             const std::int32_t* argmax, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t ix = (e / g.channels) % g.cols.in;
  const std::int64_t iy = (e / (g.channels * g.cols.in)) % g.rows.in;
  const std::int64_t sample = e / (g.channels * g.cols.in * g.rows.in);
  const std::int64_t base = sample * g.rows.out * g.cols.out * g.channels;
  const std::int64_t cell = iy * g.cols.in + ix;
  std::int64_t oy0, oy1, ox0, ox1;
  covering_outputs(g.rows, iy, &oy0, &oy1);
  covering_outputs(g.cols, ix, &ox0, &ox1);
  float s = 0.0f;
  for (std::int64_t oy = oy0; oy < oy1; ++oy)
    for (std::int64_t ox = ox0; ox < ox1; ++ox) {
      const std::int64_t o = base + (oy * g.cols.out + ox) * g.channels + c;
      if (argmax[o] == cell) s += dy[o];
    }
  return s;
}

/// The number of input cells (padding left out) in the window of output (oy, ox): what an
/// average over a "same" window divides by (oneDNN's pooling_avg_exclude_padding, Keras').
TANDEM_HD inline std::int64_t pool_cells(const Geometry2D& g, std::int64_t oy, std::int64_t ox) {
  std::int64_t ky0, ky1, kx0, kx1;
  valid_taps(g.rows, oy, &ky0, &ky1);
  valid_taps(g.cols, ox, &kx0, &kx1);
  return (ky1 - ky0) * (kx1 - kx0);
}

/// Output element e of average pooling: the sum of the window's input cells in (row tap, col
/// tap) order, divided by their count.
TANDEM_HD inline float avg_pool_element(const Geometry2D& g, const float* x, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t ox = (e / g.channels) % g.cols.out;
  const std::int64_t oy = (e / (g.channels * g.cols.out)) % g.rows.out;
  const std::int64_t sample = e / (g.channels * g.cols.out * g.rows.out);
  const float* xs = x + sample * g.rows.in * g.cols.in * g.channels;
  std::int64_t ky0, ky1, kx0, kx1;
  valid_taps(g.rows, oy, &ky0, &ky1);
  valid_taps(g.cols, ox, &kx0, &kx1);
  float s = 0.0f;
  for (std::int64_t ky = ky0; ky < ky1; ++ky) {
    const std::int64_t iy = tap_position(g.rows, oy, ky);
    for (std::int64_t kx = kx0; kx < kx1; ++kx) {
      const std::int64_t ix = tap_position(g.cols, ox, kx);
      s += xs[(iy * g.cols.in + ix) * g.channels + c];
    }
  }
  const std::int64_t n = (ky1 - ky0) * (kx1 - kx0);
  return n > 0 ? s / static_cast<float>(n) : 0.0f;
}

/// dL/dx at input element e of average pooling: the sum over the windows holding the cell, in
/// ascending (row, col) order, of their output gradient divided by their cell count.
TANDEM_HD inline float avg_pool_grad_element(const Geometry2D& g, const float* dy, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t ix = (e / g.channels) % g.cols.in;
  const std::int64_t iy = (e / (g.channels * g.cols.in)) % g.rows.in;
  const std::int64_t sample = e / (g.channels * g.cols.in * g.rows.in);
  const std::int64_t base = sample * g.rows.out * g.cols.out * g.channels;
  std::int64_t oy0, oy1, ox0, ox1;
  covering_outputs(g.rows, iy, &oy0, &oy1);
  covering_outputs(g.cols, ix, &ox0, &ox1);
  float s = 0.0f;
  for (std::int64_t oy = oy0; oy < oy1; ++oy)
    for (std::int64_t ox = ox0; ox < ox1; ++ox)
      s += dy[base + (oy * g.cols.out + ox) * g.channels + c] /
           static_cast<float>(pool_cells(g, oy, ox));
  return s;
}

}  // namespace tandem::backend::window
