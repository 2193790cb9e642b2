#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using test::expect_close;
using test::numeric_gradient;

// Independent double-precision definitions (Keras formulas).
double reference(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::linear:
      return x;
    case ActivationKind::relu:
      return x > 0 ? x : 0;
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::sigmoid:
      return 1 / (1 + std::exp(-x));
    case ActivationKind::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case ActivationKind::elu:
      return x > 0 ? x : std::exp(x) - 1;
    case ActivationKind::selu:
      return 1.0507009873554804934193349852946 *
             (x > 0 ? x : 1.6732632423543772848170429916717 * (std::exp(x) - 1));
    case ActivationKind::softplus:
      return std::log(1 + std::exp(x));
    case ActivationKind::softsign:
      return x / (1 + std::fabs(x));
    case ActivationKind::swish:
      return x / (1 + std::exp(-x));
    case ActivationKind::exponential:
      return std::exp(x);
    case ActivationKind::leaky_relu:
      return x > 0 ? x : 0.2 * x;
    case ActivationKind::hard_sigmoid:
      return std::clamp((x + 3) / 6, 0.0, 1.0);
    case ActivationKind::hard_sigmoid_keras2:
      return std::clamp(0.2 * x + 0.5, 0.0, 1.0);
    case ActivationKind::hard_swish:
      return x * std::clamp((x + 3) / 6, 0.0, 1.0);
    case ActivationKind::mish:
      return x * std::tanh(std::log1p(std::exp(x)));
    case ActivationKind::softmax:
    case ActivationKind::log_softmax:
      break;
  }
  return 0;
}

std::vector<double> reference_rows(ActivationKind kind, const std::vector<double>& x,
                                   std::int64_t cols) {
  std::vector<double> y(x.size());
  const bool log = kind == ActivationKind::log_softmax;
  if (kind != ActivationKind::softmax && !log) {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = reference(kind, x[i]);
    return y;
  }
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(cols); ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c]);
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = log ? x[r * cols + c] - std::log(sum) : std::exp(x[r * cols + c]) / sum;
  }
  return y;
}

class ActivationFunctionTest : public ::testing::TestWithParam<ActivationKind> {};

TEST_P(ActivationFunctionTest, ForwardMatchesReferenceAndBackwardMatchesFiniteDifferences) {
  const ActivationKind kind = GetParam();
  const std::int64_t rows = 4, cols = 7;
  Tensor x = test::random_tensor({rows, cols}, 11, -3, 3);
  // Keep relu/elu/selu away from the kink at 0 and the hard ones from theirs at +-3, where the
  // derivative is not defined.
  for (std::int64_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i]) < 0.05f || std::fabs(std::fabs(x[i]) - 3.0f) < 0.05f) x[i] = 0.3f;
  Tensor y({rows, cols});
  backend::cpu_backend().activation_forward(kind, x, y, cols);
  expect_close(test::to_double(y), reference_rows(kind, test::to_double(x), cols), 1e-5, 1e-6,
               activation_name(kind) + " forward");

  Tensor w = test::random_tensor({rows, cols}, 12);  // L = sum(w * f(x))
  Tensor gx({rows, cols});
  backend::cpu_backend().activation_backward(kind, x, y, w, gx, cols);
  auto wd = test::to_double(w);
  auto loss = [&](const std::vector<double>& xs) {
    auto ys = reference_rows(kind, xs, cols);
    double s = 0;
    for (std::size_t i = 0; i < ys.size(); ++i) s += wd[i] * ys[i];
    return s;
  };
  expect_close(test::to_double(gx), numeric_gradient(loss, test::to_double(x)), 1e-4, 1e-5,
               activation_name(kind) + " gradient");
}

INSTANTIATE_TEST_SUITE_P(
    AllActivations, ActivationFunctionTest,
    ::testing::Values(ActivationKind::linear, ActivationKind::relu, ActivationKind::tanh,
                      ActivationKind::sigmoid, ActivationKind::softmax, ActivationKind::gelu,
                      ActivationKind::elu, ActivationKind::selu, ActivationKind::softplus,
                      ActivationKind::softsign, ActivationKind::swish, ActivationKind::exponential,
                      ActivationKind::leaky_relu, ActivationKind::hard_sigmoid,
                      ActivationKind::hard_sigmoid_keras2, ActivationKind::hard_swish,
                      ActivationKind::mish, ActivationKind::log_softmax),
    [](const auto& info) {
      return info.param == ActivationKind::hard_sigmoid_keras2 ? std::string("hard_sigmoid_keras2")
                                                               : activation_name(info.param);
    });

TEST(ActivationFunction, SigmoidAndSoftmaxStayFiniteForExtremeInputs) {
  const Tensor x = Tensor::from_vector({1, 4}, {-1000.0f, 1000.0f, -88.0f, 88.0f});
  Tensor y({1, 4});
  backend::cpu_backend().activation_forward(ActivationKind::sigmoid, x, y, 4);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 1.0f);
  backend::cpu_backend().activation_forward(ActivationKind::softmax, x, y, 4);
  for (float v : y.values()) EXPECT_TRUE(std::isfinite(v));
  EXPECT_FLOAT_EQ(y[1], 1.0f);
}

TEST(ActivationFunction, NamesParseAndUnknownNameListsKnownOnes) {
  EXPECT_EQ(parse_activation("silu", "p"), ActivationKind::swish);
  EXPECT_EQ(parse_activation("relu", "p"), ActivationKind::relu);
  try {
    parse_activation("rellu", "model.config.layers[1].config.activation");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("model.config.layers[1].config.activation"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'rellu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gelu"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tandem::nn
