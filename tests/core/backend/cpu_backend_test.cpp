// The CPU backend's operations for the merging layers, attention and layer normalization,
// against hand-computed values; arguments that do not fit are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/cpu/avx512_copy.hpp"
#include "backend/ops.hpp"
#include "tandem/rng.hpp"

// From backend/cpu/parallel.hpp, which the tests do not include (its `#pragma omp` would warn).
namespace tandem::cpu {
int compute_threads();
void set_compute_threads(int threads);
}  // namespace tandem::cpu

namespace tandem::backend {
namespace TANDEM_TEST_FILE {

std::vector<float> values_of(Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

TEST(CpuBackend, AddSumsElementWiseAndMayWriteIntoAnInput) {
  Tensor a = Tensor::from_vector({2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::from_vector({2, 2}, {10, 20, 30, 40});
  Tensor out({2, 2});
  cpu_backend().add(a, b, out);
  EXPECT_EQ(values_of(out), (std::vector<float>{11, 22, 33, 44}));
  cpu_backend().add(a, b, a);
  EXPECT_EQ(values_of(a), (std::vector<float>{11, 22, 33, 44}));
  Tensor shorter({3});
  EXPECT_THROW(cpu_backend().add(b, shorter, out), std::logic_error);
}

TEST(CpuBackend, CopyColumnsMovesABlockBetweenMatricesOfOneRowCount) {
  // src: 2 rows of 3; its columns [1, 3) into columns [2, 4) of a 2 x 5 matrix of zeros.
  const Tensor src = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor dst({2, 5});
  cpu_backend().copy_columns(src, 3, 1, dst, 5, 2, 2);
  EXPECT_EQ(values_of(dst), (std::vector<float>{0, 0, 2, 3, 0, 0, 0, 5, 6, 0}));
  try {
    cpu_backend().copy_columns(src, 3, 2, dst, 5, 0, 2);  // columns [2, 4) of 3
    FAIL() << "a block beyond the source's columns must be refused";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
  Tensor three_rows({3, 5});
  EXPECT_THROW(cpu_backend().copy_columns(src, 3, 0, three_rows, 5, 0, 3), std::logic_error);
}

// Maximum/Minimum over three inputs: the winner of each element, the first on a tie, a NaN
// propagates; the gradient goes to the winner only.
TEST(CpuBackend, ExtremeUpdateKeepsTheWinnerAndRoutesItsGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x0 = Tensor::from_vector({4}, {1, 5, 2, 0});
  const Tensor x1 = Tensor::from_vector({4}, {3, 5, 1, nan});
  const Tensor x2 = Tensor::from_vector({4}, {2, 4, 7, 9});
  Tensor out({4}), winner({4});
  int i = 0;
  for (const Tensor* x : {&x0, &x1, &x2}) cpu_backend().extreme_update(true, *x, i++, out, winner);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[1], 5);
  EXPECT_EQ(out[2], 7);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(values_of(winner), (std::vector<float>{1, 0, 2, 1}));  // the tie at [1]: input 0
  const Tensor dy = Tensor::from_vector({4}, {10, 20, 30, 40});
  Tensor dx({4});
  cpu_backend().route_gradient(winner, 1, dy, dx);
  EXPECT_EQ(values_of(dx), (std::vector<float>{10, 0, 0, 40}));
  i = 0;
  for (const Tensor* x : {&x0, &x2}) cpu_backend().extreme_update(false, *x, i++, out, winner);
  EXPECT_EQ(values_of(out), (std::vector<float>{1, 4, 2, 0}));
}

TEST(CpuBackend, SubtractAndAffineAreElementWise) {
  const Tensor a = Tensor::from_vector({3}, {1, 2, 3});
  const Tensor b = Tensor::from_vector({3}, {0.5f, 4, -1});
  Tensor out({3});
  cpu_backend().subtract(a, b, out);
  EXPECT_EQ(values_of(out), (std::vector<float>{0.5f, -2, 4}));
  cpu_backend().affine(a, -2, 0.5f, out);
  EXPECT_EQ(values_of(out), (std::vector<float>{-1.5f, -3.5f, -5.5f}));
}

// A batch of products equals the products one by one.
TEST(CpuBackend, BatchedGemmIsEachProductOfTheBatch) {
  const std::int64_t batch = 5, m = 3, n = 4, k = 6;
  Tensor a({batch, m, k}), b({batch, n, k}), c({batch, m, n});
  for (std::int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 11) - 5;
  for (std::int64_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 13) - 6;
  cpu_backend().gemm({false, true, m, n, k, GemmEpilogue::none, batch}, a, b, nullptr, c);
  for (std::int64_t s = 0; s < batch; ++s)
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t q = 0; q < k; ++q)
          sum += a[(s * m + r) * k + q] * b[(s * n + j) * k + q];
        EXPECT_EQ(c[(s * m + r) * n + j], static_cast<float>(sum)) << s << " " << r << " " << j;
      }
  Tensor wrong({batch, m, n + 1});
  EXPECT_THROW(cpu_backend().gemm({false, true, m, n, k, GemmEpilogue::none, batch}, a, b, nullptr,
                                  wrong),
               std::logic_error);
}

// Softmax over the keys a mask keeps and (causal) the keys up to the query; a row with no key
// kept is what HiddenRows says.
TEST(CpuBackend, MaskedSoftmaxLeavesOutHiddenKeys) {
  // batch 1, heads 2, tq 2, tk 3; every score 0, so the kept keys share the probability.
  const Tensor scores({1, 2, 2, 3});
  const Tensor mask = Tensor::from_vector({1, 2, 3}, {1, 0, 1, 0, 0, 0});
  Tensor probs({1, 2, 2, 3});
  cpu_backend().masked_softmax({2, 2, 3, false, HiddenRows::zeros}, scores, &mask, probs);
  EXPECT_EQ(values_of(probs), (std::vector<float>{0.5f, 0, 0.5f, 0, 0, 0, 0.5f, 0, 0.5f, 0, 0, 0}));
  cpu_backend().masked_softmax({2, 2, 3, true}, scores, nullptr, probs);
  EXPECT_EQ(values_of(probs),
            (std::vector<float>{1, 0, 0, 0.5f, 0.5f, 0, 1, 0, 0, 0.5f, 0.5f, 0}));
  const Tensor short_mask({1, 2, 2});
  EXPECT_THROW(cpu_backend().masked_softmax({2, 2, 3, false}, scores, &short_mask, probs),
               std::logic_error);
  const Tensor varied =
      Tensor::from_vector({1, 2, 2, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 40, 200, -90});
  // Keras 3 without dropout: every hidden score the same large negative number, so a row with
  // every key hidden is uniform whatever its scores.
  cpu_backend().masked_softmax({2, 2, 3, false, HiddenRows::uniform}, varied, &mask, probs);
  const float third = 1.0f / 3.0f;
  std::vector<float> p = values_of(probs);
  for (int c : {3, 4, 5, 9, 10, 11}) EXPECT_EQ(p[c], third) << c;
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_FLOAT_EQ(p[0], static_cast<float>(1 / (1 + std::exp(2.0))));
  // Keras 2 adds -1e9 to hidden scores and does not mask again: a row with every key hidden is
  // the softmax of the scores less 1e9 in float (uniform for scores this small), the other rows
  // as Keras 3's (what -1e9 leaves of a hidden key underflows to 0).
  cpu_backend().masked_softmax({2, 2, 3, false, HiddenRows::keras2_additive}, varied, &mask, probs);
  p = values_of(probs);
  EXPECT_FLOAT_EQ(p[0] + p[2], 1.0f);
  EXPECT_EQ(p[1], 0.0f);
  for (int c = 3; c < 6; ++c) EXPECT_FLOAT_EQ(p[c], third) << c;
  // 40 - 1e9 and 200 - 1e9 round to other floats than -90 - 1e9 (steps of 64): not uniform.
  double expected[3], total = 0;
  for (int c = 0; c < 3; ++c)
    total += expected[c] = std::exp(static_cast<double>(static_cast<float>(varied[9 + c] - 1e9f) -
                                                        static_cast<float>(200 - 1e9f)));
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(p[9 + c], expected[c] / total, 1e-6) << c;
}

// The gradient of the masked softmax against central differences of the forward, for each
// HiddenRows: a row with every key hidden passes no gradient to its scores unless it is Keras
// 2's (whose shifted scores still move its probabilities).
TEST(CpuBackend, MaskedSoftmaxBackwardIsTheForwardsDerivative) {
  const AttentionMaskDesc base{2, 3, 4, true};  // batch 2, heads 2, tq 3, tk 4
  Tensor scores({2, 2, 3, 4}), mask({2, 3, 4}), d_probs({2, 2, 3, 4});
  for (std::int64_t i = 0; i < scores.size(); ++i) {
    scores[i] = static_cast<float>((i * 37) % 19) / 4.0f - 2.0f;
    d_probs[i] = static_cast<float>((i * 11) % 7) / 3.0f - 1.0f;
  }
  for (std::int64_t i = 0; i < mask.size(); ++i) mask[i] = (i * 5) % 3 == 0 ? 0.0f : 1.0f;
  for (std::int64_t k = 0; k < 4; ++k) mask[4 + k] = 0;  // sample 0's second query sees nothing
  // Whether row r (batch, head, query) keeps no key: none of keys 0..query unmasked.
  const auto row_hidden = [&](std::int64_t r) {
    const std::int64_t i = r % 3, b = r / 6;
    for (std::int64_t k = 0; k <= i; ++k)
      if (mask[(b * 3 + i) * 4 + k] != 0) return false;
    return true;
  };
  ASSERT_TRUE(row_hidden(1) && row_hidden(4) && !row_hidden(2));
  for (const HiddenRows hidden :
       {HiddenRows::zeros, HiddenRows::uniform, HiddenRows::keras2_additive}) {
    AttentionMaskDesc d = base;
    d.hidden_rows = hidden;
    Tensor probs(scores.shape()), d_scores(scores.shape()), plus(scores.shape()),
        minus(scores.shape());
    cpu_backend().masked_softmax(d, scores, &mask, probs);
    cpu_backend().masked_softmax_backward(d, probs, &mask, d_probs, d_scores);
    // Keras 2's hidden row shifts its scores by 1e9 in float, whose steps (64) no small
    // difference can resolve: its derivative is checked where the shift is not applied.
    for (std::int64_t i = 0; i < scores.size(); ++i) {
      const bool hidden_row = row_hidden(i / 4);
      if (hidden_row && hidden == HiddenRows::keras2_additive) continue;
      const float h = 1e-2f;
      Tensor shifted = scores.clone();
      shifted[i] = scores[i] + h;
      cpu_backend().masked_softmax(d, shifted, &mask, plus);
      shifted[i] = scores[i] - h;
      cpu_backend().masked_softmax(d, shifted, &mask, minus);
      double numeric = 0;
      for (std::int64_t j = 0; j < scores.size(); ++j)
        numeric += d_probs[j] * (static_cast<double>(plus[j]) - minus[j]) / (2.0 * h);
      EXPECT_NEAR(d_scores[i], numeric, 2e-3) << static_cast<int>(hidden) << " at " << i;
      if (hidden_row) {
        EXPECT_EQ(d_scores[i], 0.0f) << static_cast<int>(hidden) << " at " << i;
      }
    }
    if (hidden == HiddenRows::uniform) {
      EXPECT_EQ(probs[4], 0.25f);
    }
  }
  // Keras 2's hidden row has the softmax's gradient at its probabilities, which are not constant.
  AttentionMaskDesc d = base;
  d.hidden_rows = HiddenRows::keras2_additive;
  Tensor probs(scores.shape()), d_scores(scores.shape());
  cpu_backend().masked_softmax(d, scores, &mask, probs);
  cpu_backend().masked_softmax_backward(d, probs, &mask, d_probs, d_scores);
  double dot = 0;
  for (int c = 4; c < 8; ++c) dot += static_cast<double>(d_probs[c]) * probs[c];
  for (int c = 4; c < 8; ++c) EXPECT_NEAR(d_scores[c], probs[c] * (d_probs[c] - dot), 1e-6) << c;
  EXPECT_NE(d_scores[4], 0.0f);
}

TEST(CpuBackend, SwapMiddleAxesTransposesTheMiddleTwo) {
  // x (1, 2, 3, 1): x[0, b, c, 0] = 10 b + c; y (1, 3, 2, 1): y[0, c, b, 0] = x[0, b, c, 0].
  const Tensor x = Tensor::from_vector({1, 2, 3, 1}, {0, 1, 2, 10, 11, 12});
  Tensor y({1, 3, 2, 1});
  cpu_backend().swap_middle_axes(x, {1, 2, 3, 1}, y);
  EXPECT_EQ(values_of(y), (std::vector<float>{0, 10, 1, 11, 2, 12}));
}

// Layer normalization against double-precision arithmetic by hand: a row (1, 2, 3, 6) has mean
// 3 and biased variance 3.5.
TEST(CpuBackend, LayerNormNormalisesEachRow) {
  const Tensor x = Tensor::from_vector({1, 4}, {1, 2, 3, 6});
  const Tensor gamma = Tensor::from_vector({4}, {1, 2, 1, 1});
  const Tensor beta = Tensor::from_vector({4}, {0, 0, 0, 1});
  Tensor y({1, 4}), stats;
  cpu_backend().layer_norm_forward({4, 0.5}, x, &gamma, &beta, y, stats);
  const double inv = 1 / std::sqrt(3.5 + 0.5);
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(-2 * inv));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(-2 * inv));
  EXPECT_FLOAT_EQ(y[2], 0.0f);
  EXPECT_FLOAT_EQ(y[3], static_cast<float>(3 * inv + 1));
  EXPECT_FLOAT_EQ(stats[0], 3.0f);
  EXPECT_FLOAT_EQ(stats[1], static_cast<float>(inv));
  // The sum of dx over a row is 0 without gamma (the mean's gradient), and d_beta is dy.
  const Tensor dy = Tensor::from_vector({1, 4}, {0.3f, -1, 2, 0.5f});
  Tensor dx({1, 4}), d_gamma({4}), d_beta({4});
  cpu_backend().layer_norm_backward({4, 0.5}, x, dy, nullptr, stats, &dx, &d_gamma, &d_beta);
  EXPECT_NEAR(dx[0] + dx[1] + dx[2] + dx[3], 0.0, 1e-6);
  EXPECT_EQ(values_of(d_beta), (std::vector<float>{0.3f, -1, 2, 0.5f}));
  EXPECT_FLOAT_EQ(d_gamma[3], static_cast<float>(0.5 * 3 * inv));
}

// A long row far from zero, its statistics against long double by hand: the row sums (in 8
// double lanes) lose nothing a float result would show. The values are 1000 + k/4099 - 0.5 for
// k = i * 7 mod 4099, so their mean is 1000 + 2049/4099 - 0.5.
TEST(CpuBackend, LayerNormStatisticsOfALongRowAreExactToFloat) {
  const std::int64_t cols = 4099;
  Tensor x({2, cols}), y({2, cols}), stats;
  long double sum = 0;
  for (std::int64_t i = 0; i < cols; ++i) {
    x[i] = static_cast<float>(1000.0 + static_cast<double>(i * 7 % cols) / cols - 0.5);
    x[cols + i] = -x[i];
    sum += x[i];
  }
  const long double mean = sum / cols;
  long double squares = 0;
  for (std::int64_t i = 0; i < cols; ++i) squares += (x[i] - mean) * (x[i] - mean);
  const long double inv_std = 1 / std::sqrt(squares / cols + 1e-5L);
  cpu_backend().layer_norm_forward({cols, 1e-5}, x, nullptr, nullptr, y, stats);
  EXPECT_EQ(stats[0], static_cast<float>(mean));
  EXPECT_EQ(stats[1], static_cast<float>(-mean));
  EXPECT_EQ(stats[2], static_cast<float>(inv_std));
  EXPECT_EQ(stats[3], static_cast<float>(inv_std));
  // dx for dy = x-hat + 1 against the formula in long double: inv_std (g - mean(g) - x-hat
  // mean(g x-hat)) almost cancels (to about 7e-4), so the sums' rounding would show.
  Tensor dy({2, cols}), dx({2, cols});
  for (std::int64_t i = 0; i < 2 * cols; ++i) dy[i] = y[i] + 1.0f;
  cpu_backend().layer_norm_backward({cols, 1e-5}, x, dy, nullptr, stats, &dx, nullptr, nullptr);
  long double sum_g = 0, sum_gx = 0;
  const auto hat = [&](std::int64_t i) { return (x[i] - mean) * inv_std; };
  for (std::int64_t i = 0; i < cols; ++i) {
    sum_g += dy[i];
    sum_gx += dy[i] * hat(i);
  }
  for (std::int64_t i = 0; i < cols; ++i) {
    const long double expected = inv_std * (dy[i] - sum_g / cols - hat(i) * (sum_gx / cols));
    ASSERT_NEAR(dx[i], static_cast<double>(expected), 1e-5) << i;
  }
}

// The gamma and beta gradients add rows in blocks that the threads split: 1,000 rows (8 blocks,
// the last partial) of 300 columns (two ranges of columns) give the same bits on 1, 2 and 3
// threads, and sums within float rounding of double ones.
TEST(CpuBackend, LayerNormParameterGradientsDoNotDependOnTheThreadCount) {
  const std::int64_t rows = 1000, cols = 300;
  Rng rng(11);
  Tensor x({rows, cols}), dy({rows, cols});
  for (std::int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(rng.uniform() * 4 - 1);
    dy[i] = static_cast<float>(rng.uniform() * 2 - 1);
  }
  const int saved = cpu::compute_threads();
  const auto gradients = [&](int threads) {
    cpu::set_compute_threads(threads);
    Tensor y({rows, cols}), stats, d_gamma({cols}), d_beta({cols});
    cpu_backend().layer_norm_forward({cols, 1e-3}, x, nullptr, nullptr, y, stats);
    cpu_backend().layer_norm_backward({cols, 1e-3}, x, dy, nullptr, stats, nullptr, &d_gamma,
                                      &d_beta);
    std::vector<float> out = values_of(d_gamma);
    const std::vector<float> beta = values_of(d_beta);
    out.insert(out.end(), beta.begin(), beta.end());
    return std::make_pair(out, values_of(y));
  };
  const auto [one, y] = gradients(1);
  const auto two = gradients(2).first, three = gradients(3).first;
  cpu::set_compute_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
  for (std::int64_t c = 0; c < cols; ++c) {
    double gamma = 0, beta = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      gamma += static_cast<double>(dy[r * cols + c]) * y[static_cast<std::size_t>(r * cols + c)];
      beta += dy[r * cols + c];
    }
    ASSERT_NEAR(one[c], gamma, 1e-4) << c;
    ASSERT_NEAR(one[cols + c], beta, 1e-4) << c;
  }
}

// The element-wise loops compiled twice (avx512_copy.hpp: activation gradients, Add,
// BatchNormalization's apply and input gradient) give the same bits in the AVX-512 copy as in
// the baseline: the CUDA kernels mirror the host's arithmetic bit for bit, whichever copy ran.
// 19 channels leave a partial vector at the end of every row.
TEST(CpuBackend, Avx512CopiesComputeTheBaselinesBits) {
  const std::int64_t rows = 333, channels = 19, n = rows * channels;
  Rng rng(5);
  const auto random = [&](Shape shape, float scale) {
    Tensor t(std::move(shape));
    for (std::int64_t i = 0; i < t.size(); ++i)
      t[i] = static_cast<float>((rng.uniform() * 2 - 1) * scale);
    return t;
  };
  const Tensor x = random({rows, channels}, 3), y = random({rows, channels}, 2),
               dy = random({rows, channels}, 1), other = random({rows, channels}, 1),
               gamma = random({channels}, 1), beta = random({channels}, 1);
  const auto outputs = [&](bool baseline) {
    std::optional<cpu::BaselineLoopsForced> forced;
    if (baseline) forced.emplace();
    std::vector<Tensor> out;
    Backend& ops = cpu_backend();
    for (ActivationKind kind : {ActivationKind::relu, ActivationKind::tanh, ActivationKind::gelu,
                                ActivationKind::elu, ActivationKind::swish}) {
      out.emplace_back(Shape{rows, channels});
      ops.activation_backward(kind, x, y, dy, out.back(), channels);
    }
    out.emplace_back(Shape{rows, channels});
    ops.add(x, other, out.back());
    out.emplace_back(Shape{rows, channels});
    ops.add_relu(x, other, out.back());
    Tensor kept({rows});  // a mask keeping two rows of three
    for (std::int64_t r = 0; r < rows; ++r) kept[r] = r % 3 == 1 ? 0.0f : 1.0f;
    for (const bool relu : {false, true})
      for (const Tensor* mask : std::initializer_list<const Tensor*>{nullptr, &kept}) {
        BatchNormDesc desc;
        desc.channels = channels;
        desc.output_relu = relu;
        const std::unique_ptr<BatchNorm> bn = ops.batch_norm(desc);
        Tensor mean({channels}), variance({channels}), d_gamma({channels}), d_beta({channels});
        mean.fill(0.0f);
        variance.fill(1.0f);
        Tensor bn_y({rows, channels}), dx({rows, channels}), inference({rows, channels});
        bn->forward_training(x, &gamma, &beta, mean, variance, bn_y, {}, mask);
        bn->backward(x, bn_y, dy, &gamma, &d_gamma, &d_beta, &dx, {}, mask);
        bn->forward_inference(x, &gamma, &beta, mean, variance, inference);
        bn->backward(x, inference, dy, &gamma, &d_gamma, &d_beta,
                     &out.emplace_back(Shape{rows, channels}), {}, nullptr);
        out.push_back(bn_y);
        out.push_back(dx);
        out.push_back(inference);
      }
    // Layer normalization over 19 columns: two blocks of 8 lanes and 3 left over (kernel_math).
    Tensor ln_y({rows, channels}), stats, ln_dx({rows, channels}), d_gamma({channels}),
        d_beta({channels});
    ops.layer_norm_forward({channels, 1e-3}, x, &gamma, &beta, ln_y, stats);
    ops.layer_norm_backward({channels, 1e-3}, x, dy, &gamma, stats, &ln_dx, &d_gamma, &d_beta);
    out.push_back(ln_y);
    out.push_back(ln_dx);
    for (const Tensor* small : {&stats, &d_gamma, &d_beta}) {  // padded to n values to compare
      Tensor padded({rows, channels});
      padded.fill(0.0f);
      std::copy(small->data(), small->data() + small->size(), padded.data());
      out.push_back(padded);
    }
    return out;
  };
  const std::vector<Tensor> fast = outputs(false), baseline = outputs(true);
  ASSERT_EQ(fast.size(), baseline.size());
  for (std::size_t k = 0; k < fast.size(); ++k)
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(fast[k].data() + i, baseline[k].data() + i, sizeof(float)), 0)
          << "output " << k << " at " << i << ": " << fast[k][i] << " against " << baseline[k][i];
}

// `n` values scale · N(0, 1).
Tensor random_values(Rng& rng, std::int64_t n, float scale) {
  Tensor t({n});
  for (std::int64_t i = 0; i < n; ++i) t[i] = scale * rng.normal();
  return t;
}

// `step(n)` (a recurrent step's outputs for the first n of `rows` rows) run for every row on a
// team of 2 threads and for a third of them on 1 gives those rows the same bits.
template <class Step>
void expect_rows_keep_their_bits(std::int64_t rows, Step step) {
  const int threads = cpu::compute_threads();
  cpu::set_compute_threads(2);
  const std::vector<Tensor> whole = step(rows);
  cpu::set_compute_threads(1);
  const std::vector<Tensor> third = step(rows / 3);
  cpu::set_compute_threads(threads);
  for (std::size_t k = 0; k < whole.size(); ++k)
    for (std::int64_t i = 0; i < third[k].size(); ++i)
      ASSERT_EQ(std::memcmp(whole[k].data() + i, third[k].data() + i, sizeof(float)), 0)
          << "output " << k << " at " << i << ": " << whole[k][i] << " against " << third[k][i];
}

// The first n rows of `t` (width values a row), as a tensor of their own.
Tensor first_rows(const Tensor& t, std::int64_t n, std::int64_t width) {
  return Tensor::view(t, 0, {n, width}).clone();
}

// Contract 1 asks each sample's result not to depend on the rows it is computed with: the LSTM
// step (Keras' sigmoid gates and Keras 2's hard_sigmoid) gives each row the same bits for the
// whole batch and for a third of it, on a team of 2 threads and of 1, forward and backward.
TEST(CpuBackend, LstmStepGivesEachRowItsBitsWhateverTheRowsAndThreads) {
  Backend& ops = cpu_backend();
  const std::int64_t rows = 96, u = 37;
  Rng rng(3);
  const Tensor xw = random_values(rng, rows * 4 * u, 3), rec = random_values(rng, rows * 4 * u, 3);
  const Tensor c_prev = random_values(rng, rows * u, 2), dh = random_values(rng, rows * u, 1),
               dc_next = random_values(rng, rows * u, 1);
  for (const ActivationKind gate : {ActivationKind::sigmoid, ActivationKind::hard_sigmoid}) {
    const RecurrentCellDesc d{u, ActivationKind::tanh, gate, false};
    expect_rows_keep_their_bits(rows, [&](std::int64_t n) {
      Tensor pre({n, 4 * u}), c({n, u}), h({n, u}), d_pre({n, 4 * u});
      ops.lstm_step_forward(d, first_rows(xw, n, 4 * u), first_rows(rec, n, 4 * u),
                            first_rows(c_prev, n, u), pre, c, h);
      Tensor dc = first_rows(dc_next, n, u);
      ops.lstm_step_backward(d, pre, first_rows(c_prev, n, u), c, first_rows(dh, n, u), dc, d_pre);
      return std::vector<Tensor>{h, c, dc, d_pre};
    });
  }
}

// The GRU step likewise (reset_after and reset_before, the default sigmoid gates and Keras 2's
// hard_sigmoid).
TEST(CpuBackend, GruStepGivesEachRowItsBitsWhateverTheRowsAndThreads) {
  Backend& ops = cpu_backend();
  const std::int64_t rows = 96, u = 37;
  Rng rng(4);
  const Tensor xw = random_values(rng, rows * 3 * u, 3), rec = random_values(rng, rows * 3 * u, 3);
  const Tensor h_prev = random_values(rng, rows * u, 1), dh = random_values(rng, rows * u, 1);
  for (const ActivationKind gate : {ActivationKind::sigmoid, ActivationKind::hard_sigmoid})
    for (const bool reset_before : {false, true}) {
      const RecurrentCellDesc d{u, ActivationKind::tanh, gate, reset_before};
      expect_rows_keep_their_bits(rows, [&](std::int64_t n) {
        Tensor pre({n, 4 * u}), h({n, u}), d_xw({n, 3 * u}), d_rec({n, 3 * u}), dh_prev({n, u});
        ops.gru_step_forward(d, first_rows(xw, n, 3 * u), first_rows(rec, n, 3 * u),
                             first_rows(h_prev, n, u), pre, h);
        ops.gru_step_backward(d, pre, first_rows(h_prev, n, u), first_rows(dh, n, u), d_xw, d_rec,
                              dh_prev);
        return std::vector<Tensor>{h, d_xw, d_rec, dh_prev};
      });
    }
}

}  // namespace
}  // namespace tandem::backend
