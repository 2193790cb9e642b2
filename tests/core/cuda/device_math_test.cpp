// The CUDA kernels' arithmetic (core/src/cuda/ops/device_math.hpp), built here for the host,
// against the CPU backend's real implementations on random data: activations and their
// derivatives, every loss and its gradient, every metric, every optimizer over several steps (with
// weight decay and all three clippings), Dropout's masks; and the device descriptions of the host
// objects (device_specs.hpp). Runs without CUDA: device_math.hpp compiles with g++.
//
// Bit for bit wherever the CPU computes with the same formula and functions: the optimizer
// updates, Dropout, the losses, the metrics, every derivative, relu/selu/softsign/softmax. The
// CPU's tanh, sigmoid, gelu, elu, softplus, swish and exponential forwards are oneDNN's
// approximations: there the exact functions device_math.hpp computes agree within a few ulp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/ops/device_math.hpp"
#include "cuda/ops/device_specs.hpp"
#include "nn/activation_fn.hpp"
#include "nn/dropout.hpp"
#include "tandem/error.hpp"
#include "tandem/loss.hpp"
#include "tandem/metric.hpp"
#include "tandem/optimizer.hpp"
#include "tandem/rng.hpp"

namespace tandem::cuda {
namespace {

using nlohmann::json;
using nn::ActivationKind;

// The CPU backend computes with subnormals flushed (FTZ/DAZ), and so does device_math.hpp on the
// device: the CPU backend's first computation in a thread sets that there (cpu::compute_threads),
// so one runs before the device math's host build does.
class DeviceMath : public ::testing::Test {
 protected:
  void SetUp() override {
    float x = 1.0f;
    nn::activation_forward(nn::ActivationKind::relu, &x, &x, 1, 1);
  }
};

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Tensor tensor_of(const Shape& shape, const std::vector<float>& values) {
  return Tensor::from_vector(shape, values);
}

// Equal bits (any NaN equals any NaN); reports the first few differences.
class BitCompare {
 public:
  explicit BitCompare(std::string what) : what_(std::move(what)) {}
  void operator()(float expected, float actual, std::int64_t i) {
    if (same(expected, actual)) return;
    if (++failures_ <= 5)
      ADD_FAILURE() << what_ << " [" << i << "]: CPU " << expected << " (0x" << std::hex
                    << std::bit_cast<std::uint32_t>(expected) << "), device math " << std::dec
                    << actual << " (0x" << std::hex << std::bit_cast<std::uint32_t>(actual) << ")";
  }
  static bool same(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) ||
           std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  }

 private:
  std::string what_;
  int failures_ = 0;
};

void expect_same_double(double expected, double actual, const std::string& what) {
  EXPECT_TRUE((std::isnan(expected) && std::isnan(actual)) ||
              std::bit_cast<std::uint64_t>(expected) == std::bit_cast<std::uint64_t>(actual))
      << what << ": CPU " << std::hexfloat << expected << ", device math " << actual;
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

TEST_F(DeviceMath, ActivationForwardsMatchTheCpu) {
  const std::int64_t rows = 23, cols = 41, n = rows * cols;
  const std::vector<float> x = activation_inputs(n, 1);
  for (ActivationKind kind : kElementwise) {
    const std::string name = nn::activation_name(kind);
    std::vector<float> cpu(x.size());
    nn::activation_forward(kind, x.data(), cpu.data(), rows, cols);
    BitCompare same("forward " + name);
    int far_from_exact = 0, far_from_cpu = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float xi = x[static_cast<std::size_t>(i)];
      const float d = dm::activation_value(kind, xi);
      const float c = cpu[static_cast<std::size_t>(i)];
      if (cpu_forward_is_plain(kind)) {
        same(c, d, i);
        continue;
      }
      // Within 1e-6 of the exact value (a few ulp; results below the smallest normal float are
      // flushed; gelu's tail is ill-conditioned in its float argument x/√2, by x² ulp), and
      // within oneDNN's error (1e-5, absolute below 1) of the CPU's.
      const double exact = reference(kind, xi);
      const double rel = kind == ActivationKind::gelu ? 1e-6 + xi * xi * 0x1p-23 : 1e-6;
      if (std::fabs(d - exact) > std::max(rel * std::fabs(exact), 2e-38) && ++far_from_exact <= 3)
        ADD_FAILURE() << name << "(" << xi << "): device math " << d << ", exact " << exact;
      if (std::fabs(static_cast<double>(d) - c) > 1e-5 * std::max(1.0, std::fabs(exact)) &&
          ++far_from_cpu <= 3)
        ADD_FAILURE() << name << "(" << xi << "): device math " << d << ", CPU " << c;
    }
  }
}

TEST_F(DeviceMath, ActivationDerivativesMatchTheCpuBitForBit) {
  const std::int64_t rows = 19, cols = 37, n = rows * cols;
  const std::vector<float> x = activation_inputs(n, 2);
  const std::vector<float> go = random_values(static_cast<std::size_t>(n), 3, -2.0f, 2.0f);
  for (ActivationKind kind : kElementwise) {
    const std::string name = nn::activation_name(kind);
    std::vector<float> y(x.size()), cpu(x.size());
    nn::activation_forward(kind, x.data(), y.data(), rows, cols);  // the CPU's own y
    nn::activation_backward(kind, x.data(), y.data(), go.data(), cpu.data(), rows, cols);
    BitCompare same("backward " + name);
    for (std::size_t i = 0; i < x.size(); ++i)
      same(cpu[i], dm::activation_grad(kind, x[i], y[i], go[i]), static_cast<std::int64_t>(i));
  }
}

TEST_F(DeviceMath, SoftmaxRowsMatchTheCpuBitForBit) {
  for (std::int64_t cols : {1, 2, 10, 257}) {
    const std::int64_t rows = 13, n = rows * cols;
    std::vector<float> x = random_values(static_cast<std::size_t>(n), 4, -30.0f, 30.0f);
    x[0] = 80.0f;  // an exp that overflows without the max subtraction
    std::vector<float> cpu(x.size()), dev(x.size());
    nn::activation_forward(ActivationKind::softmax, x.data(), cpu.data(), rows, cols);
    for (std::int64_t r = 0; r < rows; ++r)
      dm::softmax_row(x.data() + r * cols, dev.data() + r * cols, cols);
    BitCompare fwd("softmax forward cols " + std::to_string(cols));
    for (std::int64_t i = 0; i < n; ++i) fwd(cpu[i], dev[i], i);

    const std::vector<float> go = random_values(static_cast<std::size_t>(n), 5, -1.0f, 1.0f);
    std::vector<float> gcpu(x.size()), gdev = go;  // the device's in place (aliasing allowed)
    nn::activation_backward(ActivationKind::softmax, x.data(), cpu.data(), go.data(), gcpu.data(),
                            rows, cols);
    for (std::int64_t r = 0; r < rows; ++r)
      dm::softmax_row_backward(cpu.data() + r * cols, gdev.data() + r * cols,
                               gdev.data() + r * cols, cols);
    BitCompare bwd("softmax backward cols " + std::to_string(cols));
    for (std::int64_t i = 0; i < n; ++i) bwd(gcpu[i], gdev[i], i);
  }
}

// ---------------------------------------------------------------------------------------------
// Losses: the CPU's compute() returns the row losses added in row order; the device writes them
// per row (and the caller adds them), so the same sum in the same order must give the same bits.

struct LossCase {
  json spec;
  DeviceLoss::Kind kind;
  bool from_logits;
  float smoothing;
};

void check_loss(const LossCase& lc, const std::vector<float>& pred,
                const std::vector<float>& target, std::int64_t rows, std::int64_t cols,
                bool sparse) {
  const std::string what = lc.spec.dump();
  auto loss = make_loss(lc.spec, "loss");
  const DeviceLoss d = device_loss(*loss);
  EXPECT_EQ(d.kind, lc.kind) << what;
  EXPECT_EQ(d.from_logits, lc.from_logits) << what;
  EXPECT_EQ(d.label_smoothing, lc.smoothing) << what;

  const Tensor p = tensor_of({rows, cols}, pred);
  const Tensor t = sparse ? tensor_of({rows}, target) : tensor_of({rows, cols}, target);
  const float scale = 1.0f / 96.0f;
  Tensor cpu_grad;
  const double cpu_total = loss->compute(p, t, scale, &cpu_grad);
  std::vector<float> grad(pred.size(), -7.0f);
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    total += dm::loss_row(d, pred.data(), target.data(), grad.data(), r, cols, scale);
  expect_same_double(cpu_total, total, what + " loss");
  // Without a gradient: the same loss.
  double total_no_grad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    total_no_grad += dm::loss_row(d, pred.data(), target.data(), nullptr, r, cols, scale);
  expect_same_double(cpu_total, total_no_grad, what + " loss without gradient");
  BitCompare same(what + " gradient");
  for (std::int64_t i = 0; i < p.size(); ++i)
    same(cpu_grad[i], grad[static_cast<std::size_t>(i)], i);
}

// Probabilities in (0, 1) with values at and beyond Keras' clipping edges.
std::vector<float> probabilities(std::size_t n, std::uint32_t seed) {
  std::vector<float> p = random_values(n, seed, 0.0f, 1.0f);
  const float edges[] = {0.0f, 1.0f, 1e-9f, 1.0f - 1e-8f, 1e-7f, 0.9999999f, 0.5f};
  for (std::size_t i = 0; i < std::size(edges) && i < n; ++i) p[i * 5 % n] = edges[i];
  return p;
}

TEST_F(DeviceMath, RegressionAndBinaryLossesMatchTheCpuBitForBit) {
  const std::int64_t rows = 29, cols = 7;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const std::vector<float> pred = random_values(n, 10, -3.0f, 3.0f);
  const std::vector<float> target = random_values(n, 11, -3.0f, 3.0f);
  std::vector<float> exact = target;
  exact[3] = pred[3];  // d == 0: mae's zero gradient
  check_loss({"mse", DeviceLoss::Kind::mse, false, 0.0f}, pred, exact, rows, cols, false);
  check_loss({"mean_absolute_error", DeviceLoss::Kind::mae, false, 0.0f}, pred, exact, rows, cols,
             false);

  std::vector<float> labels = random_values(n, 12, 0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i)
    if (i % 3 != 0) labels[i] = labels[i] > 0.5f ? 1.0f : 0.0f;  // hard and soft targets
  const std::vector<float> probs = probabilities(n, 13);
  std::vector<float> logits = random_values(n, 14, -12.0f, 12.0f);
  logits[0] = 0.0f, logits[1] = -90.0f, logits[2] = 90.0f;
  for (float s : {0.0f, 0.1f}) {
    json cfg = {{"from_logits", false}, {"label_smoothing", s}};
    check_loss({json{{"class_name", "BinaryCrossentropy"}, {"config", cfg}}, DeviceLoss::Kind::bce,
                false, s},
               probs, labels, rows, cols, false);
    cfg["from_logits"] = true;
    check_loss({json{{"class_name", "BinaryCrossentropy"}, {"config", cfg}}, DeviceLoss::Kind::bce,
                true, s},
               logits, labels, rows, cols, false);
  }
}

TEST_F(DeviceMath, CategoricalLossesMatchTheCpuBitForBit) {
  const std::int64_t rows = 31, classes = 9;
  const std::size_t n = static_cast<std::size_t>(rows * classes);
  std::vector<float> probs = probabilities(n, 20);
  // A row whose probabilities are all far below eps after normalising but one (clipping active).
  for (std::int64_t c = 0; c < classes; ++c) probs[static_cast<std::size_t>(classes + c)] = 1e-9f;
  probs[static_cast<std::size_t>(classes + 4)] = 1.0f;
  std::vector<float> logits = random_values(n, 21, -15.0f, 15.0f);
  logits[5] = 60.0f;
  std::vector<float> sparse(static_cast<std::size_t>(rows)), onehot(n, 0.0f);
  std::mt19937 gen(22);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::int64_t>(gen() % classes);
    sparse[static_cast<std::size_t>(r)] = static_cast<float>(k);
    onehot[static_cast<std::size_t>(r * classes + k)] = 1.0f;
  }
  sparse[1] = 4.0f;   // the clipped row's label is its large class
  sparse[2] = -0.0f;  // a valid label 0 for the CPU too
  std::vector<float> soft = random_values(n, 23, 0.0f, 1.0f);  // soft targets
  for (std::int64_t r = 0; r < rows; r += 2)
    for (std::int64_t c = 0; c < classes; ++c)
      soft[static_cast<std::size_t>(r * classes + c)] =
          onehot[static_cast<std::size_t>(r * classes + c)];
  for (bool logit : {false, true}) {
    const std::vector<float>& pred = logit ? logits : probs;
    for (float s : {0.0f, 0.2f}) {
      const json cfg = {{"from_logits", logit}, {"label_smoothing", s}};
      check_loss({json{{"class_name", "CategoricalCrossentropy"}, {"config", cfg}},
                  DeviceLoss::Kind::cce, logit, s},
                 pred, soft, rows, classes, false);
    }
    check_loss({json{{"class_name", "SparseCategoricalCrossentropy"},
                     {"config", {{"from_logits", logit}}}},
                DeviceLoss::Kind::scce, logit, 0.0f},
               pred, sparse, rows, classes, true);
  }
}

TEST_F(DeviceMath, InvalidSparseLabelsAreNanOnTheDeviceWhereTheCpuThrows) {
  const std::int64_t rows = 2, classes = 3;
  const std::vector<float> pred = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f};
  auto loss = make_loss("sparse_categorical_crossentropy", "loss");
  const DeviceLoss d = device_loss(*loss);
  for (float bad : {3.0f, -1.0f, 1.5f, -0.5f, std::nanf(""), 1e30f}) {
    const std::vector<float> labels = {1.0f, bad};
    EXPECT_THROW(
        loss->compute(tensor_of({rows, classes}, pred), tensor_of({rows}, labels), 1.0f, nullptr),
        DataError)
        << bad;
    EXPECT_EQ(dm::sparse_label(bad, classes), -1) << bad;
    std::vector<float> grad(pred.size());
    EXPECT_TRUE(
        std::isnan(dm::loss_row(d, pred.data(), labels.data(), grad.data(), 1, classes, 1)));
    for (std::int64_t c = 0; c < classes; ++c) EXPECT_TRUE(std::isnan(grad[3 + c])) << bad;
    EXPECT_FALSE(
        std::isnan(dm::loss_row(d, pred.data(), labels.data(), grad.data(), 0, classes, 1)));
    // The host check throws the CPU's error, word for word.
    std::string cpu_message, host_message;
    try {
      loss->compute(tensor_of({rows, classes}, pred), tensor_of({rows}, labels), 1.0f, nullptr);
    } catch (const DataError& e) {
      cpu_message = e.what();
    }
    try {
      check_sparse_labels(labels.data(), rows, classes);
    } catch (const DataError& e) {
      host_message = e.what();
    }
    EXPECT_EQ(host_message, cpu_message);
  }
  for (float good : {0.0f, -0.0f, 2.0f}) EXPECT_GE(dm::sparse_label(good, classes), 0) << good;
  EXPECT_NO_THROW(check_sparse_labels(std::vector<float>{0, 1, 2}.data(), 3, classes));
}

TEST_F(DeviceMath, UnknownLossIsAConfigError) {
  class Hinge : public Loss {
   public:
    std::string name() const override { return "hinge"; }
    json config() const override { return "hinge"; }
    void check_shapes(const Shape&, const Shape&) const override {}
    double compute(const Tensor&, const Tensor&, float, Tensor*) const override { return 0; }
  };
  EXPECT_THROW(device_loss(Hinge()), ConfigError);
}

// ---------------------------------------------------------------------------------------------
// Metrics: Metric::evaluate adds the rows in order; count = rows.

void check_metric(const std::string& metric_name, const json& loss_spec, const Shape& out_shape,
                  DeviceMetric::Kind kind, float threshold, const std::vector<float>& pred,
                  const std::vector<float>& target, std::int64_t rows, std::int64_t cols,
                  bool sparse) {
  const std::string what = metric_name + " with " + loss_spec.dump();
  auto loss = make_loss(loss_spec, "loss");
  auto metrics = make_metrics(json::array({metric_name}), "metrics", *loss, out_shape);
  const Metric& m = *metrics.at(0);
  const DeviceMetric d = device_metric(m);
  EXPECT_EQ(d.kind, kind) << what;
  if (kind == DeviceMetric::Kind::binary_accuracy) {
    EXPECT_EQ(d.threshold, threshold) << what;
  }
  const MetricSum cpu =
      m.evaluate(tensor_of({rows, cols}, pred),
                 sparse ? tensor_of({rows}, target) : tensor_of({rows, cols}, target));
  double sum = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    sum += dm::metric_row(d, pred.data(), target.data(), r, cols);
  expect_same_double(cpu.sum, sum, what);
  EXPECT_EQ(cpu.count, static_cast<double>(rows)) << what;
}

TEST_F(DeviceMath, MetricsMatchTheCpuBitForBit) {
  const std::int64_t rows = 40, cols = 6;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  // Categorical, with ties (the first maximum wins) and a NaN.
  std::vector<float> pred = random_values(n, 30, 0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) pred[i] = std::round(pred[i] * 4.0f) / 4.0f;  // many ties
  pred[static_cast<std::size_t>(7 * cols + 2)] = std::nanf("");
  std::vector<float> onehot(n, 0.0f), labels(static_cast<std::size_t>(rows));
  std::mt19937 gen(31);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::int64_t>(gen() % cols);
    labels[static_cast<std::size_t>(r)] = static_cast<float>(k);
    onehot[static_cast<std::size_t>(r * cols + k)] = 1.0f;
  }
  // Some rows of equal predictions and targets so that a hit is likely.
  for (std::int64_t r = 0; r < rows; r += 3)
    for (std::int64_t c = 0; c < cols; ++c)
      pred[static_cast<std::size_t>(r * cols + c)] = onehot[static_cast<std::size_t>(r * cols + c)];
  // Rows whose two largest values tie: the first one is the label (a hit only for the first).
  for (std::int64_t r : {1, 2, 4}) {
    for (std::int64_t c = 0; c < cols; ++c) {
      pred[static_cast<std::size_t>(r * cols + c)] = 0.1f;
      onehot[static_cast<std::size_t>(r * cols + c)] = 0.0f;
    }
    pred[static_cast<std::size_t>(r * cols + r - 1)] = 0.8f;
    pred[static_cast<std::size_t>(r * cols + r + 1)] = 0.8f;
    onehot[static_cast<std::size_t>(r * cols + r - 1)] = 1.0f;
    labels[static_cast<std::size_t>(r)] = static_cast<float>(r - 1);
  }
  labels[5] = std::nanf("");  // matches nothing
  labels[6] = 2.7f;           // truncates to 2, as the CPU's cast
  check_metric("accuracy", "categorical_crossentropy", {cols},
               DeviceMetric::Kind::categorical_accuracy, 0.5f, pred, onehot, rows, cols, false);
  check_metric("categorical_accuracy", "mse", {cols}, DeviceMetric::Kind::categorical_accuracy,
               0.5f, pred, onehot, rows, cols, false);
  check_metric("accuracy", "sparse_categorical_crossentropy", {cols},
               DeviceMetric::Kind::sparse_categorical_accuracy, 0.5f, pred, labels, rows, cols,
               true);
  check_metric("sparse_categorical_accuracy", "mse", {cols},
               DeviceMetric::Kind::sparse_categorical_accuracy, 0.5f, pred, labels, rows, cols,
               true);
  // Binary: several columns (row value = hits / cols), soft targets that never match, the
  // threshold itself (not above it), and logits (threshold 0).
  std::vector<float> bin = random_values(n, 32, -1.0f, 1.0f);
  bin[0] = 0.5f, bin[1] = 0.0f;
  std::vector<float> bt = random_values(n, 33, 0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i)
    if (i % 5 != 0) bt[i] = bt[i] > 0.5f ? 1.0f : 0.0f;
  check_metric("accuracy", "binary_crossentropy", {cols}, DeviceMetric::Kind::binary_accuracy, 0.5f,
               bin, bt, rows, cols, false);
  check_metric("binary_accuracy", "mse", {cols}, DeviceMetric::Kind::binary_accuracy, 0.5f, bin, bt,
               rows, cols, false);
  check_metric("accuracy",
               json{{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}},
               {cols}, DeviceMetric::Kind::binary_accuracy, 0.0f, bin, bt, rows, cols, false);
  check_metric("accuracy", "mse", {1}, DeviceMetric::Kind::binary_accuracy, 0.5f,
               std::vector<float>(bin.begin(), bin.begin() + rows),
               std::vector<float>(bt.begin(), bt.begin() + rows), rows, 1, false);
  // Regression metrics.
  const std::vector<float> a = random_values(n, 34, -5.0f, 5.0f),
                           b = random_values(n, 35, -5.0f, 5.0f);
  check_metric("mse", "mse", {cols}, DeviceMetric::Kind::mean_squared_error, 0.5f, a, b, rows, cols,
               false);
  check_metric("mean_absolute_error", "mse", {cols}, DeviceMetric::Kind::mean_absolute_error, 0.5f,
               a, b, rows, cols, false);
}

// ---------------------------------------------------------------------------------------------
// Optimizers: several parameter tensors in one flat array, several steps, the learning rate
// changed between steps; w and every slot bit for bit.

class FlatParams {
 public:
  FlatParams(const std::vector<Shape>& shapes, std::uint32_t seed) {
    segments_.push_back(0);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      auto p = std::make_unique<Parameter>();
      p->value = test_tensor(shapes[i], seed + static_cast<std::uint32_t>(i), -1.0f, 1.0f);
      p->grad = Tensor(shapes[i]);
      segments_.push_back(segments_.back() + p->value.size());
      params_.push_back(std::move(p));
    }
    w_.resize(static_cast<std::size_t>(segments_.back()));
    for (std::size_t i = 0; i < params_.size(); ++i)
      std::memcpy(w_.data() + segments_[i], params_[i]->value.data(),
                  static_cast<std::size_t>(params_[i]->value.size()) * sizeof(float));
  }
  static Tensor test_tensor(const Shape& shape, std::uint32_t seed, float lo, float hi) {
    Tensor t(shape);
    const std::vector<float> v = random_values(static_cast<std::size_t>(t.size()), seed, lo, hi);
    std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
    return t;
  }
  std::vector<Parameter*> pointers() {
    std::vector<Parameter*> out;
    for (auto& p : params_) out.push_back(p.get());
    return out;
  }
  std::int64_t n() const { return segments_.back(); }
  const std::vector<std::int64_t>& segments() const { return segments_; }
  Parameter& param(std::size_t i) { return *params_[i]; }
  std::size_t count() const { return params_.size(); }
  std::vector<float>& w() { return w_; }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::int64_t> segments_;
  std::vector<float> w_;
};

// The device's step over the flat arrays, with the CPU's order for the norms (the device adds the
// same squares in tiles: see optimizer_update.cu).
void device_step(const DeviceOptimizer& o, FlatParams& f, const std::vector<float>& g,
                 std::vector<std::vector<float>>& slots, std::int64_t step, double lr) {
  const dm::OptimizerStep s = dm::optimizer_step(o, step, lr);
  const auto& seg = f.segments();
  std::vector<double> squared(seg.size() - 1, 0.0);
  for (std::size_t t = 0; t + 1 < seg.size(); ++t)
    for (std::int64_t k = seg[t]; k < seg[t + 1]; ++k)
      squared[t] +=
          static_cast<double>(g[static_cast<std::size_t>(k)]) * g[static_cast<std::size_t>(k)];
  double total = 0;
  for (double v : squared) total += v;
  const double global = dm::global_clip_scale(total, o.global_clipnorm);
  for (std::size_t t = 0; t + 1 < seg.size(); ++t) {
    const double scale = dm::tensor_clip_scale(global, squared[t], o.clipnorm);
    for (std::int64_t k = seg[t]; k < seg[t + 1]; ++k) {
      const auto i = static_cast<std::size_t>(k);
      float* sp[3] = {nullptr, nullptr, nullptr};
      for (std::size_t j = 0; j < slots.size(); ++j) sp[j] = slots[j].data() + i;
      dm::update_element(s, f.w().data() + i, dm::clipped_gradient(s, g[i], scale), sp[0], sp[1],
                         sp[2]);
    }
  }
}

void check_optimizer(const json& spec, DeviceOptimizer::Kind kind) {
  const std::string what = spec.dump();
  auto opt = make_optimizer(spec, "optimizer");
  const DeviceOptimizer d = device_optimizer(*opt);
  EXPECT_EQ(d.kind, kind) << what;
  EXPECT_EQ(optimizer_slot_names(d), opt->slot_names()) << what;
  EXPECT_EQ(dm::optimizer_slot_count(d), static_cast<int>(opt->slot_names().size())) << what;

  FlatParams f({{7, 5}, {5}, {13}, {3, 4}}, 40);
  std::vector<std::vector<float>> slots(opt->slot_names().size(),
                                        std::vector<float>(static_cast<std::size_t>(f.n()), 0.0f));
  std::mt19937 gen(41);
  const double base_lr = opt->learning_rate();
  for (int step = 1; step <= 6; ++step) {
    if (step == 4) opt->set_learning_rate(base_lr * 0.37);  // callbacks change it between steps
    // Gradients of changing size, so that the norm clippings are active on some steps only.
    const float magnitude = step % 2 ? 0.05f : 3.0f;
    std::vector<float> g(static_cast<std::size_t>(f.n()));
    for (std::size_t t = 0; t < f.count(); ++t) {
      Tensor& grad = f.param(t).grad;
      const std::vector<float> v =
          random_values(static_cast<std::size_t>(grad.size()), static_cast<std::uint32_t>(gen()),
                        -magnitude, magnitude * (t == 2 ? 0.1f : 1.0f));
      std::memcpy(grad.data(), v.data(), v.size() * sizeof(float));
      std::memcpy(g.data() + f.segments()[t], v.data(), v.size() * sizeof(float));
    }
    const double lr = opt->learning_rate();
    opt->apply(f.pointers());
    device_step(d, f, g, slots, opt->iterations(), lr);
    for (std::size_t t = 0; t < f.count(); ++t) {
      BitCompare same(what + " step " + std::to_string(step) + " weights of tensor " +
                      std::to_string(t));
      const Tensor& v = f.param(t).value;
      for (std::int64_t k = 0; k < v.size(); ++k)
        same(v[k], f.w()[static_cast<std::size_t>(f.segments()[t] + k)], k);
      for (std::size_t s = 0; s < slots.size(); ++s) {
        BitCompare slot(what + " step " + std::to_string(step) + " slot " + opt->slot_names()[s] +
                        " of tensor " + std::to_string(t));
        const Tensor& sv = opt->slots(t)[s];
        for (std::int64_t k = 0; k < sv.size(); ++k)
          slot(sv[k], slots[s][static_cast<std::size_t>(f.segments()[t] + k)], k);
      }
    }
  }
}

json optimizer(const std::string& cls, json config) {
  return json{{"class_name", cls}, {"config", std::move(config)}};
}

TEST_F(DeviceMath, SgdUpdatesMatchTheCpuBitForBit) {
  using K = DeviceOptimizer::Kind;
  check_optimizer(optimizer("SGD", {{"learning_rate", 0.1}}), K::sgd);
  check_optimizer(optimizer("SGD", {{"learning_rate", 0.05}, {"momentum", 0.9}}), K::sgd);
  check_optimizer(
      optimizer("SGD", {{"learning_rate", 0.05}, {"momentum", 0.8}, {"nesterov", true}}), K::sgd);
  check_optimizer(optimizer("SGD", {{"learning_rate", 0.1}, {"clipvalue", 0.5}}), K::sgd);
  check_optimizer(
      optimizer(
          "SGD",
          {{"learning_rate", 0.1}, {"momentum", 0.5}, {"weight_decay", 0.01}, {"clipnorm", 1.0}}),
      K::sgd);
}

TEST_F(DeviceMath, AdamUpdatesMatchTheCpuBitForBit) {
  using K = DeviceOptimizer::Kind;
  check_optimizer("adam", K::adam);
  check_optimizer(optimizer("Adam", {{"learning_rate", 0.01}, {"amsgrad", true}}), K::adam);
  check_optimizer(optimizer("AdamW", {{"learning_rate", 0.01}}), K::adam);  // weight decay 0.004
  check_optimizer(optimizer("Adam", {{"learning_rate", 0.003},
                                     {"beta_1", 0.8},
                                     {"beta_2", 0.99},
                                     {"epsilon", 1e-5},
                                     {"weight_decay", 0.1},
                                     {"clipnorm", 0.7}}),
                  K::adam);
  check_optimizer(optimizer("AdamW", {{"learning_rate", 0.01},
                                      {"global_clipnorm", 1.5},
                                      {"clipnorm", 0.9},
                                      {"clipvalue", 0.2},
                                      {"amsgrad", true}}),
                  K::adam);
}

TEST_F(DeviceMath, RmspropUpdatesMatchTheCpuBitForBit) {
  using K = DeviceOptimizer::Kind;
  check_optimizer("rmsprop", K::rmsprop);
  check_optimizer(optimizer("RMSprop", {{"learning_rate", 0.01}, {"momentum", 0.9}}), K::rmsprop);
  check_optimizer(optimizer("RMSprop", {{"learning_rate", 0.01}, {"centered", true}}), K::rmsprop);
  check_optimizer(optimizer("RMSprop", {{"learning_rate", 0.01},
                                        {"rho", 0.8},
                                        {"momentum", 0.5},
                                        {"centered", true},
                                        {"global_clipnorm", 2.0}}),
                  K::rmsprop);
}

TEST_F(DeviceMath, OptimizerStepConstantsAreTheCpuOnes) {
  // AdamW is Adam with its own default weight decay; the description keeps it.
  auto adamw = make_optimizer("adamw", "optimizer");
  const DeviceOptimizer d = device_optimizer(*adamw);
  EXPECT_TRUE(d.adamw);
  EXPECT_EQ(d.weight_decay, 0.004);
  EXPECT_EQ(d.epsilon, 1e-7);
  EXPECT_EQ(d.clipnorm, 0.0);
  const dm::OptimizerStep s = dm::optimizer_step(d, 3, 0.001);
  EXPECT_EQ(s.alpha, static_cast<float>(0.001 * std::sqrt(1.0 - std::pow(0.999, 3.0)) /
                                        (1.0 - std::pow(0.9, 3.0))));
  EXPECT_TRUE(s.decay);
  EXPECT_EQ(s.decay_factor, static_cast<float>(1.0 - 0.001 * 0.004));
}

// ---------------------------------------------------------------------------------------------
// Dropout: the mask of every (global sample, column) at every training forward.

TEST_F(DeviceMath, DropoutMasksMatchTheLayerBitForBit) {
  for (double rate : {0.1, 0.5, 0.73}) {
    for (std::int64_t offset : {0, 5, 1000003}) {
      nn::Dropout layer("d", rate, 17);
      Rng init(0);
      layer.build({33}, init);
      layer.set_sample_offset(offset);
      const std::int64_t rows = 11, cols = 33;
      const Tensor x = FlatParams::test_tensor({rows, cols}, 50, 0.5f, 2.0f);
      Tensor ones({rows, cols});
      ones.fill(1.0f);
      for (int call = 0; call < 3; ++call) {
        const std::vector<std::uint64_t> state = layer.random_state();  // {stream, calls so far}
        const Tensor y = layer.forward(x, true).clone();
        const Tensor mask = layer.backward(ones, true).clone();  // 1 * mask
        const std::string what = "rate " + std::to_string(rate) + " offset " +
                                 std::to_string(offset) + " call " + std::to_string(call);
        BitCompare same_mask(what + " mask"), same_y(what + " output");
        const std::uint64_t step_key = dm::dropout_step_key(state[0], state[1]);
        std::int64_t dropped = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < cols; ++c) {
            const std::int64_t i = r * cols + c;
            const float m = dm::dropout_mask_value(state[0], state[1], offset + r, c, rate);
            const float m2 =
                dm::dropout_mask(dm::dropout_row_key(step_key, offset + r), c,
                                 dm::dropout_keep_below(rate), dm::dropout_scale(rate));
            same_mask(mask[i], m, i);
            same_mask(mask[i], m2, i);
            same_y(y[i], dm::fmul(x[i], m), i);
            dropped += m == 0.0f;
          }
        EXPECT_GT(dropped, 0) << what;
        EXPECT_LT(dropped, rows * cols) << what;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::cuda
