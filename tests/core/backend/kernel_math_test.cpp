// The element-wise arithmetic written once for every backend (backend/kernel_math.hpp), checked
// against independent references: exact functions in double, and the CPU backend's oneDNN
// forwards (the one place where the CPU does not run kernel_math itself).
#include "backend/kernel_math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "tandem/error.hpp"
#include "nn/loss.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using backend::ActivationKind;

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

const ActivationKind kElementwise[] = {
    ActivationKind::linear,  ActivationKind::relu,       ActivationKind::tanh,
    ActivationKind::sigmoid, ActivationKind::gelu,       ActivationKind::elu,
    ActivationKind::selu,    ActivationKind::softplus,   ActivationKind::softsign,
    ActivationKind::swish,   ActivationKind::exponential};

// The CPU computes these forwards with its own expressions (the others through oneDNN).
bool cpu_forward_is_plain(ActivationKind k) {
  return k == ActivationKind::linear || k == ActivationKind::relu || k == ActivationKind::selu ||
         k == ActivationKind::softsign;
}

// Inputs over the interesting range, with zeros, signed zero and the stable-branch edges.
std::vector<float> activation_inputs(std::int64_t n, std::uint32_t seed) {
  std::vector<float> x = random_values(static_cast<std::size_t>(n), seed, -8.0f, 8.0f);
  const float special[] = {0.0f, -0.0f, 1e-3f, -1e-3f, 20.0f, -20.0f, 40.0f, -40.0f, 0.5f, -0.5f};
  for (std::size_t i = 0; i < std::size(special) && i < x.size(); ++i)
    x[i * 7 % x.size()] = special[i];
  return x;
}

// The exact function in double, for the kinds the CPU computes with oneDNN.
double reference(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case ActivationKind::gelu:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ActivationKind::elu:
      return x > 0 ? x : std::expm1(x);
    case ActivationKind::softplus:
      return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
    case ActivationKind::swish:
      return x / (1.0 + std::exp(-x));
    case ActivationKind::exponential:
      return std::exp(x);
    default:
      return std::nan("");
  }
}

// The CPU backend's forward of `kind` over rows of `cols`.
std::vector<float> cpu_forward(ActivationKind kind, const std::vector<float>& x, std::int64_t cols) {
  const Tensor in = Tensor::from_vector({static_cast<std::int64_t>(x.size())}, x);
  Tensor out({static_cast<std::int64_t>(x.size())});
  backend::cpu_backend().activation_forward(kind, in, out, cols);
  return {out.values().begin(), out.values().end()};
}

TEST(KernelMath, ActivationValuesMatchExactFunctionsAndTheCpuForwards) {
  const std::int64_t cols = 41, n = 23 * cols;
  const std::vector<float> x = activation_inputs(n, 1);
  for (ActivationKind kind : kElementwise) {
    const std::string name = nn::activation_name(kind);
    const std::vector<float> cpu = cpu_forward(kind, x, cols);
    int far_from_exact = 0, far_from_cpu = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float xi = x[static_cast<std::size_t>(i)];
      const float d = backend::math::activation_value(kind, xi);
      const float c = cpu[static_cast<std::size_t>(i)];
      if (cpu_forward_is_plain(kind)) {  // the CPU runs kernel_math itself: the same bits
        EXPECT_TRUE((std::isnan(c) && std::isnan(d)) || c == d) << name << "(" << xi << ")";
        continue;
      }
      // Within 1e-6 of the exact value (a few ulp; results below the smallest normal float are
      // flushed; gelu's tail is ill-conditioned in its float argument x/√2, by x² ulp), and
      // within oneDNN's error (1e-5, absolute below 1) of the CPU's.
      const double exact = reference(kind, xi);
      const double rel = kind == ActivationKind::gelu ? 1e-6 + xi * xi * 0x1p-23 : 1e-6;
      if (std::fabs(d - exact) > std::max(rel * std::fabs(exact), 2e-38) && ++far_from_exact <= 3)
        ADD_FAILURE() << name << "(" << xi << "): kernel math " << d << ", exact " << exact;
      if (std::fabs(static_cast<double>(d) - c) > 1e-5 * std::max(1.0, std::fabs(exact)) &&
          ++far_from_cpu <= 3)
        ADD_FAILURE() << name << "(" << xi << "): kernel math " << d << ", CPU " << c;
    }
  }
}

// The kinds derivative_from_output names give the same derivative when the output stands in
// for the input (what an in-place layer passes), and at least one other kind does not (the
// check can tell them apart).
TEST(KernelMath, DerivativesFromTheOutputAloneNeedNoInput) {
  const std::vector<float> x = activation_inputs(41 * 23, 2);
  int told_apart = 0;
  for (ActivationKind kind : kElementwise) {
    const std::string name = nn::activation_name(kind);
    int differences = 0;
    for (const float xi : x) {
      const float y = backend::math::activation_value(kind, xi);
      const float from_input = backend::math::activation_derivative(kind, xi, y);
      const float from_output = backend::math::activation_derivative(kind, y, y);
      if (!(from_input == from_output || (std::isnan(from_input) && std::isnan(from_output))))
        ++differences;
    }
    if (backend::derivative_from_output(kind))
      EXPECT_EQ(differences, 0) << name;
    else if (differences > 0)
      ++told_apart;
  }
  EXPECT_GT(told_apart, 0);
}

TEST(KernelMath, InvalidSparseLabelsAreNanInTheKernelAndADataErrorOnTheCpu) {
  const std::int64_t rows = 2, classes = 3;
  const std::vector<float> pred = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f};
  auto loss = make_loss("sparse_categorical_crossentropy", "loss");
  const backend::LossDesc d = loss->desc();
  for (float bad : {3.0f, -1.0f, 1.5f, -0.5f, std::nanf(""), 1e30f}) {
    const std::vector<float> labels = {1.0f, bad};
    EXPECT_EQ(backend::math::sparse_label(bad, classes), -1) << bad;
    std::vector<float> grad(pred.size());
    EXPECT_TRUE(std::isnan(
        backend::math::loss_row(d, pred.data(), labels.data(), grad.data(), 1, classes, 1)));
    for (std::int64_t c = 0; c < classes; ++c) EXPECT_TRUE(std::isnan(grad[3 + c])) << bad;
    EXPECT_FALSE(std::isnan(
        backend::math::loss_row(d, pred.data(), labels.data(), grad.data(), 0, classes, 1)));
    try {
      loss->compute(Tensor::from_vector({rows, classes}, pred), Tensor::from_vector({rows}, labels),
                    1.0f, nullptr);
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a class index in [0, 3)"), std::string::npos)
          << e.what();
    }
  }
  for (float good : {0.0f, -0.0f, 2.0f})
    EXPECT_GE(backend::math::sparse_label(good, classes), 0) << good;
}

TEST(KernelMath, EmbeddingIndicesAreIntegersInsideTheTable) {
  EXPECT_EQ(backend::math::embedding_index(0.0f, 5), 0);
  EXPECT_EQ(backend::math::embedding_index(4.0f, 5), 4);
  for (float bad : {5.0f, -1.0f, 0.5f, std::nanf(""), 1e30f, -0.5f})
    EXPECT_EQ(backend::math::embedding_index(bad, 5), -1) << bad;
}

}  // namespace
}  // namespace tandem
