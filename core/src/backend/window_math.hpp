// Private (CUDA module): the index math of the sliding-window device layers (Conv2D's and
// Conv3D's implicit im2col and its col2im gather, max and average pooling and their gradient
// gathers), NHWC (NDHWC with a depth axis), as
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

/// The spatial axes of an NHWC image, or of an NDHWC volume (Conv3D, the 3-D pooling layers:
/// `depth` before the rows), and its channel count (input channels for a convolution). An image
/// keeps the default depth: one cell, one tap, so every function below computes the 2-D window
/// with the same sums in the same order. Cells are numbered (z · rows + y) · cols + x.
struct Geometry {
  Axis rows, cols;
  std::int64_t channels = 1;
  Axis depth = {1, 1, 1, 1, 1, 0};
  bool volume = false;  // tensors carry the depth axis (rank 5); false: rank 4, depth is one cell
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

/// One cell of a geometry's input or output grid: its depth, row and column.
struct Cell {
  std::int64_t z = 0, y = 0, x = 0;
};

TANDEM_HD inline std::int64_t input_cells(const Geometry& g) {
  return g.depth.in * g.rows.in * g.cols.in;
}

TANDEM_HD inline std::int64_t output_cells(const Geometry& g) {
  return g.depth.out * g.rows.out * g.cols.out;
}

TANDEM_HD inline std::int64_t kernel_taps(const Geometry& g) {
  return g.depth.kernel * g.rows.kernel * g.cols.kernel;
}

/// Cell number `cell` of a grid of (rows, cols) per depth slice.
TANDEM_HD inline Cell cell_at(std::int64_t cell, std::int64_t rows, std::int64_t cols) {
  Cell c;
  c.x = cell % cols;
  c.y = (cell / cols) % rows;
  c.z = cell / (cols * rows);
  return c;
}

TANDEM_HD inline Cell output_cell(const Geometry& g, std::int64_t cell) {
  return cell_at(cell, g.rows.out, g.cols.out);
}

TANDEM_HD inline Cell input_cell(const Geometry& g, std::int64_t cell) {
  return cell_at(cell, g.rows.in, g.cols.in);
}

TANDEM_HD inline std::int64_t input_cell_index(const Geometry& g, std::int64_t z, std::int64_t y,
                                               std::int64_t x) {
  return (z * g.rows.in + y) * g.cols.in + x;
}

TANDEM_HD inline std::int64_t output_cell_index(const Geometry& g, std::int64_t z, std::int64_t y,
                                                std::int64_t x) {
  return (z * g.rows.out + y) * g.cols.out + x;
}

/// Tap number `tap` of the kernel, (kz · kh + ky) · kw + kx, as its (kz, ky, kx).
TANDEM_HD inline Cell tap_at(const Geometry& g, std::int64_t tap) {
  return cell_at(tap, g.rows.kernel, g.cols.kernel);
}

/// The taps of output cell o that read inside the input, along each axis: [first, last).
struct Taps {
  std::int64_t z0, z1, y0, y1, x0, x1;
};

TANDEM_HD inline Taps taps_inside(const Geometry& g, const Cell& o) {
  Taps t;
  valid_taps(g.depth, o.z, &t.z0, &t.z1);
  valid_taps(g.rows, o.y, &t.y0, &t.y1);
  valid_taps(g.cols, o.x, &t.x0, &t.x1);
  return t;
}

/// The output cells whose window holds input cell i, along each axis: [first, last) (windows
/// without dilation: pooling).
TANDEM_HD inline Taps covering(const Geometry& g, const Cell& i) {
  Taps t;
  covering_outputs(g.depth, i.z, &t.z0, &t.z1);
  covering_outputs(g.rows, i.y, &t.y0, &t.y1);
  covering_outputs(g.cols, i.x, &t.x0, &t.x1);
  return t;
}

/// f(tap, input cell) for each tap of output cell o that reads inside the input, in (depth tap,
/// row tap, col tap) order: the order every forward sum here adds its terms in.
template <class F>
TANDEM_HD inline void for_each_tap_inside(const Geometry& g, const Cell& o, F&& f) {
  const Taps t = taps_inside(g, o);
  for (std::int64_t kz = t.z0; kz < t.z1; ++kz) {
    const std::int64_t iz = tap_position(g.depth, o.z, kz);
    for (std::int64_t ky = t.y0; ky < t.y1; ++ky) {
      const std::int64_t iy = tap_position(g.rows, o.y, ky);
      for (std::int64_t kx = t.x0; kx < t.x1; ++kx)
        f((kz * g.rows.kernel + ky) * g.cols.kernel + kx,
          input_cell_index(g, iz, iy, tap_position(g.cols, o.x, kx)));
    }
  }
}

/// f(tap, output cell) for each tap, in (depth tap, row tap, col tap) order, whose output reads
/// input cell i: the order every convolution gradient gather here adds its terms in.
template <class F>
TANDEM_HD inline void for_each_reader(const Geometry& g, const Cell& i, F&& f) {
  for (std::int64_t kz = 0; kz < g.depth.kernel; ++kz) {
    const std::int64_t oz = output_of_tap(g.depth, i.z, kz);
    if (oz < 0) continue;
    for (std::int64_t ky = 0; ky < g.rows.kernel; ++ky) {
      const std::int64_t oy = output_of_tap(g.rows, i.y, ky);
      if (oy < 0) continue;
      for (std::int64_t kx = 0; kx < g.cols.kernel; ++kx) {
        const std::int64_t ox = output_of_tap(g.cols, i.x, kx);
        if (ox >= 0)
          f((kz * g.rows.kernel + ky) * g.cols.kernel + kx, output_cell_index(g, oz, oy, ox));
      }
    }
  }
}

/// f(output cell) for each output whose (undilated) window holds input cell i, in ascending
/// (depth, row, col) order: the order the pooling gradients add their terms in.
template <class F>
TANDEM_HD inline void for_each_covering_output(const Geometry& g, const Cell& i, F&& f) {
  const Taps t = covering(g, i);
  for (std::int64_t oz = t.z0; oz < t.z1; ++oz)
    for (std::int64_t oy = t.y0; oy < t.y1; ++oy)
      for (std::int64_t ox = t.x0; ox < t.x1; ++ox) f(output_cell_index(g, oz, oy, ox));
}

// ---- Convolution: implicit im2col --------------------------------------------------------------

/// Columns of the im2col matrix: one per (depth tap, row tap, col tap, input channel), in that
/// order, which is the row order of a Keras kernel (kh, kw, in, filters) or (kd, kh, kw, in,
/// filters) viewed as a (taps * in) x filters matrix.
TANDEM_HD inline std::int64_t patch_size(const Geometry& g) {
  return kernel_taps(g) * g.channels;
}

/// Column j of the im2col row of output cell o of one sample: the offset into the sample's
/// input, cell * channels + ci, or -1 where the tap reads padding (a zero).
TANDEM_HD inline std::int64_t im2col_source(const Geometry& g, const Cell& o, std::int64_t j) {
  const std::int64_t ci = j % g.channels;
  const Cell k = tap_at(g, j / g.channels);
  const std::int64_t iz = tap_position(g.depth, o.z, k.z);
  const std::int64_t iy = tap_position(g.rows, o.y, k.y);
  const std::int64_t ix = tap_position(g.cols, o.x, k.x);
  if (!inside(g.depth, iz) || !inside(g.rows, iy) || !inside(g.cols, ix)) return -1;
  return input_cell_index(g, iz, iy, ix) * g.channels + ci;
}

/// Element e of the im2col matrix of samples laid out one after another (row = (sample, output
/// cell), column j): the value it holds, read from x (the same samples' inputs).
TANDEM_HD inline float im2col_element(const Geometry& g, const float* x, std::int64_t e) {
  const std::int64_t patch = patch_size(g);
  const std::int64_t j = e % patch;
  const std::int64_t row = e / patch;
  const std::int64_t cells = output_cells(g);
  const std::int64_t sample = row / cells;
  const std::int64_t src = im2col_source(g, output_cell(g, row % cells), j);
  return src < 0 ? 0.0f : x[sample * input_cells(g) * g.channels + src];
}

/// col2im as a gather: dL/dx at input element e (channels last, samples one after another) is
/// the sum of the im2col-matrix gradients dcols of every (output, tap) that read it, taps in
/// ascending (depth tap, row tap, col tap) order.
TANDEM_HD inline float col2im_element(const Geometry& g, const float* dcols, std::int64_t e) {
  const std::int64_t ci = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const Cell i = input_cell(g, cell % input_cells(g));
  const std::int64_t sample = cell / input_cells(g);
  const std::int64_t patch = patch_size(g);
  const float* d = dcols + sample * output_cells(g) * patch;
  float s = 0.0f;
  for_each_reader(g, i, [&](std::int64_t tap, std::int64_t out) {
    s += d[out * patch + tap * g.channels + ci];
  });
  return s;
}

// ---- Grouped convolution, computed directly (the CUDA backend's groups > 1) --------------------
// `filters` filters in `groups` groups over a channels-last input of g.channels channels; kernel
// (taps, channels / groups, filters), filter f reading channels [group · cg, (group + 1) · cg),
// group = f / (filters / groups), cg = channels / groups. No bias.

/// Output element e (channels last, samples one after another): the sum over the taps inside
/// the input, in (depth tap, row tap, col tap) order, and over the group's channels in order.
TANDEM_HD inline float grouped_conv_output(const Geometry& g, std::int64_t filters,
                                           std::int64_t groups, const float* x, const float* k,
                                           std::int64_t e) {
  const std::int64_t f = e % filters;
  const std::int64_t cell = e / filters;
  const Cell o = output_cell(g, cell % output_cells(g));
  const std::int64_t sample = cell / output_cells(g);
  const std::int64_t cg = g.channels / groups;
  const std::int64_t c0 = f / (filters / groups) * cg;
  const float* xs = x + sample * input_cells(g) * g.channels;
  float s = 0.0f;
  for_each_tap_inside(g, o, [&](std::int64_t tap, std::int64_t in) {
    const float* xp = xs + in * g.channels + c0;
    const float* kp = k + tap * cg * filters + f;
    for (std::int64_t ci = 0; ci < cg; ++ci) s += xp[ci] * kp[ci * filters];
  });
  return s;
}

/// dL/dx at input element e: over the (depth tap, row tap, col tap) triples whose output reads
/// it, in order, the sum over its group's filters of dy · kernel.
TANDEM_HD inline float grouped_conv_input_grad(const Geometry& g, std::int64_t filters,
                                               std::int64_t groups, const float* dy, const float* k,
                                               std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const Cell i = input_cell(g, cell % input_cells(g));
  const std::int64_t sample = cell / input_cells(g);
  const std::int64_t cg = g.channels / groups, per_group = filters / groups;
  const std::int64_t f0 = c / cg * per_group, ci = c % cg;
  float s = 0.0f;
  for_each_reader(g, i, [&](std::int64_t tap, std::int64_t out) {
    const float* d = dy + (sample * output_cells(g) + out) * filters + f0;
    const float* kp = k + (tap * cg + ci) * filters + f0;
    for (std::int64_t f = 0; f < per_group; ++f) s += d[f] * kp[f];
  });
  return s;
}

/// One term of dL/dkernel at kernel element w = (tap, ci, f): x at the tap of output row `row`
/// (= (sample, output cell), samples one after another) times dy there; 0 where the tap reads
/// padding. The gradient is the sum over every row.
TANDEM_HD inline float grouped_conv_kernel_term(const Geometry& g, std::int64_t filters,
                                                std::int64_t groups, const float* x,
                                                const float* dy, std::int64_t w, std::int64_t row) {
  const std::int64_t cg = g.channels / groups;
  const std::int64_t f = w % filters;
  const std::int64_t ci = (w / filters) % cg;
  const Cell k = tap_at(g, w / (filters * cg));
  const Cell o = output_cell(g, row % output_cells(g));
  const std::int64_t sample = row / output_cells(g);
  const std::int64_t iz = tap_position(g.depth, o.z, k.z);
  const std::int64_t iy = tap_position(g.rows, o.y, k.y), ix = tap_position(g.cols, o.x, k.x);
  if (!inside(g.depth, iz) || !inside(g.rows, iy) || !inside(g.cols, ix)) return 0.0f;
  const std::int64_t c = f / (filters / groups) * cg + ci;
  return x[(sample * input_cells(g) + input_cell_index(g, iz, iy, ix)) * g.channels + c] *
         dy[row * filters + f];
}

// ---- Pooling -----------------------------------------------------------------------------------

/// The lowest float, max pooling's starting value (as oneDNN's; a window whose cells are all
/// -inf or NaN yields it).
constexpr float kLowest = -3.40282347e+38f;

/// Output element e of max pooling (channels last, samples one after another; channels = the
/// input's): the window's maximum, and in *argmax the input cell it came from, or -1. As oneDNN
/// (the CPU backend): starting from kLowest at the window's first tap, the cells inside the
/// input are scanned in (depth tap, row tap, col tap) order and a cell wins only when strictly
/// greater, so the first of equal maxima wins, NaN never does, and padding never does (a window
/// whose maximum never rose above kLowest keeps the first tap, which gets the gradient only when
/// it is inside).
TANDEM_HD inline float max_pool_element(const Geometry& g, const float* x, std::int64_t e,
                                        std::int32_t* argmax) {
  const std::int64_t c = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const Cell o = output_cell(g, cell % output_cells(g));
  const std::int64_t sample = cell / output_cells(g);
  const float* xs = x + sample * input_cells(g) * g.channels;
  const std::int64_t z0 = tap_position(g.depth, o.z, 0), y0 = tap_position(g.rows, o.y, 0),
                     x0 = tap_position(g.cols, o.x, 0);
  std::int64_t best_cell = inside(g.depth, z0) && inside(g.rows, y0) && inside(g.cols, x0)
                               ? input_cell_index(g, z0, y0, x0)
                               : -1;
  float best = kLowest;
  for_each_tap_inside(g, o, [&](std::int64_t /*tap*/, std::int64_t in) {
    const float v = xs[in * g.channels + c];
    if (v > best) {
      best = v;
      best_cell = in;
    }
  });
  *argmax = static_cast<std::int32_t>(best_cell);
  return best;
}

/// dL/dx at input element e of max pooling: the sum of the output gradients dy of the windows
/// whose argmax is this cell, outputs in ascending (depth, row, col) order. argmax as
/// max_pool_element wrote it, per output element.
TANDEM_HD inline float max_pool_grad_element(const Geometry& g, const float* dy,
                                             const std::int32_t* argmax, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const std::int64_t in_cell = cell % input_cells(g);
  const std::int64_t sample = cell / input_cells(g);
  const std::int64_t base = sample * output_cells(g) * g.channels;
  float s = 0.0f;
  for_each_covering_output(g, input_cell(g, in_cell), [&](std::int64_t out) {
    const std::int64_t o = base + out * g.channels + c;
    if (argmax[o] == in_cell) s += dy[o];
  });
  return s;
}

/// The number of input cells (padding left out) in the window of output cell o: what an average
/// over a "same" window divides by (oneDNN's pooling_avg_exclude_padding, Keras').
TANDEM_HD inline std::int64_t pool_cells(const Geometry& g, const Cell& o) {
  const Taps t = taps_inside(g, o);
  return (t.z1 - t.z0) * (t.y1 - t.y0) * (t.x1 - t.x0);
}

/// Output element e of average pooling: the sum of the window's input cells in (depth tap, row
/// tap, col tap) order, divided by their count.
TANDEM_HD inline float avg_pool_element(const Geometry& g, const float* x, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const Cell o = output_cell(g, cell % output_cells(g));
  const std::int64_t sample = cell / output_cells(g);
  const float* xs = x + sample * input_cells(g) * g.channels;
  float s = 0.0f;
  for_each_tap_inside(g, o, [&](std::int64_t /*tap*/, std::int64_t in) {
    s += xs[in * g.channels + c];
  });
  const Taps t = taps_inside(g, o);
  const std::int64_t n = (t.z1 - t.z0) * (t.y1 - t.y0) * (t.x1 - t.x0);
  return n > 0 ? s / static_cast<float>(n) : 0.0f;
}

/// dL/dx at input element e of average pooling: the sum over the windows holding the cell, in
/// ascending (depth, row, col) order, of their output gradient divided by their cell count.
TANDEM_HD inline float avg_pool_grad_element(const Geometry& g, const float* dy, std::int64_t e) {
  const std::int64_t c = e % g.channels;
  const std::int64_t cell = e / g.channels;
  const std::int64_t sample = cell / input_cells(g);
  const std::int64_t base = sample * output_cells(g) * g.channels;
  float s = 0.0f;
  for_each_covering_output(g, input_cell(g, cell % input_cells(g)), [&](std::int64_t out) {
    s += dy[base + out * g.channels + c] / static_cast<float>(pool_cells(g, output_cell(g, out)));
  });
  return s;
}

}  // namespace tandem::backend::window
