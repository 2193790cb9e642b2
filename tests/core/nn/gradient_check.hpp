// Finite-difference gradient checking against double-precision reference functions.
//
// A check compares Tandem's float32 analytic gradient with central differences of a reference
// function written independently in double precision (h = 1e-6), so the reference itself is
// accurate to ~1e-9 and any disagreement beyond float rounding is a real bug.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tandem/layer.hpp"
#include "tandem/rng.hpp"
#include "tandem/tensor.hpp"

namespace tandem::test {

inline std::vector<double> to_double(const Tensor& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

inline Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo = -1, float hi = 1) {
  Tensor t(shape);
  Rng rng(seed);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

/// Standard normal values (Rng::normal) of `shape`.
inline Tensor random_normal_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor t(shape);
  Rng rng(seed);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = rng.normal();
  return t;
}

/// d f / d x_i by central differences, for every i. f maps a double vector to a scalar.
inline std::vector<double> numeric_gradient(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
    double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

/// Expects |a - r| <= atol + rtol * |r| elementwise, reporting the worst element.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& reference,
                         double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), reference.size()) << what;
  double worst = 0;
  std::size_t worst_i = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double excess =
        std::fabs(actual[i] - reference[i]) - (atol + rtol * std::fabs(reference[i]));
    if (excess > worst) {
      worst = excess;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_i << " is " << actual[worst_i]
                        << ", reference " << reference[worst_i];
}

/// The gradients of Σ y·dy (dy drawn from `dy_seed`) of a training forward of the built `layer`
/// at x against central differences (h = 1e-2; every 7th input value, every 5th weight value),
/// its random state put back before each forward so that every forward draws the same masks:
/// within 2e-3 · (1 + |analytic|). The layer must draw (a random state to put back).
inline void expect_training_gradients(Layer& layer, Tensor& x, std::uint64_t dy_seed) {
  const auto state = layer.random_state();
  ASSERT_FALSE(state.empty());
  const auto weighted_sum = [](const Tensor& y, const Tensor& dy) {
    double s = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * dy[i];
    return s;
  };
  const Tensor y = layer.forward(x, true).clone();
  const Tensor dy = random_tensor(y.shape(), dy_seed);
  for (Parameter* p : layer.parameters()) p->grad.fill(0.0f);
  const Tensor dx = layer.backward(dy, true).clone();
  std::vector<Tensor> grads;
  for (Parameter* p : layer.parameters()) grads.push_back(p->grad.clone());
  const auto at = [&](Tensor& t, std::int64_t i, float h) {
    const float saved = t[i];
    t[i] = saved + h;
    layer.set_random_state(state);
    const double up = weighted_sum(layer.forward(x, true), dy);
    t[i] = saved - h;
    layer.set_random_state(state);
    const double down = weighted_sum(layer.forward(x, true), dy);
    t[i] = saved;
    return (up - down) / (2.0 * h);
  };
  constexpr float h = 1e-2f;
  for (std::int64_t i = 0; i < x.size(); i += 7)
    EXPECT_NEAR(dx[i], at(x, i, h), 2e-3 * (1 + std::fabs(dx[i]))) << "dx[" << i << "]";
  const auto params = layer.parameters();
  for (std::size_t p = 0; p < params.size(); ++p)
    for (std::int64_t i = 0; i < params[p]->value.size(); i += 5)
      EXPECT_NEAR(grads[p][i], at(params[p]->value, i, h), 2e-3 * (1 + std::fabs(grads[p][i])))
          << params[p]->name << "[" << i << "]";
}

}  // namespace tandem::test
