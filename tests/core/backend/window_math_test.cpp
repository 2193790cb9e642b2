// Tests of the CUDA layers' window index math (core/src/backend/window_math.hpp) on
// the CPU: the header is plain C++ there. Each function is checked against a naive reference
// that works on an explicitly zero-padded image built from nn::window_along's geometry, over
// many shapes (odd sizes, strides 1-3, dilation 1-3, "same" and "valid"), and the whole
// algorithms (im2col + GEMM + col2im; pooling with its tie-breaking and gradient routing) against
// the CPU layers nn::Conv2D and nn::Pooling2D that the CUDA layers mirror.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/window_math.hpp"
#include "nn/conv2d.hpp"
#include "nn/pooling.hpp"
#include "nn/spatial.hpp"
#include "tandem/rng.hpp"

namespace tandem::backend::window {
namespace TANDEM_TEST_FILE {

Axis axis(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, nn::Padding p) {
  const nn::Window w = nn::window_along(in, k, s, d, p);
  Axis a;
  a.in = in;
  a.out = w.out;
  a.kernel = k;
  a.stride = s;
  a.dilation = d;
  a.pad_before = w.pad_before;
  return a;
}

std::int64_t pad_after(const Axis& a, nn::Padding p) {
  return nn::window_along(a.in, a.kernel, a.stride, a.dilation, p).pad_after;
}

// Every 1-D geometry with small sizes.
template <class F>
void for_each_axis(F&& f) {
  for (std::int64_t in = 1; in <= 11; ++in)
    for (std::int64_t k = 1; k <= 4; ++k)
      for (std::int64_t s = 1; s <= 3; ++s)
        for (std::int64_t d = 1; d <= 3; ++d)
          for (nn::Padding p : {nn::Padding::valid, nn::Padding::same}) {
            const Axis a = axis(in, k, s, d, p);
            if (a.out > 0) f(a, p);
          }
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(WindowMath, FloorAndCeilDivision) {
  for (std::int64_t a = -20; a <= 20; ++a)
    for (std::int64_t b = 1; b <= 5; ++b) {
      EXPECT_EQ(floor_div(a, b), static_cast<std::int64_t>(std::floor(double(a) / double(b))));
      EXPECT_EQ(ceil_div(a, b), static_cast<std::int64_t>(std::ceil(double(a) / double(b))));
    }
}

// The padded frame of window_along holds every window: (out - 1) * stride + span <= padded length.
TEST(WindowMath, WindowsFitThePaddedInput) {
  for_each_axis([](const Axis& a, nn::Padding p) {
    const std::int64_t span = (a.kernel - 1) * a.dilation + 1;
    const std::int64_t padded = a.pad_before + a.in + pad_after(a, p);
    EXPECT_LE((a.out - 1) * a.stride + span, padded) << a.in << " " << a.kernel;
    // and no output could be added: the next window would not fit
    if (p == nn::Padding::valid) {
      EXPECT_GT(a.out * a.stride + span, padded);
    }
  });
}

TEST(WindowMath, TapsAndTheirInverse) {
  for_each_axis([](const Axis& a, nn::Padding) {
    // output_of_tap inverts tap_position on the input.
    for (std::int64_t o = 0; o < a.out; ++o)
      for (std::int64_t k = 0; k < a.kernel; ++k) {
        const std::int64_t i = tap_position(a, o, k);
        EXPECT_EQ(i, o * a.stride + k * a.dilation - a.pad_before);
        if (inside(a, i)) {
          EXPECT_EQ(output_of_tap(a, i, k), o);
        }
      }
    for (std::int64_t i = 0; i < a.in; ++i)
      for (std::int64_t k = 0; k < a.kernel; ++k) {
        const std::int64_t o = output_of_tap(a, i, k);
        std::int64_t expected = -1;
        for (std::int64_t oo = 0; oo < a.out; ++oo)
          if (tap_position(a, oo, k) == i) expected = oo;
        EXPECT_EQ(o, expected);
      }
  });
}

TEST(WindowMath, ValidTapsAndCoveringOutputs) {
  for_each_axis([](const Axis& a, nn::Padding) {
    for (std::int64_t o = 0; o < a.out; ++o) {
      std::int64_t f = 0, l = 0;
      valid_taps(a, o, &f, &l);
      for (std::int64_t k = 0; k < a.kernel; ++k)
        EXPECT_EQ(k >= f && k < l, inside(a, tap_position(a, o, k)))
            << "in " << a.in << " k " << a.kernel << " s " << a.stride << " d " << a.dilation;
      // An undilated window always reads an input cell (a dilated one may read only padding).
      if (a.dilation == 1) {
        EXPECT_GT(l, f);
      }
    }
    if (a.dilation != 1) return;  // covering_outputs is for undilated (pooling) windows
    for (std::int64_t i = 0; i < a.in; ++i) {
      std::int64_t f = 0, l = 0;
      covering_outputs(a, i, &f, &l);
      for (std::int64_t o = 0; o < a.out; ++o) {
        const std::int64_t start = tap_position(a, o, 0);
        EXPECT_EQ(o >= f && o < l, i >= start && i < start + a.kernel);
      }
    }
  });
}

// ---- 2-D references on an explicitly padded image ----------------------------------------------

struct Case {
  Geometry g;
  nn::Padding padding;
  std::int64_t samples;
};

std::vector<Case> cases(bool dilate, std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> out;
  while (static_cast<int>(out.size()) < count) {
    Case c;
    c.padding = pick(0, 1) ? nn::Padding::same : nn::Padding::valid;
    const int dy = dilate ? pick(1, 3) : 1, dx = dilate ? pick(1, 3) : 1;
    c.g.rows = axis(pick(1, 9), pick(1, 4), pick(1, 3), dy, c.padding);
    c.g.cols = axis(pick(1, 9), pick(1, 4), pick(1, 3), dx, c.padding);
    c.g.channels = pick(1, 3);
    c.samples = pick(1, 2);
    if (c.g.rows.out > 0 && c.g.cols.out > 0) out.push_back(c);
  }
  return out;
}

// The input zero-padded (or padded with `fill`) by window_along's paddings, and a mask of the
// real cells.
struct Padded {
  std::int64_t rows = 0, cols = 0, channels = 0;
  std::vector<float> values;
  std::vector<char> real;
  float at(std::int64_t s, std::int64_t r, std::int64_t c, std::int64_t ch) const {
    return values[((s * rows + r) * cols + c) * channels + ch];
  }
  bool is_real(std::int64_t s, std::int64_t r, std::int64_t c) const {
    return real[(s * rows + r) * cols + c] != 0;
  }
};

Padded pad(const Case& c, const std::vector<float>& x, float fill) {
  Padded p;
  p.rows = c.g.rows.pad_before + c.g.rows.in + pad_after(c.g.rows, c.padding);
  p.cols = c.g.cols.pad_before + c.g.cols.in + pad_after(c.g.cols, c.padding);
  p.channels = c.g.channels;
  p.values.assign(static_cast<std::size_t>(c.samples * p.rows * p.cols * p.channels), fill);
  p.real.assign(static_cast<std::size_t>(c.samples * p.rows * p.cols), 0);
  for (std::int64_t s = 0; s < c.samples; ++s)
    for (std::int64_t r = 0; r < c.g.rows.in; ++r)
      for (std::int64_t q = 0; q < c.g.cols.in; ++q) {
        const std::int64_t pr = r + c.g.rows.pad_before, pq = q + c.g.cols.pad_before;
        p.real[(s * p.rows + pr) * p.cols + pq] = 1;
        for (std::int64_t ch = 0; ch < p.channels; ++ch)
          p.values[((s * p.rows + pr) * p.cols + pq) * p.channels + ch] =
              x[((s * c.g.rows.in + r) * c.g.cols.in + q) * c.g.channels + ch];
      }
  return p;
}

std::vector<float> small_integers(std::size_t n, std::mt19937& rng, int lo, int hi) {
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(std::uniform_int_distribution<int>(lo, hi)(rng));
  return v;
}

std::int64_t input_count(const Case& c) {
  return c.samples * c.g.rows.in * c.g.cols.in * c.g.channels;
}
std::int64_t output_pixels(const Case& c) {
  return c.samples * c.g.rows.out * c.g.cols.out;
}

TEST(WindowMath, Im2colMatchesThePaddedImage) {
  std::mt19937 rng(1);
  for (const Case& c : cases(true, 11, 400)) {
    const std::vector<float> x = small_integers(input_count(c), rng, -9, 9);
    const Padded p = pad(c, x, 0.0f);
    const std::int64_t patch = patch_size(c.g);
    ASSERT_EQ(patch, c.g.rows.kernel * c.g.cols.kernel * c.g.channels);
    std::int64_t e = 0;
    for (std::int64_t s = 0; s < c.samples; ++s)
      for (std::int64_t oy = 0; oy < c.g.rows.out; ++oy)
        for (std::int64_t ox = 0; ox < c.g.cols.out; ++ox)
          // columns in HWIO kernel order: (row tap, col tap, channel)
          for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
            for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx)
              for (std::int64_t ch = 0; ch < c.g.channels; ++ch, ++e) {
                const std::int64_t pr = oy * c.g.rows.stride + ky * c.g.rows.dilation;
                const std::int64_t pq = ox * c.g.cols.stride + kx * c.g.cols.dilation;
                ASSERT_EQ(im2col_element(c.g, x.data(), e), p.at(s, pr, pq, ch));
                ASSERT_EQ(im2col_source(c.g, Cell{0, oy, ox}, e % patch) >= 0,
                          p.is_real(s, pr, pq) != 0);
              }
    EXPECT_EQ(e, output_pixels(c) * patch);
  }
}

// col2im (a gather) against the scatter of the im2col matrix's gradient into the padded image.
TEST(WindowMath, Col2imGatherEqualsTheScatter) {
  std::mt19937 rng(2);
  for (const Case& c : cases(true, 12, 400)) {
    const std::int64_t patch = patch_size(c.g);
    const std::vector<float> dcols =
        small_integers(static_cast<std::size_t>(output_pixels(c) * patch), rng, -9, 9);
    Padded p = pad(c, std::vector<float>(input_count(c), 0.0f), 0.0f);
    std::int64_t e = 0;
    for (std::int64_t s = 0; s < c.samples; ++s)
      for (std::int64_t oy = 0; oy < c.g.rows.out; ++oy)
        for (std::int64_t ox = 0; ox < c.g.cols.out; ++ox)
          for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
            for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx)
              for (std::int64_t ch = 0; ch < c.g.channels; ++ch, ++e) {
                const std::int64_t pr = oy * c.g.rows.stride + ky * c.g.rows.dilation;
                const std::int64_t pq = ox * c.g.cols.stride + kx * c.g.cols.dilation;
                p.values[((s * p.rows + pr) * p.cols + pq) * p.channels + ch] += dcols[e];
              }
    for (std::int64_t i = 0; i < input_count(c); ++i) {
      const std::int64_t ch = i % c.g.channels;
      const std::int64_t q = (i / c.g.channels) % c.g.cols.in;
      const std::int64_t r = (i / (c.g.channels * c.g.cols.in)) % c.g.rows.in;
      const std::int64_t s = i / (c.g.channels * c.g.cols.in * c.g.rows.in);
      ASSERT_EQ(col2im_element(c.g, dcols.data(), i),
                p.at(s, r + c.g.rows.pad_before, q + c.g.cols.pad_before, ch));
    }
  }
}

// The convolution through im2col equals a direct convolution over the padded image.
TEST(WindowMath, Im2colTimesKernelIsTheConvolution) {
  std::mt19937 rng(3);
  for (const Case& c : cases(true, 13, 150)) {
    const std::int64_t filters = 2, patch = patch_size(c.g);
    const std::vector<float> x = small_integers(input_count(c), rng, -5, 5);
    const std::vector<float> kernel =
        small_integers(static_cast<std::size_t>(patch * filters), rng, -3, 3);  // HWIO
    const Padded p = pad(c, x, 0.0f);
    for (std::int64_t row = 0; row < output_pixels(c); ++row) {
      const std::int64_t ox = row % c.g.cols.out, oy = (row / c.g.cols.out) % c.g.rows.out;
      const std::int64_t s = row / (c.g.cols.out * c.g.rows.out);
      for (std::int64_t f = 0; f < filters; ++f) {
        float gemm = 0, direct = 0;
        for (std::int64_t j = 0; j < patch; ++j)
          gemm += im2col_element(c.g, x.data(), row * patch + j) * kernel[j * filters + f];
        for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
          for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx)
            for (std::int64_t ch = 0; ch < c.g.channels; ++ch)
              direct += p.at(s, oy * c.g.rows.stride + ky * c.g.rows.dilation,
                             ox * c.g.cols.stride + kx * c.g.cols.dilation, ch) *
                        kernel[((ky * c.g.cols.kernel + kx) * c.g.channels + ch) * filters + f];
        ASSERT_EQ(gemm, direct);
      }
    }
  }
}

// ---- pooling
// -------------------------------------------------------------------------------------

// oneDNN's max pooling (the CPU backend): from the lowest float at tap (0, 0), real cells in tap
// order, strictly greater wins; the gradient goes to the winner when it is a real cell.
TEST(WindowMath, MaxPoolingAsOneDnn) {
  std::mt19937 rng(4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : cases(false, 14, 500)) {
    // few distinct values: many ties; some NaN and -inf
    std::vector<float> x = small_integers(input_count(c), rng, -2, 2);
    for (float& v : x) {
      const int r = std::uniform_int_distribution<int>(0, 9)(rng);
      if (r == 0) v = nan;
      if (r == 1) v = -inf;
    }
    const Padded p = pad(c, x, nan);
    const std::int64_t outputs = output_pixels(c) * c.g.channels;
    std::vector<std::int32_t> argmax(static_cast<std::size_t>(outputs));
    std::vector<float> dy = small_integers(static_cast<std::size_t>(outputs), rng, 1, 9);
    std::vector<float> dx_ref(static_cast<std::size_t>(input_count(c)), 0.0f);
    std::int64_t e = 0;
    for (std::int64_t s = 0; s < c.samples; ++s)
      for (std::int64_t oy = 0; oy < c.g.rows.out; ++oy)
        for (std::int64_t ox = 0; ox < c.g.cols.out; ++ox)
          for (std::int64_t ch = 0; ch < c.g.channels; ++ch, ++e) {
            float best = kLowest;
            std::int64_t win_r = oy * c.g.rows.stride, win_q = ox * c.g.cols.stride;
            for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
              for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx) {
                const std::int64_t pr = oy * c.g.rows.stride + ky, pq = ox * c.g.cols.stride + kx;
                if (!p.is_real(s, pr, pq)) continue;
                if (p.at(s, pr, pq, ch) > best) {
                  best = p.at(s, pr, pq, ch);
                  win_r = pr;
                  win_q = pq;
                }
              }
            ASSERT_TRUE(same_bits(max_pool_element(c.g, x.data(), e, &argmax[e]), best));
            if (p.is_real(s, win_r, win_q)) {
              const std::int64_t r = win_r - c.g.rows.pad_before, q = win_q - c.g.cols.pad_before;
              ASSERT_EQ(argmax[e], r * c.g.cols.in + q);
              dx_ref[((s * c.g.rows.in + r) * c.g.cols.in + q) * c.g.channels + ch] += dy[e];
            } else {
              ASSERT_EQ(argmax[e], -1);
            }
          }
    for (std::int64_t i = 0; i < input_count(c); ++i)
      ASSERT_TRUE(same_bits(max_pool_grad_element(c.g, dy.data(), argmax.data(), i), dx_ref[i]));
  }
}

// Average pooling over the real cells only (Keras' "same"), bit for bit in tap order; the
// gradient spreads dy / count over the window's real cells, outputs in ascending order.
TEST(WindowMath, AveragePoolingExcludesPadding) {
  std::mt19937 rng(5);
  for (const Case& c : cases(false, 15, 500)) {
    std::vector<float> x(static_cast<std::size_t>(input_count(c)));
    for (float& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    const Padded p = pad(c, x, 0.0f);
    const std::int64_t outputs = output_pixels(c) * c.g.channels;
    std::vector<float> dy(static_cast<std::size_t>(outputs));
    for (float& v : dy) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    std::vector<float> dx_ref(static_cast<std::size_t>(input_count(c)), 0.0f);
    std::int64_t e = 0;
    for (std::int64_t s = 0; s < c.samples; ++s)
      for (std::int64_t oy = 0; oy < c.g.rows.out; ++oy)
        for (std::int64_t ox = 0; ox < c.g.cols.out; ++ox)
          for (std::int64_t ch = 0; ch < c.g.channels; ++ch, ++e) {
            float sum = 0.0f;
            std::int64_t count = 0;
            for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
              for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx) {
                const std::int64_t pr = oy * c.g.rows.stride + ky, pq = ox * c.g.cols.stride + kx;
                if (!p.is_real(s, pr, pq)) continue;
                sum += p.at(s, pr, pq, ch);
                ++count;
              }
            ASSERT_GT(count, 0);
            ASSERT_EQ(pool_cells(c.g, Cell{0, oy, ox}), count);
            ASSERT_TRUE(
                same_bits(avg_pool_element(c.g, x.data(), e), sum / static_cast<float>(count)));
            for (std::int64_t ky = 0; ky < c.g.rows.kernel; ++ky)
              for (std::int64_t kx = 0; kx < c.g.cols.kernel; ++kx) {
                const std::int64_t pr = oy * c.g.rows.stride + ky, pq = ox * c.g.cols.stride + kx;
                if (!p.is_real(s, pr, pq)) continue;
                const std::int64_t r = pr - c.g.rows.pad_before, q = pq - c.g.cols.pad_before;
                dx_ref[((s * c.g.rows.in + r) * c.g.cols.in + q) * c.g.channels + ch] +=
                    dy[e] / static_cast<float>(count);
              }
          }
    for (std::int64_t i = 0; i < input_count(c); ++i)
      ASSERT_TRUE(same_bits(avg_pool_grad_element(c.g, dy.data(), i), dx_ref[i]));
  }
}

// ---- against the CPU layers
// ----------------------------------------------------------------------

Tensor random_tensor(const Shape& shape, std::mt19937& rng, bool integers) {
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.size(); ++i)
    t[i] = integers ? static_cast<float>(std::uniform_int_distribution<int>(-2, 2)(rng))
                    : std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  return t;
}

// Max pooling of values with many ties, and average pooling, forward and input gradient, equal
// to nn::Pooling2D (oneDNN) bit for bit: the same winner among equal maxima, the same cells left
// out of "same" averages.
TEST(WindowMath, PoolingEqualsTheCpuLayer) {
  std::mt19937 rng(6);
  for (const Case& c : cases(false, 16, 150))
    for (nn::PoolKind kind : {nn::PoolKind::max, nn::PoolKind::average}) {
      nn::Pooling2DOptions o;
      o.kind = kind;
      o.pool_size = {c.g.rows.kernel, c.g.cols.kernel};
      o.strides = {c.g.rows.stride, c.g.cols.stride};
      o.padding = c.padding;
      nn::Pooling2D pool("pool", o);
      Rng init(0);
      ASSERT_EQ(pool.build({c.g.rows.in, c.g.cols.in, c.g.channels}, init),
                (Shape{c.g.rows.out, c.g.cols.out, c.g.channels}));
      const bool max = kind == nn::PoolKind::max;
      Tensor x = random_tensor({c.samples, c.g.rows.in, c.g.cols.in, c.g.channels}, rng, max);
      if (max)  // some NaN and -inf: neither wins a max
        for (std::int64_t i = 0; i < x.size(); ++i) {
          const int r = std::uniform_int_distribution<int>(0, 9)(rng);
          if (r == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
          if (r == 1) x[i] = -std::numeric_limits<float>::infinity();
        }
      const Tensor y = pool.forward(x, true);
      std::vector<std::int32_t> argmax(static_cast<std::size_t>(y.size()));
      for (std::int64_t e = 0; e < y.size(); ++e) {
        const float v = max ? max_pool_element(c.g, x.data(), e, &argmax[e])
                            : avg_pool_element(c.g, x.data(), e);
        ASSERT_TRUE(same_bits(v, y[e])) << e << ": " << v << " vs " << y[e];
      }
      // integer gradients: their sums are exact in any order
      Tensor dy(y.shape());
      for (std::int64_t i = 0; i < dy.size(); ++i)
        dy[i] = static_cast<float>(std::uniform_int_distribution<int>(1, 9)(rng));
      const Tensor dx = pool.backward(dy, true);
      for (std::int64_t i = 0; i < dx.size(); ++i) {
        const float v = max ? max_pool_grad_element(c.g, dy.data(), argmax.data(), i)
                            : avg_pool_grad_element(c.g, dy.data(), i);
        if (max)
          ASSERT_TRUE(same_bits(v, dx[i])) << i << ": " << v << " vs " << dx[i];
        else
          ASSERT_NEAR(v, dx[i], 1e-5f * (1.0f + std::fabs(dx[i]))) << i;
      }
    }
}

// Conv2D as im2col + GEMM, its kernel gradient im2col^T dz and input gradient col2im(dz K^T)
// (products in double here; cuBLASLt does them on the device) equal nn::Conv2D (oneDNN).
TEST(WindowMath, Im2colGemmEqualsTheCpuConv2D) {
  std::mt19937 rng(7);
  const std::int64_t filters = 3;
  for (const Case& c : cases(true, 17, 80)) {
    nn::Conv2DOptions o;
    o.filters = filters;
    o.kernel_size = {c.g.rows.kernel, c.g.cols.kernel};
    o.strides = {c.g.rows.stride, c.g.cols.stride};
    o.padding = c.padding;
    o.dilation_rate = {c.g.rows.dilation, c.g.cols.dilation};
    nn::Conv2D conv("conv", o);
    Rng init(0);
    ASSERT_EQ(conv.build({c.g.rows.in, c.g.cols.in, c.g.channels}, init),
              (Shape{c.g.rows.out, c.g.cols.out, filters}));
    const std::vector<Parameter*> params = conv.parameters();
    ASSERT_EQ(params.size(), 2u);
    Tensor& kernel = params[0]->value;  // HWIO: a (kh*kw*in) x filters row-major matrix
    Tensor& bias = params[1]->value;
    kernel = random_tensor(kernel.shape(), rng, false);
    bias = random_tensor(bias.shape(), rng, false);
    const Tensor x = random_tensor({c.samples, c.g.rows.in, c.g.cols.in, c.g.channels}, rng, false);
    const Tensor y = conv.forward(x, true);
    const std::int64_t patch = patch_size(c.g), rows = output_pixels(c);
    ASSERT_EQ(y.size(), rows * filters);
    std::vector<float> cols(static_cast<std::size_t>(rows * patch));
    for (std::int64_t e = 0; e < rows * patch; ++e) cols[e] = im2col_element(c.g, x.data(), e);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < filters; ++f) {
        double z = bias[f];
        for (std::int64_t j = 0; j < patch; ++j)
          z += static_cast<double>(cols[r * patch + j]) * kernel[j * filters + f];
        ASSERT_NEAR(z, y[r * filters + f], 1e-5 * (1 + std::fabs(z)));
      }

    const Tensor dy = random_tensor(y.shape(), rng, false);
    const Tensor dx = conv.backward(dy, true);
    for (std::int64_t j = 0; j < patch; ++j)
      for (std::int64_t f = 0; f < filters; ++f) {
        double g = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          g += static_cast<double>(cols[r * patch + j]) * dy[r * filters + f];
        ASSERT_NEAR(g, params[0]->grad[j * filters + f], 1e-5 * (1 + std::fabs(g)));
      }
    for (std::int64_t f = 0; f < filters; ++f) {
      double g = 0;
      for (std::int64_t r = 0; r < rows; ++r) g += dy[r * filters + f];
      ASSERT_NEAR(g, params[1]->grad[f], 1e-5 * (1 + std::fabs(g)));
    }
    std::vector<float> dcols(static_cast<std::size_t>(rows * patch));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < patch; ++j) {
        double d = 0;
        for (std::int64_t f = 0; f < filters; ++f)
          d += static_cast<double>(dy[r * filters + f]) * kernel[j * filters + f];
        dcols[r * patch + j] = static_cast<float>(d);
      }
    ASSERT_EQ(dx.size(), input_count(c));
    for (std::int64_t i = 0; i < dx.size(); ++i) {
      const float v = col2im_element(c.g, dcols.data(), i);
      ASSERT_NEAR(v, dx[i], 1e-5f * (1.0f + std::fabs(v))) << i;
    }
  }
}

// The direct grouped convolution (the CUDA backend's groups > 1) against the CPU layer
// nn::Conv2D with groups (oneDNN's grouped convolution): two groups of each case's channels, and
// depthwise (a group per channel, two filters each).
TEST(WindowMath, GroupedConvolutionEqualsTheCpuConv2D) {
  std::mt19937 rng(11);
  for (const Case& base : cases(true, 23, 60)) {
    for (const bool depthwise : {false, true}) {
      Case c = base;
      c.g.channels = base.g.channels * 2;
      const std::int64_t groups = depthwise ? c.g.channels : 2;
      const std::int64_t filters = depthwise ? c.g.channels * 2 : 4;
      nn::Conv2DOptions o;
      o.filters = filters;
      o.groups = groups;
      o.kernel_size = {c.g.rows.kernel, c.g.cols.kernel};
      o.strides = {c.g.rows.stride, c.g.cols.stride};
      o.padding = c.padding;
      o.dilation_rate = {c.g.rows.dilation, c.g.cols.dilation};
      nn::Conv2D conv("conv", o);
      Rng init(0);
      ASSERT_EQ(conv.build({c.g.rows.in, c.g.cols.in, c.g.channels}, init),
                (Shape{c.g.rows.out, c.g.cols.out, filters}));
      const std::vector<Parameter*> params = conv.parameters();
      Tensor& kernel = params[0]->value;  // (kh, kw, channels / groups, filters)
      ASSERT_EQ(kernel.shape(), (Shape{c.g.rows.kernel, c.g.cols.kernel, c.g.channels / groups,
                                       filters}));
      kernel = random_tensor(kernel.shape(), rng, false);
      params[1]->value = random_tensor(params[1]->value.shape(), rng, false);
      const Tensor x =
          random_tensor({c.samples, c.g.rows.in, c.g.cols.in, c.g.channels}, rng, false);
      const Tensor y = conv.forward(x, true).clone();
      const std::int64_t rows = output_pixels(c);
      for (std::int64_t e = 0; e < rows * filters; ++e) {
        const float v = grouped_conv_output(c.g, filters, groups, x.data(), kernel.data(), e) +
                        params[1]->value[e % filters];
        ASSERT_NEAR(v, y[e], 1e-5f * (1.0f + std::fabs(v))) << e;
      }
      const Tensor dy = random_tensor(y.shape(), rng, false);
      const Tensor dx = conv.backward(dy, true).clone();
      for (std::int64_t e = 0; e < dx.size(); ++e) {
        const float v = grouped_conv_input_grad(c.g, filters, groups, dy.data(), kernel.data(), e);
        ASSERT_NEAR(v, dx[e], 1e-5f * (1.0f + std::fabs(v))) << e;
      }
      for (std::int64_t w = 0; w < kernel.size(); ++w) {
        double g = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          g += grouped_conv_kernel_term(c.g, filters, groups, x.data(), dy.data(), w, r);
        ASSERT_NEAR(g, params[0]->grad[w], 1e-5 * (1 + std::fabs(g))) << w;
      }
    }
  }
}

// ---- Volumes: the same functions with a depth axis, against the CPU layers (oneDNN's 3-D) ----

std::vector<Case> volume_cases(bool dilate, std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> out;
  for (Case c : cases(dilate, seed + 1000, count)) {
    c.g.depth = axis(pick(1, 6), pick(1, 3), pick(1, 2), dilate ? pick(1, 2) : 1, c.padding);
    c.g.volume = true;
    if (c.g.depth.out > 0) out.push_back(c);
  }
  return out;
}

Shape volume_input(const Case& c) {
  return {c.samples, c.g.depth.in, c.g.rows.in, c.g.cols.in, c.g.channels};
}

// Conv3D (groups 1 and 2) and the 3-D pooling of nn (oneDNN's NDHWC primitives on the CPU)
// against the index math the CUDA kernels run: im2col + GEMM and the col2im gather, the direct
// grouped convolution, max pooling (ties, NaN) and average pooling with their gradients.
TEST(WindowMath, VolumesEqualTheCpuLayers) {
  std::mt19937 rng(31);
  for (Case c : volume_cases(true, 41, 40)) {
    c.g.channels *= 2;
    for (const std::int64_t groups : {1, 2}) {
      const std::int64_t filters = 4;
      nn::Conv2DOptions o;
      o.filters = filters;
      o.groups = groups;
      o.kernel_size = {c.g.rows.kernel, c.g.cols.kernel};
      o.strides = {c.g.rows.stride, c.g.cols.stride};
      o.dilation_rate = {c.g.rows.dilation, c.g.cols.dilation};
      o.depth = nn::DepthWindow{c.g.depth.kernel, c.g.depth.stride, c.g.depth.dilation};
      o.padding = c.padding;
      o.use_bias = false;
      nn::Conv3D conv("conv", o);
      Rng init(0);
      ASSERT_EQ(conv.build({c.g.depth.in, c.g.rows.in, c.g.cols.in, c.g.channels}, init),
                (Shape{c.g.depth.out, c.g.rows.out, c.g.cols.out, filters}));
      Tensor& kernel = conv.parameters()[0]->value;  // (kd, kh, kw, in / groups, filters)
      kernel = random_tensor(kernel.shape(), rng, false);
      const Tensor x = random_tensor(volume_input(c), rng, false);
      const Tensor y = conv.forward(x, true).clone();
      const std::int64_t rows = c.samples * output_cells(c.g), patch = patch_size(c.g);
      ASSERT_EQ(y.size(), rows * filters);
      std::vector<float> cols(static_cast<std::size_t>(rows * patch));
      for (std::int64_t e = 0; e < rows * patch; ++e) cols[e] = im2col_element(c.g, x.data(), e);
      for (std::int64_t e = 0; e < y.size(); ++e) {
        double z = grouped_conv_output(c.g, filters, groups, x.data(), kernel.data(), e);
        if (groups == 1) {  // the im2col row times the kernel's column
          double gemm = 0;
          for (std::int64_t j = 0; j < patch; ++j)
            gemm += static_cast<double>(cols[e / filters * patch + j]) *
                    kernel[j * filters + e % filters];
          ASSERT_NEAR(gemm, z, 1e-5 * (1 + std::fabs(gemm))) << e;
        }
        ASSERT_NEAR(z, y[e], 1e-5 * (1 + std::fabs(z))) << e;
      }
      const Tensor dy = random_tensor(y.shape(), rng, false);
      const Tensor dx = conv.backward(dy, true).clone();
      std::vector<float> dcols(static_cast<std::size_t>(rows * patch));
      for (std::int64_t r = 0; r < rows && groups == 1; ++r)
        for (std::int64_t j = 0; j < patch; ++j) {
          double d = 0;
          for (std::int64_t f = 0; f < filters; ++f)
            d += static_cast<double>(dy[r * filters + f]) * kernel[j * filters + f];
          dcols[r * patch + j] = static_cast<float>(d);
        }
      for (std::int64_t i = 0; i < dx.size(); ++i) {
        const float v = grouped_conv_input_grad(c.g, filters, groups, dy.data(), kernel.data(), i);
        ASSERT_NEAR(v, dx[i], 1e-5f * (1.0f + std::fabs(v))) << i;
        if (groups == 1)
          ASSERT_NEAR(col2im_element(c.g, dcols.data(), i), v, 1e-5f * (1.0f + std::fabs(v)));
      }
      for (std::int64_t w = 0; w < kernel.size(); ++w) {
        double g = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          g += grouped_conv_kernel_term(c.g, filters, groups, x.data(), dy.data(), w, r);
        ASSERT_NEAR(g, conv.parameters()[0]->grad[w], 1e-5 * (1 + std::fabs(g))) << w;
      }
    }
  }
  for (const Case& c : volume_cases(false, 43, 60))
    for (nn::PoolKind kind : {nn::PoolKind::max, nn::PoolKind::average}) {
      nn::Pooling2DOptions o;
      o.kind = kind;
      o.pool_size = {c.g.rows.kernel, c.g.cols.kernel};
      o.strides = {c.g.rows.stride, c.g.cols.stride};
      o.depth = nn::DepthWindow{c.g.depth.kernel, c.g.depth.stride, 1};
      o.padding = c.padding;
      nn::Pooling2D pool("pool", o);
      Rng init(0);
      ASSERT_EQ(pool.build({c.g.depth.in, c.g.rows.in, c.g.cols.in, c.g.channels}, init),
                (Shape{c.g.depth.out, c.g.rows.out, c.g.cols.out, c.g.channels}));
      const bool max = kind == nn::PoolKind::max;
      Tensor x = random_tensor(volume_input(c), rng, max);
      if (max)
        for (std::int64_t i = 0; i < x.size(); i += 7)
          x[i] = std::numeric_limits<float>::quiet_NaN();
      const Tensor y = pool.forward(x, true).clone();
      std::vector<std::int32_t> argmax(static_cast<std::size_t>(y.size()));
      for (std::int64_t e = 0; e < y.size(); ++e) {
        const float v = max ? max_pool_element(c.g, x.data(), e, &argmax[e])
                            : avg_pool_element(c.g, x.data(), e);
        if (max)
          ASSERT_TRUE(same_bits(v, y[e])) << e << ": " << v << " vs " << y[e];
        else
          ASSERT_NEAR(v, y[e], 1e-6f * (1.0f + std::fabs(v))) << e;
      }
      Tensor dy(y.shape());
      for (std::int64_t i = 0; i < dy.size(); ++i)
        dy[i] = static_cast<float>(std::uniform_int_distribution<int>(1, 9)(rng));
      const Tensor dx = pool.backward(dy, true);
      for (std::int64_t i = 0; i < dx.size(); ++i) {
        const float v = max ? max_pool_grad_element(c.g, dy.data(), argmax.data(), i)
                            : avg_pool_grad_element(c.g, dy.data(), i);
        if (max)
          ASSERT_TRUE(same_bits(v, dx[i])) << i << ": " << v << " vs " << dx[i];
        else
          ASSERT_NEAR(v, dx[i], 1e-5f * (1.0f + std::fabs(dx[i]))) << i;
      }
    }
}

}  // namespace
}  // namespace tandem::backend::window
