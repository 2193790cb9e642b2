// bf16 products on the CPU backend: the rounding to bfloat16 against hand-computed bits, and
// GEMMs and convolutions against a double-precision computation on operands rounded by an
// independent rounding (frexp/nearbyint/ldexp, not the bit arithmetic under test).
#include <gtest/gtest.h>
#include <dnnl.hpp>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/bfloat16.hpp"
#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/bf16_buffer.hpp"
#include "backend/cpu/bf16_rounding.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/ops.hpp"
#include "tandem/rng.hpp"

namespace tandem::backend {
namespace TANDEM_TEST_FILE {

float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// x rounded to 8 significant bits, ties to even, by the C library's rounding of the scaled
// mantissa (normal numbers only, which is all the tests feed it).
double reference_bf16(float x) {
  if (x == 0.0f) return 0.0;
  int exponent = 0;
  const double mantissa = std::frexp(static_cast<double>(x), &exponent);  // [0.5, 1)
  std::fesetround(FE_TONEAREST);
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, 8)), exponent - 8);
}

TEST(Bf16Rounding, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(float_of(0x3f808000)), 0x3f80);  // 1 + 2^-8: halfway, to the even 1.0
  EXPECT_EQ(bf16_bits(float_of(0x3f818000)), 0x3f82);  // 1 + 3·2^-8: halfway, to even (up)
  EXPECT_EQ(bf16_bits(float_of(0x3f808001)), 0x3f81);  // just past halfway: up
  EXPECT_EQ(bf16_bits(float_of(0x3f807fff)), 0x3f80);  // just short of it: down
  EXPECT_EQ(bf16_bits(float_of(0xbf80c000)), 0xbf81);  // negative: the magnitude rounds
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // past the largest: inf
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  const std::uint16_t nan = bf16_bits(float_of(0x7f800001));  // a NaN whose payload is low bits
  EXPECT_TRUE(std::isnan(bf16_value(nan)));
  EXPECT_EQ(bf16_value(0x4049), 3.140625f);
  Rng rng(5);
  for (int i = 0; i < 10000; ++i) {
    const float x = static_cast<float>((rng.uniform() * 2 - 1) * std::ldexp(1.0, i % 40 - 20));
    ASSERT_EQ(static_cast<double>(round_to_bf16(x)), reference_bf16(x)) << x;
  }
}

// Values every rounding path must treat as bf16_bits does: ties both ways, NaNs with low payload
// bits, infinities, the largest float (to infinity), subnormals, zeros of both signs.
std::vector<float> awkward_values(std::size_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  const float max = std::numeric_limits<float>::max();
  std::vector<float> specials;
  for (std::uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0xbf80c000u,
                             0x7f800001u, 0xffc00001u, 0x00018000u, 0x80008000u})
    specials.push_back(float_of(bits));
  specials.insert(specials.end(), {inf, -inf, max, -max, 0.0f, -0.0f});
  // The specials first, then one in every 13 values (so that they reach every row and lane of
  // the layouts below); random magnitudes over 2^-30 .. 2^30 between.
  std::vector<float> v(specials);
  Rng rng(9);
  while (v.size() < n) {
    if (v.size() % 13 == 0) {
      v.push_back(specials[(v.size() / 13) % specials.size()]);
      continue;
    }
    v.push_back(static_cast<float>((rng.uniform() * 2 - 1) * std::ldexp(1.0, v.size() % 60 - 30)));
  }
  v.resize(n);
  return v;
}

// The two versions of the CPU's loops (avx512_copy.hpp): the one this CPU takes, and the
// baseline. On a CPU without AVX-512 both are the baseline.
const std::vector<bool>& forced_baseline() {
  static const std::vector<bool> both{false, true};
  return both;
}

// The rounded operands oneDNN's matmul reads start on a cache line, so that the 64-byte rows of
// an AMX tile never straddle two (a std::vector's block starts 16 bytes past one); a buffer that
// grows keeps that.
TEST(Bf16Rounding, BuffersStartOnACacheLine) {
  cpu::Bf16Buffer buffer;
  for (std::int64_t n : {1, 1000, 3'000'000}) {
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.grown_to(n));
    EXPECT_EQ(address % 64, 0u) << n << " values";
  }
}

// The bulk roundings (whichever loop this CPU runs, AVX-512 or not) are bf16_bits value by
// value, and the transposed one puts value (r, c) at (c, r), over sizes that leave partial
// vectors, chunks and 64 x 64 tiles.
TEST(Bf16Rounding, BulkRoundingsAreBf16BitsValueByValue) {
  const std::vector<float> values = awkward_values(200003);
  for (const bool baseline : forced_baseline()) {
    std::optional<cpu::BaselineLoopsForced> forced;
    if (baseline) forced.emplace();
    std::vector<std::uint16_t> got(values.size());
    cpu::round_to_bf16(values.data(), static_cast<std::int64_t>(values.size()), got.data());
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(got[i], bf16_bits(values[i])) << i << ": " << values[i] << " baseline " << baseline;
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{130, 71},
                                     {1, 9},
                                     {64, 64},
                                     {33, 17},
                                     {2, 16},
                                     {31, 47},
                                     {517, 300}}) {
      std::vector<std::uint16_t> t(static_cast<std::size_t>(rows * cols) + 64, 0xabcd);
      cpu::round_to_bf16_transposed(values.data(), rows, cols, t.data());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(t[static_cast<std::size_t>(c * rows + r)],
                    bf16_bits(values[static_cast<std::size_t>(r * cols + c)]))
              << rows << "x" << cols << " at " << r << ", " << c << " baseline " << baseline;
      for (std::size_t i = static_cast<std::size_t>(rows * cols); i < t.size(); ++i)
        ASSERT_EQ(t[i], 0xabcd) << rows << "x" << cols << ": written past the end, baseline "
                                << baseline;
    }
  }
}

// A K-slice of a row-major matrix rounded into a matrix of its own: value (r, c) of columns
// [c0, c1) lands at (r, c - c0).
TEST(Bf16Rounding, ColumnSlicesAreBf16BitsValueByValue) {
  const std::vector<float> values = awkward_values(130 * 71);
  const std::int64_t rows = 130, cols = 71;
  for (const bool baseline : forced_baseline()) {
    std::optional<cpu::BaselineLoopsForced> forced;
    if (baseline) forced.emplace();
    for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 71}, {5, 38}, {70, 71}}) {
      std::vector<std::uint16_t> got(static_cast<std::size_t>(rows * (c1 - c0)));
      cpu::round_columns_to_bf16(values.data(), rows, cols, c0, c1, got.data());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = c0; c < c1; ++c)
          ASSERT_EQ(got[static_cast<std::size_t>(r * (c1 - c0) + c - c0)],
                    bf16_bits(values[static_cast<std::size_t>(r * cols + c)]))
              << "columns " << c0 << ".." << c1 << " at " << r << ", " << c << " baseline "
              << baseline;
    }
  }
}

// Tandem's rounding straight into AMX's weights layout writes the bytes oneDNN's own reorder
// writes from the rounded matrix (dnnl::memory::format_tag::BA16a64b2a, padding included), from
// the matrix stored plainly (tag ab) and transposed (tag ba), at sizes with full blocks, ragged
// edges and a single value.
TEST(Bf16Rounding, AmxBlockedRoundingIsOneDnnsLayout) {
  const std::vector<float> values = awkward_values(333 * 197);
  for (const auto& [rows, cols] :
       {std::pair<std::int64_t, std::int64_t>{333, 197}, {64, 128}, {1, 1}, {33, 65}, {96, 80}}) {
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    std::vector<std::uint16_t> plain(n);
    cpu::round_to_bf16(values.data(), rows * cols, plain.data());
    const dnnl::memory::desc blocked({rows, cols}, dnnl::memory::data_type::bf16,
                                     dnnl::memory::format_tag::BA16a64b2a);
    const std::size_t blocked_values = blocked.get_size() / sizeof(std::uint16_t);
    ASSERT_EQ(blocked_values,
              static_cast<std::size_t>((cols + 63) / 64 * ((rows + 31) / 32) * 2048));
    for (const bool transposed : {false, true}) {
      std::vector<std::uint16_t> want(blocked_values, 0xffff);
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      dnnl::memory from({{rows, cols},
                         dnnl::memory::data_type::bf16,
                         transposed ? dnnl::memory::format_tag::ba : dnnl::memory::format_tag::ab},
                        engine, plain.data());
      dnnl::memory to(blocked, engine, want.data());
      dnnl::stream stream(engine);
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
      for (const bool baseline : forced_baseline()) {
        std::optional<cpu::BaselineLoopsForced> forced;
        if (baseline) forced.emplace();
        std::vector<std::uint16_t> got(blocked_values, 0xffff);
        cpu::round_to_bf16_ba16a64b2a(values.data(), rows, cols, transposed, got.data());
        for (std::size_t i = 0; i < blocked_values; ++i)
          ASSERT_EQ(got[i], want[i]) << rows << "x" << cols << " at " << i << " transposed "
                                     << transposed << " baseline " << baseline;
      }
    }
  }
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor t(shape);
  Rng rng(seed);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(rng.uniform() * 2 - 1);
  return t;
}

#define SKIP_WITHOUT_BF16()                                                             \
  if (const std::string why = cpu_precision_unavailable(Precision::bf16); !why.empty()) \
  GTEST_SKIP() << why

// Every layout of a GEMM, with the bias epilogue and with relu, and a batched product: equal to
// the double-precision product of the rounded operands to float32 summation error, and not to
// the float32 product (the test would pass on an fp32 GEMM otherwise).
TEST(Bf16Products, GemmIsTheProductOfTheRoundedOperandsSummedInFloat32) {
  SKIP_WITHOUT_BF16();
  Backend& bf16 = cpu_backend(Precision::bf16);
  const std::int64_t m = 37, n = 29, k = 300;
  for (int layout = 0; layout < 4; ++layout)
    for (GemmEpilogue epilogue :
         {GemmEpilogue::none, GemmEpilogue::bias, GemmEpilogue::relu_bias}) {
      const bool ta = layout & 1, tb = layout & 2;
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1 + layout);
      const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 11 + layout);
      const Tensor bias = random_tensor({n}, 21);
      Tensor c({m, n});
      bf16.gemm({ta, tb, m, n, k, epilogue}, a, b, &bias, c);
      double worst = 0, worst_fp32 = 0;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double rounded = epilogue == GemmEpilogue::none ? 0.0 : bias[j];
          double exact = rounded;
          for (std::int64_t q = 0; q < k; ++q) {
            const float av = ta ? a[q * m + i] : a[i * k + q];
            const float bv = tb ? b[j * k + q] : b[q * n + j];
            rounded += reference_bf16(av) * reference_bf16(bv);
            exact += static_cast<double>(av) * bv;
          }
          if (epilogue == GemmEpilogue::relu_bias) {
            rounded = std::max(rounded, 0.0);
            exact = std::max(exact, 0.0);
          }
          worst = std::max(worst, std::fabs(c[i * n + j] - rounded));
          worst_fp32 = std::max(worst_fp32, std::fabs(c[i * n + j] - exact));
        }
      EXPECT_LE(worst, 2e-5) << "layout " << layout;
      EXPECT_GT(worst_fp32, 1e-3) << "layout " << layout;
    }
  const std::int64_t batch = 3;
  const Tensor a = random_tensor({batch, m, k}, 31), b = random_tensor({batch, n, k}, 32);
  Tensor c({batch, m, n});
  bf16.gemm({false, true, m, n, k, GemmEpilogue::none, batch}, a, b, nullptr, c);
  for (std::int64_t s = 0; s < batch; ++s)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t q = 0; q < k; ++q)
          sum += reference_bf16(a[(s * m + i) * k + q]) * reference_bf16(b[(s * n + j) * k + q]);
        ASSERT_NEAR(c[(s * m + i) * n + j], sum, 2e-5) << s << " " << i << " " << j;
      }
}

// What a Dense layer's three products must give in bf16: double sums of rounded operands.
struct DenseReference {
  std::vector<double> y, y_exact, d_kernel, dx;
};

DenseReference dense_reference(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                               const Tensor& dy, std::int64_t in, std::int64_t units,
                               GemmEpilogue epilogue) {
  const std::int64_t rows = x.size() / in;
  DenseReference r;
  r.y.assign(static_cast<std::size_t>(rows * units), 0.0);
  r.y_exact = r.y;
  r.d_kernel.assign(static_cast<std::size_t>(in * units), 0.0);
  r.dx.assign(static_cast<std::size_t>(rows * in), 0.0);
  // The operands rounded once each (reference_bf16 is slow).
  const auto rounded = [](const Tensor& t) {
    std::vector<double> v(static_cast<std::size_t>(t.size()));
    for (std::int64_t i = 0; i < t.size(); ++i)
      v[static_cast<std::size_t>(i)] = reference_bf16(t[i]);
    return v;
  };
  const std::vector<double> xl = rounded(x), kl = rounded(kernel), gl = rounded(dy);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < units; ++j) {
      const auto at = static_cast<std::size_t>(i * units + j);
      double low = epilogue == GemmEpilogue::none ? 0.0 : bias[j], exact = low;
      const double g = gl[at];
      for (std::int64_t q = 0; q < in; ++q) {
        const auto xi = static_cast<std::size_t>(i * in + q),
                   ki = static_cast<std::size_t>(q * units + j);
        low += xl[xi] * kl[ki];
        exact += static_cast<double>(x[i * in + q]) * kernel[q * units + j];
        r.d_kernel[ki] += xl[xi] * g;
        r.dx[xi] += g * kl[ki];
      }
      const bool relu = epilogue == GemmEpilogue::relu_bias;
      r.y[at] = relu ? std::max(low, 0.0) : low;
      r.y_exact[at] = relu ? std::max(exact, 0.0) : exact;
    }
  return r;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(static_cast<std::size_t>(got.size()), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[static_cast<std::int64_t>(i)], want[i], 2e-5) << what << " " << i;
}

// Dense's products (DenseProducts) in bf16: each of the three is the product of the rounded
// operands summed in float32, x of rank 3 as Dense sees it, for every epilogue; the forward
// differs from the float32 product (it would pass on an fp32 GEMM otherwise). One products object
// of 333 -> 197 takes a batch of 257 rows, whose products (over 32 MFLOP) run on the thread team
// with packed operands padded to oneDNN's blocks, then one of 39 rows, planned afresh on one
// thread. One of 4200 -> 40 sums its forward in two slices (2112 and 2088 inputs: the bias with
// the first, the second added to it); its kernel is scaled by 4 / sqrt(in), as initializers scale
// a wide layer's, which keeps its sums as small as the first case's (float32's rounding of a sum
// of 4200 terms near 55 would exceed the tolerance by itself).
TEST(Bf16Products, DenseProductsAreTheProductsOfTheRoundedOperands) {
  SKIP_WITHOUT_BF16();
  struct Case {
    std::int64_t in, units;
    std::vector<Shape> batches;
    float kernel_scale;
  };
  for (const Case& c : {Case{333, 197, {{257}, {3, 13}}, 1.0f},
                        Case{4200, 40, {{30}}, 4.0f / std::sqrt(4200.0f)}}) {
    Tensor kernel = random_tensor({c.in, c.units}, 62);
    for (std::int64_t i = 0; i < kernel.size(); ++i) kernel[i] *= c.kernel_scale;
    const Tensor bias = random_tensor({c.units}, 63);
    for (GemmEpilogue epilogue :
         {GemmEpilogue::none, GemmEpilogue::bias, GemmEpilogue::relu_bias}) {
      auto products = cpu_backend(Precision::bf16).dense_products({c.in, c.units, epilogue});
      for (const Shape& rows : c.batches) {
        Shape x_shape = rows, y_shape = rows;
        x_shape.push_back(c.in);
        y_shape.push_back(c.units);
        const Tensor x = random_tensor(x_shape, 61), dy = random_tensor(y_shape, 64);
        const DenseReference want = dense_reference(x, kernel, bias, dy, c.in, c.units, epilogue);
        Tensor y(y_shape), d_kernel({c.in, c.units}), dx(x.shape());
        products->forward(x, kernel, &bias, y);
        products->backward(x, dy, kernel, &d_kernel, &dx);
        SCOPED_TRACE(shape_to_string(x.shape()));
        expect_near_all(y, want.y, "y");
        expect_near_all(d_kernel, want.d_kernel, "d_kernel");
        expect_near_all(dx, want.dx, "dx");
        double off_fp32 = 0;
        for (std::size_t i = 0; i < want.y.size(); ++i)
          off_fp32 =
              std::max(off_fp32, std::fabs(y[static_cast<std::int64_t>(i)] - want.y_exact[i]));
        EXPECT_GT(off_fp32, 1e-3);
      }
    }
  }
}

// A shard of no rows (a meta-model's replica past a small batch's end): the forward writes
// nothing and the kernel gradient is an empty sum, zero.
TEST(Bf16Products, DenseProductsOfAnEmptyShard) {
  SKIP_WITHOUT_BF16();
  auto products = cpu_backend(Precision::bf16).dense_products({8, 4, GemmEpilogue::bias});
  const Tensor x({0, 8}), kernel = random_tensor({8, 4}, 92), bias = random_tensor({4}, 93);
  const Tensor dy({0, 4});
  Tensor y({0, 4}), d_kernel = random_tensor({8, 4}, 94), dx({0, 8});
  products->forward(x, kernel, &bias, y);
  products->backward(x, dy, kernel, &d_kernel, &dx);
  for (std::int64_t i = 0; i < d_kernel.size(); ++i) ASSERT_EQ(d_kernel[i], 0.0f) << i;
}

// The roundings a forward keeps serve only its own operands: a forward always reads its kernel
// afresh (an optimizer step changes it in place between steps), and a backward given other
// tensors than the last forward's — or called without a forward — rounds them itself.
TEST(Bf16Products, DenseProductsReadChangedOrOtherOperandsAfresh) {
  SKIP_WITHOUT_BF16();
  const std::int64_t in = 64, units = 16, rows = 8;
  const Tensor x1 = random_tensor({rows, in}, 71), x2 = random_tensor({rows, in}, 72);
  Tensor kernel = random_tensor({in, units}, 73);
  const Tensor other_kernel = random_tensor({in, units}, 74), dy = random_tensor({rows, units}, 75);
  const Tensor bias = random_tensor({units}, 76);
  auto products = cpu_backend(Precision::bf16).dense_products({in, units, GemmEpilogue::bias});
  Tensor y({rows, units}), d_kernel({in, units}), dx({rows, in});

  products->backward(x1, dy, kernel, &d_kernel, &dx);  // no forward yet
  DenseReference want = dense_reference(x1, kernel, bias, dy, in, units, GemmEpilogue::bias);
  expect_near_all(d_kernel, want.d_kernel, "d_kernel before any forward");
  expect_near_all(dx, want.dx, "dx before any forward");

  products->forward(x1, kernel, &bias, y);
  for (std::int64_t i = 0; i < kernel.size(); ++i) kernel[i] *= -0.5f;  // a step, in place
  products->forward(x1, kernel, &bias, y);
  want = dense_reference(x1, kernel, bias, dy, in, units, GemmEpilogue::bias);
  expect_near_all(y, want.y, "y after the kernel changed in place");

  products->backward(x2, dy, other_kernel, &d_kernel, &dx);  // not the forward's tensors
  want = dense_reference(x2, other_kernel, bias, dy, in, units, GemmEpilogue::bias);
  expect_near_all(d_kernel, want.d_kernel, "d_kernel of another x");
  expect_near_all(dx, want.dx, "dx of another kernel");
}

// Operands that do not fit the desc are a caller's bug, named before anything is read.
TEST(Bf16Products, DenseProductsRefuseOperandsThatDoNotFit) {
  SKIP_WITHOUT_BF16();
  auto products = cpu_backend(Precision::bf16).dense_products({8, 4, GemmEpilogue::bias});
  const Tensor x = random_tensor({3, 8}, 91), kernel = random_tensor({8, 4}, 92);
  const Tensor bias = random_tensor({4}, 93), dy = random_tensor({3, 4}, 94);
  Tensor y({3, 4}), short_y({2, 4}), d_kernel({8, 4}), dx({3, 8}), wrong_dx({3, 7});
  EXPECT_THROW(products->forward(random_tensor({3, 7}, 95), kernel, &bias, y), std::logic_error);
  EXPECT_THROW(products->forward(x, random_tensor({8, 5}, 96), &bias, y), std::logic_error);
  EXPECT_THROW(products->forward(x, kernel, &bias, short_y), std::logic_error);
  EXPECT_THROW(products->forward(x, kernel, nullptr, y), std::logic_error);
  EXPECT_THROW(products->backward(x, random_tensor({2, 4}, 97), kernel, &d_kernel, &dx),
               std::logic_error);
  EXPECT_THROW(products->backward(x, dy, kernel, &d_kernel, &wrong_dx), std::logic_error);
  products->forward(x, kernel, &bias, y);
  products->backward(x, dy, kernel, &d_kernel, &dx);
}

// The float32 backend's DenseProducts are its gemm() calls, bit for bit.
TEST(CpuDenseProducts, Fp32AreTheGemmsBitForBit) {
  Backend& fp32 = cpu_backend();
  const std::int64_t in = 40, units = 24, rows = 17;
  const Tensor x = random_tensor({rows, in}, 81), kernel = random_tensor({in, units}, 82);
  const Tensor bias = random_tensor({units}, 83), dy = random_tensor({rows, units}, 84);
  auto products = fp32.dense_products({in, units, GemmEpilogue::relu_bias});
  Tensor y({rows, units}), d_kernel({in, units}), dx({rows, in});
  products->forward(x, kernel, &bias, y);
  products->backward(x, dy, kernel, &d_kernel, &dx);
  Tensor y2({rows, units}), d_kernel2({in, units}), dx2({rows, in});
  fp32.gemm({false, false, rows, units, in, GemmEpilogue::relu_bias}, x, kernel, &bias, y2);
  fp32.gemm({true, false, in, units, rows}, x, dy, nullptr, d_kernel2);
  fp32.gemm({false, true, rows, in, units}, dy, kernel, nullptr, dx2);
  for (const auto& [a, b] : {std::pair{&y, &y2}, {&d_kernel, &d_kernel2}, {&dx, &dx2}})
    EXPECT_EQ(std::memcmp(a->data(), b->data(), static_cast<std::size_t>(a->size()) * 4), 0);
}

// A convolution, 3x3 taps, stride 1, 'same' padding, NHWC / HWIO as the layers keep them.
struct ConvCase {
  std::int64_t batch = 2, rows = 6, cols = 5, channels = 8, filters = 4, taps = 3;
  ConvolutionDesc desc() const {
    ConvolutionDesc d;
    d.label = "test conv";
    d.geometry.channels = channels;
    // 'same' with stride 1: as long as the input, padded by taps / 2 before
    d.geometry.rows = {rows, rows, taps, 1, 1, taps / 2};
    d.geometry.cols = {cols, cols, taps, 1, 1, taps / 2};
    d.filters = filters;
    d.use_bias = true;
    return d;
  }
  // Visits every (sample, output cell, filter, tap, channel) with the input index inside it.
  template <class F>
  void each_term(F f) const {
    const std::int64_t pad = taps / 2;
    for (std::int64_t s = 0; s < batch; ++s)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          for (std::int64_t o = 0; o < filters; ++o)
            for (std::int64_t kr = 0; kr < taps; ++kr)
              for (std::int64_t kc = 0; kc < taps; ++kc) {
                const std::int64_t ir = r + kr - pad, ic = c + kc - pad;
                if (ir < 0 || ir >= rows || ic < 0 || ic >= cols) continue;
                for (std::int64_t i = 0; i < channels; ++i)
                  f(static_cast<std::size_t>(((s * rows + ir) * cols + ic) * channels + i),
                    static_cast<std::size_t>(((kr * taps + kc) * channels + i) * filters + o),
                    static_cast<std::size_t>(((s * rows + r) * cols + c) * filters + o));
              }
  }
};

// Forward, backward-data and backward-weights in bf16 against double sums of rounded operands.
void expect_bf16_convolution(const ConvCase& cc) {
  auto conv = cpu_backend(Precision::bf16).convolution(cc.desc());
  const Tensor x = random_tensor({cc.batch, cc.rows, cc.cols, cc.channels}, 41);
  const Tensor kernel = random_tensor({cc.taps, cc.taps, cc.channels, cc.filters}, 42);
  const Tensor bias = random_tensor({cc.filters}, 43);
  const Tensor dy = random_tensor({cc.batch, cc.rows, cc.cols, cc.filters}, 44);
  Tensor y, dx, d_kernel(kernel.shape()), d_bias({cc.filters});
  // Backward-data first, as Conv2DTranspose's forward calls it: the kernel must be rounded for
  // it without a forward before.
  conv->backward_data(dy, kernel, dx);
  conv->forward(x, kernel, &bias, y);
  conv->backward_weights(x, dy, d_kernel, &d_bias);

  const auto doubles = [](const Tensor& t) {
    return std::vector<double>(static_cast<std::size_t>(t.size()), 0.0);
  };
  std::vector<double> want_y = doubles(y), exact_y = doubles(y), want_dx = doubles(x),
                      want_dk = doubles(kernel);
  for (std::int64_t i = 0; i < y.size(); ++i)
    want_y[static_cast<std::size_t>(i)] = exact_y[static_cast<std::size_t>(i)] =
        bias[i % cc.filters];
  cc.each_term([&](std::size_t xi, std::size_t ki, std::size_t yi) {
    const auto at = [](const Tensor& t, std::size_t i) { return t[static_cast<std::int64_t>(i)]; };
    want_y[yi] += reference_bf16(at(x, xi)) * reference_bf16(at(kernel, ki));
    exact_y[yi] += static_cast<double>(at(x, xi)) * at(kernel, ki);
    want_dx[xi] += reference_bf16(at(dy, yi)) * reference_bf16(at(kernel, ki));
    want_dk[ki] += reference_bf16(at(dy, yi)) * reference_bf16(at(x, xi));
  });
  double off_fp32 = 0;
  for (std::size_t i = 0; i < want_y.size(); ++i) {
    const float got = y[static_cast<std::int64_t>(i)];
    ASSERT_NEAR(got, want_y[i], 1e-5) << "y " << i;
    off_fp32 = std::max(off_fp32, std::fabs(got - exact_y[i]));
  }
  EXPECT_GT(off_fp32, 1e-3);
  for (std::size_t i = 0; i < want_dx.size(); ++i)
    ASSERT_NEAR(dx[static_cast<std::int64_t>(i)], want_dx[i], 1e-5) << "dx " << i;
  for (std::size_t i = 0; i < want_dk.size(); ++i)
    ASSERT_NEAR(d_kernel[static_cast<std::int64_t>(i)], want_dk[i], 1e-5) << "d_kernel " << i;
  // Both gradients in one call after a forward (Conv2D's path: x and dy rounded once) are the
  // same bits as the two calls.
  Tensor dx2, d_kernel2(kernel.shape()), d_bias2({cc.filters});
  conv->forward(x, kernel, &bias, y);
  conv->backward(x, dy, kernel, d_kernel2, &d_bias2, &dx2);
  const auto same = [](const Tensor& a, const Tensor& b) {
    return a.size() == b.size() &&
           std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * 4) == 0;
  };
  EXPECT_TRUE(same(dx2, dx));
  EXPECT_TRUE(same(d_kernel2, d_kernel));
  EXPECT_TRUE(same(d_bias2, d_bias));
  for (std::int64_t o = 0; o < cc.filters; ++o) {  // the bias gradient sums the rounded dy
    double sum = 0;
    for (std::int64_t i = o; i < dy.size(); i += cc.filters) sum += reference_bf16(dy[i]);
    EXPECT_NEAR(d_bias[o], sum, 1e-5);
  }
}

TEST(Bf16Products, ConvolutionRoundsItsOperandsAndSumsInFloat32) {
  SKIP_WITHOUT_BF16();
  expect_bf16_convolution(ConvCase{});
  // 16 channels in and out: NHWC as every other width in bf16 (float32 hands oneDNN nChw16c).
  ConvCase sixteen;
  sixteen.channels = sixteen.filters = 16;
  expect_bf16_convolution(sixteen);
}

// A model's first convolution (or one behind frozen layers) asks for no input gradient: its
// backward makes no backward-data primitive, and gives the two-call path's bits.
TEST(Bf16Products, AConvolutionsBackwardWithoutAnInputGradient) {
  SKIP_WITHOUT_BF16();
  const ConvCase cc;
  const Tensor x = random_tensor({cc.batch, cc.rows, cc.cols, cc.channels}, 61);
  const Tensor kernel = random_tensor({cc.taps, cc.taps, cc.channels, cc.filters}, 62);
  const Tensor bias = random_tensor({cc.filters}, 63);
  const Tensor dy = random_tensor({cc.batch, cc.rows, cc.cols, cc.filters}, 64);
  Tensor y, d_kernel(kernel.shape()), d_bias({cc.filters});
  Tensor d_kernel2(kernel.shape()), d_bias2({cc.filters});
  auto first = cpu_backend(Precision::bf16).convolution(cc.desc());
  first->forward(x, kernel, &bias, y);
  first->backward(x, dy, kernel, d_kernel, &d_bias, nullptr);
  auto other = cpu_backend(Precision::bf16).convolution(cc.desc());
  other->forward(x, kernel, &bias, y);
  other->backward_weights(x, dy, d_kernel2, &d_bias2);
  EXPECT_EQ(
      std::memcmp(d_kernel.data(), d_kernel2.data(), static_cast<std::size_t>(d_kernel.size()) * 4),
      0);
  EXPECT_EQ(std::memcmp(d_bias.data(), d_bias2.data(), static_cast<std::size_t>(d_bias.size()) * 4),
            0);
}

// Below 8 input channels a convolution stays in float32 (too few products per value for
// bfloat16 to pay): the bf16 backend's result is the float32 backend's, bit for bit.
TEST(Bf16Products, AConvolutionOfFewChannelsStaysInFloat32) {
  SKIP_WITHOUT_BF16();
  ConvCase cc;
  cc.channels = 7;
  const Tensor x = random_tensor({cc.batch, cc.rows, cc.cols, cc.channels}, 51);
  const Tensor kernel = random_tensor({cc.taps, cc.taps, cc.channels, cc.filters}, 52);
  const Tensor bias = random_tensor({cc.filters}, 53);
  Tensor low, full;
  cpu_backend(Precision::bf16).convolution(cc.desc())->forward(x, kernel, &bias, low);
  cpu_backend().convolution(cc.desc())->forward(x, kernel, &bias, full);
  ASSERT_EQ(low.size(), full.size());
  EXPECT_EQ(std::memcmp(low.data(), full.data(), static_cast<std::size_t>(low.size()) * 4), 0);
}

TEST(Bf16Products, Fp16HasNoCpuBackendAndSaysSo) {
  EXPECT_NE(cpu_precision_unavailable(Precision::fp16).find("CUDA"), std::string::npos);
  EXPECT_THROW(cpu_backend(Precision::fp16), std::invalid_argument);
  EXPECT_EQ(&cpu_backend(Precision::fp32), &cpu_backend());
  EXPECT_EQ(&cpu_backend(Precision::tf32), &cpu_backend());
  EXPECT_EQ(cpu_precision_unavailable(Precision::fp32), "");
}

}  // namespace
}  // namespace tandem::backend
