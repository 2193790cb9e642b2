#include "nn/dense.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using test::expect_close;
using test::numeric_gradient;

double act(ActivationKind kind, double z) {
  switch (kind) {
    case ActivationKind::relu:
      return z > 0 ? z : 0;
    case ActivationKind::tanh:
      return std::tanh(z);
    case ActivationKind::sigmoid:
      return 1 / (1 + std::exp(-z));
    case ActivationKind::gelu:
      return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    default:
      return z;
  }
}

// Reference Dense in double: y[r][u] = act(sum_i x[r][i] W[i][u] + b[u]); L = sum w*y.
double reference_loss(const std::vector<double>& x, const std::vector<double>& k,
                      const std::vector<double>& b, const std::vector<double>& w, std::int64_t rows,
                      std::int64_t in, std::int64_t units, ActivationKind kind) {
  double loss = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t u = 0; u < units; ++u) {
      double z = b.empty() ? 0 : b[u];
      for (std::int64_t i = 0; i < in; ++i) z += x[r * in + i] * k[i * units + u];
      loss += w[r * units + u] * act(kind, z);
    }
  return loss;
}

struct DenseCase {
  ActivationKind activation;
  bool use_bias;
  Shape input;  // per-sample
  std::int64_t units;
};

class DenseGradientTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseGradientTest, ForwardAndAllGradientsMatchDoubleReference) {
  const DenseCase c = GetParam();
  DenseOptions o;
  o.units = c.units;
  o.activation = c.activation;
  o.use_bias = c.use_bias;
  o.bias_initializer.name = "random_uniform";  // non-zero bias so it matters
  Dense dense("dense", o);
  Rng init(5);
  Shape out_shape = dense.build(c.input, init);
  EXPECT_EQ(out_shape.back(), c.units);

  Shape x_shape{3};
  x_shape.insert(x_shape.end(), c.input.begin(), c.input.end());
  Tensor x = test::random_tensor(x_shape, 21);
  const Tensor& y = dense.forward(x, true);
  const std::int64_t in = c.input.back(), rows = x.size() / in;
  Tensor w = test::random_tensor(y.shape(), 22);
  auto params = dense.parameters();
  ASSERT_EQ(params.size(), c.use_bias ? 2u : 1u);
  auto xd = test::to_double(x), kd = test::to_double(params[0]->value), wd = test::to_double(w);
  std::vector<double> bd = c.use_bias ? test::to_double(params[1]->value) : std::vector<double>{};

  // Forward: y·w summed equals the reference loss.
  double tandem_loss = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) tandem_loss += static_cast<double>(y[i]) * w[i];
  EXPECT_NEAR(tandem_loss, reference_loss(xd, kd, bd, wd, rows, in, c.units, c.activation),
              1e-4 * (1 + std::fabs(tandem_loss)));

  const Tensor& gx = dense.backward(w, true);
  expect_close(test::to_double(gx),
               numeric_gradient(
                   [&](const auto& v) {
                     return reference_loss(v, kd, bd, wd, rows, in, c.units, c.activation);
                   },
                   xd),
               1e-3, 1e-4, "d/dx");
  expect_close(test::to_double(params[0]->grad),
               numeric_gradient(
                   [&](const auto& v) {
                     return reference_loss(xd, v, bd, wd, rows, in, c.units, c.activation);
                   },
                   kd),
               1e-3, 1e-4, "d/dkernel");
  if (c.use_bias)
    expect_close(test::to_double(params[1]->grad),
                 numeric_gradient(
                     [&](const auto& v) {
                       return reference_loss(xd, kd, v, wd, rows, in, c.units, c.activation);
                     },
                     bd),
                 1e-3, 1e-4, "d/dbias");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DenseGradientTest,
    ::testing::Values(DenseCase{ActivationKind::linear, true, {5}, 4},
                      DenseCase{ActivationKind::relu, true, {7}, 3},
                      DenseCase{ActivationKind::tanh, false, {6}, 5},
                      DenseCase{ActivationKind::sigmoid, true, {1}, 1},
                      DenseCase{ActivationKind::gelu, true, {4}, 9},
                      DenseCase{ActivationKind::relu, true, {2, 5}, 3}));  // rank-3 input

TEST(Dense, KerasWeightLayoutAndConfig) {
  DenseOptions o;
  o.units = 7;
  o.activation = ActivationKind::relu;
  Dense dense("dense_3", o);
  Rng init(1);
  dense.build({5}, init);
  auto params = dense.parameters();
  EXPECT_EQ(params[0]->name, "kernel");
  EXPECT_EQ(params[0]->value.shape(), (Shape{5, 7}));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->value.shape(), (Shape{7}));
  for (float b : params[1]->value.values()) EXPECT_EQ(b, 0.0f);  // zeros by default
  auto cfg = dense.config();
  EXPECT_EQ(cfg["units"], 7);
  EXPECT_EQ(cfg["activation"], "relu");
  EXPECT_EQ(cfg["kernel_initializer"]["class_name"], "GlorotUniform");
}

TEST(Dense, AVarianceScalingBiasTakesTheFansOfItsOwnShape) {
  // Keras' compute_fans(bias.shape): a bias of 2,000 units has fans 2,000 and 2,000, whatever
  // the kernel's (10, 2000). he_uniform's limit is then sqrt(6 / 2000) = 0.055 (it was
  // sqrt(6 / 10) = 0.77 when the bias took the kernel's fans).
  DenseOptions o;
  o.units = 2000;
  o.bias_initializer.name = "he_uniform";
  Dense dense("dense", o);
  Rng init(1);
  dense.build({10}, init);
  double max_abs = 0;
  for (float b : dense.parameters()[1]->value.values())
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(b)));
  EXPECT_LE(max_abs, std::sqrt(6.0 / 2000.0));
  EXPECT_GT(max_abs, 0.9 * std::sqrt(6.0 / 2000.0));
}

TEST(Dense, WrongInputWidthNamesTheLayer) {
  DenseOptions o;
  o.units = 2;
  Dense dense("classifier", o);
  Rng init(1);
  dense.build({4}, init);
  Tensor x({3, 5});
  try {
    dense.forward(x, false);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'classifier'"), std::string::npos) << e.what();
  }
}

TEST(Dense, HandlesBatchOfOneAndReusesBuffersAcrossBatchSizes) {
  DenseOptions o;
  o.units = 3;
  Dense dense("d", o);
  Rng init(2);
  dense.build({4}, init);
  Tensor big = test::random_tensor({8, 4}, 3);
  Tensor one({1, 4});
  for (int i = 0; i < 4; ++i) one[i] = big[i];
  const Tensor y8 = dense.forward(big, true).clone();
  const Tensor& y1 = dense.forward(one, true);
  ASSERT_EQ(y1.shape(), (Shape{1, 3}));
  for (int u = 0; u < 3; ++u) EXPECT_FLOAT_EQ(y1[u], y8[u]);
}

}  // namespace
}  // namespace tandem::nn
