// MaxPooling2D and AveragePooling2D (nn/pooling.hpp).
#include "nn/pooling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::expect_close;
using test::numeric_gradient;

struct PoolCase {
  PoolKind kind;
  std::int64_t rows, cols, channels;
  std::int64_t ph, pw;
  std::int64_t sh, sw;
  bool same;
};

void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << (c.kind == PoolKind::max ? "max " : "average ") << c.rows << "x" << c.cols << "x"
      << c.channels << ", pool " << c.ph << "x" << c.pw << ", strides " << c.sh << "x" << c.sw
      << (c.same ? ", same" : ", valid");
}

// TensorFlow's geometry, written out independently of nn/spatial.hpp.
struct Axis {
  std::int64_t out, pad;
};
Axis axis(std::int64_t in, std::int64_t k, std::int64_t s, bool same) {
  if (!same) return {(in - k) / s + 1, 0};
  const std::int64_t out = (in + s - 1) / s;
  return {out, std::max<std::int64_t>(0, (out - 1) * s + k - in) / 2};
}

// Naive pooling in double over the in-range cells of each window (padding never wins a max and
// is left out of an average). Returns sum(w * y).
double reference_loss(const PoolCase& c, std::int64_t batch, const std::vector<double>& x,
                      const std::vector<double>& w) {
  const Axis ar = axis(c.rows, c.ph, c.sh, c.same), ac = axis(c.cols, c.pw, c.sw, c.same);
  double loss = 0;
  std::size_t wi = 0;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t i = 0; i < ar.out; ++i)
      for (std::int64_t j = 0; j < ac.out; ++j)
        for (std::int64_t ch = 0; ch < c.channels; ++ch) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (std::int64_t a = 0; a < c.ph; ++a)
            for (std::int64_t b = 0; b < c.pw; ++b) {
              const std::int64_t r = i * c.sh + a - ar.pad, q = j * c.sw + b - ac.pad;
              if (r < 0 || r >= c.rows || q < 0 || q >= c.cols) continue;
              const double v = x[((n * c.rows + r) * c.cols + q) * c.channels + ch];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          loss += w[wi++] * (c.kind == PoolKind::max ? best : sum / count);
        }
  return loss;
}

// Distinct values at least 0.01 apart in a shuffled order: no ties, so max pooling's gradient
// is well defined and central differences never cross a switch of the arg-max.
Tensor tie_free_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor t(shape);
  std::vector<std::int64_t> order(static_cast<std::size_t>(t.size()));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  for (std::size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[static_cast<std::size_t>(rng.uniform() * i) % i]);
  for (std::int64_t i = 0; i < t.size(); ++i)
    t[i] = 0.01f * static_cast<float>(order[static_cast<std::size_t>(i)] - t.size() / 2);
  return t;
}

class PoolingGradientTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolingGradientTest, ForwardAndInputGradientMatchDoubleReference) {
  const PoolCase c = GetParam();
  Pooling2DOptions o;
  o.kind = c.kind;
  o.pool_size = {c.ph, c.pw};
  o.strides = {c.sh, c.sw};
  o.padding = c.same ? Padding::same : Padding::valid;
  Pooling2D pool("pool", o);
  Rng init(0);
  const Axis ar = axis(c.rows, c.ph, c.sh, c.same), ac = axis(c.cols, c.pw, c.sw, c.same);
  ASSERT_EQ(pool.build({c.rows, c.cols, c.channels}, init), (Shape{ar.out, ac.out, c.channels}));
  EXPECT_TRUE(pool.parameters().empty());

  const std::int64_t batch = 2;
  Tensor x = tie_free_tensor({batch, c.rows, c.cols, c.channels}, 7);
  const Tensor& y = pool.forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{batch, ar.out, ac.out, c.channels}));
  Tensor w = test::random_tensor(y.shape(), 8);
  const auto xd = test::to_double(x), wd = test::to_double(w);
  double tandem_loss = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) tandem_loss += static_cast<double>(y[i]) * w[i];
  EXPECT_NEAR(tandem_loss, reference_loss(c, batch, xd, wd), 1e-4 * (1 + std::fabs(tandem_loss)));

  const Tensor& gx = pool.backward(w, true);
  ASSERT_EQ(gx.shape(), x.shape());
  expect_close(test::to_double(gx),
               numeric_gradient([&](const auto& v) { return reference_loss(c, batch, v, wd); }, xd),
               1e-3, 1e-4, "d/dx");
  EXPECT_TRUE(pool.backward(w, false).empty());
}

constexpr auto kMax = PoolKind::max;
constexpr auto kAvg = PoolKind::average;

INSTANTIATE_TEST_SUITE_P(
    Variants, PoolingGradientTest,
    ::testing::Values(
        // kind, rows, cols, channels, pool (h, w), strides (h, w), same
        PoolCase{kMax, 7, 5, 3, 2, 2, 2, 2, false}, PoolCase{kMax, 7, 5, 3, 2, 2, 2, 2, true},
        PoolCase{kMax, 7, 5, 3, 3, 2, 1, 1, false}, PoolCase{kMax, 7, 5, 3, 3, 2, 1, 1, true},
        PoolCase{kMax, 7, 5, 3, 3, 3, 2, 1, true}, PoolCase{kAvg, 7, 5, 3, 2, 2, 2, 2, false},
        PoolCase{kAvg, 7, 5, 3, 2, 2, 2, 2, true}, PoolCase{kAvg, 7, 5, 3, 3, 2, 1, 1, false},
        PoolCase{kAvg, 7, 5, 3, 3, 2, 1, 1, true}, PoolCase{kAvg, 7, 5, 3, 3, 3, 2, 1, true},
        PoolCase{kAvg, 6, 6, 2, 3, 3, 3, 3, true}, PoolCase{kMax, 4, 3, 1, 4, 3, 1, 1, false}));

TEST(Pooling2D, OutputShapesAsKerasComputesThem) {
  struct Case {
    Shape input;
    Pair pool, strides;
    Padding padding;
    Shape expected;
  };
  const Case cases[] = {
      {{26, 26, 32}, {2, 2}, {2, 2}, Padding::valid, {13, 13, 32}},
      {{11, 11, 64}, {2, 2}, {2, 2}, Padding::valid, {5, 5, 64}},
      {{11, 11, 64}, {2, 2}, {2, 2}, Padding::same, {6, 6, 64}},
      {{7, 5, 3}, {3, 3}, {1, 1}, Padding::valid, {5, 3, 3}},
      {{7, 5, 3}, {3, 3}, {1, 1}, Padding::same, {7, 5, 3}},
      {{7, 5, 3}, {3, 2}, {2, 3}, Padding::same, {4, 2, 3}},
  };
  for (const Case& c : cases)
    for (PoolKind kind : {PoolKind::max, PoolKind::average}) {
      Pooling2D pool("p", {kind, c.pool, c.strides, c.padding, std::nullopt});
      Rng init(0);
      EXPECT_EQ(pool.build(c.input, init), c.expected) << shape_to_string(c.input);
    }
}

TEST(Pooling2D, BadShapesNameTheLayer) {
  auto expect_shape_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("'squash'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Rng init(0);
  Pooling2DOptions o{PoolKind::max, {3, 3}, {3, 3}, Padding::valid, std::nullopt};
  expect_shape_error(
      [&] {
        Pooling2D("squash", o).build({2, 8, 4}, init);
      },
      "larger than its input");
  expect_shape_error([&] { Pooling2D("squash", o).build({8, 8}, init); }, "(MaxPooling2D)");
  expect_shape_error([&] { Pooling2D("squash", o).build({8, -1, 2}, init); }, "positive");
  o.kind = PoolKind::average;
  o.pool_size = {0, 2};
  expect_shape_error([&] { Pooling2D("squash", o).build({8, 8, 2}, init); }, "(AveragePooling2D)");
  o.pool_size = {2, 2};
  o.strides = {2, 2};
  Pooling2D pool("squash", o);
  pool.build({8, 8, 2}, init);
  Tensor wrong({1, 8, 8, 3});
  expect_shape_error([&] { pool.forward(wrong, true); }, "(None, 8, 8, 2)");
  Tensor x({1, 8, 8, 2});
  pool.forward(x, true);
  Tensor wrong_grad({1, 4, 4, 3});
  expect_shape_error([&] { pool.backward(wrong_grad, true); }, "(1, 4, 4, 2)");
}

TEST(Pooling2D, CachesPerBatchSize) {
  Pooling2D pool("p", {PoolKind::max, {2, 2}, {2, 2}, Padding::same, std::nullopt});
  Rng init(0);
  pool.build({5, 5, 4}, init);
  Tensor big = tie_free_tensor({3, 5, 5, 4}, 1);
  const Tensor y3 = pool.forward(big, true).clone();
  const Tensor& y1 = pool.forward(Tensor::view(big, 0, {1, 5, 5, 4}), true);
  ASSERT_EQ(y1.shape(), (Shape{1, 3, 3, 4}));
  for (std::int64_t i = 0; i < y1.size(); ++i) EXPECT_EQ(y1[i], y3[i]);
  // The backward of the batch of one routes each gradient to its window's maximum.
  Tensor g({1, 3, 3, 4});
  g.fill(1.0f);
  const Tensor& gx = pool.backward(g, true);
  double total = 0;
  for (float v : gx.values()) total += v;
  EXPECT_EQ(total, 36.0);
  Tensor none({0, 5, 5, 4});
  EXPECT_EQ(pool.forward(none, true).shape(), (Shape{0, 3, 3, 4}));
  EXPECT_EQ(pool.backward(Tensor({0, 3, 3, 4}), true).shape(), (Shape{0, 5, 5, 4}));
}

json pool_model(const std::string& cls, const json& pool_config) {
  json cfg = pool_config;
  cfg["input_shape"] = {8, 6, 3};
  return {{"class_name", "Sequential"},
          {"config", {{"layers", {{{"class_name", cls}, {"config", cfg}}}}}}};
}

TEST(Pooling2D, ParsesKerasConfigs) {
  auto m = Model::from_config(pool_model("MaxPooling2D", json::object()), "model", 0);
  EXPECT_EQ(m->layer(0).name(), "max_pooling2d");
  EXPECT_EQ(m->output_shape(), (Shape{4, 3, 3}));  // pool_size 2, strides = pool_size
  auto a = Model::from_config(pool_model("AveragePooling2D", {{"pool_size", 3},
                                                              {"strides", nullptr},
                                                              {"padding", "same"},
                                                              {"data_format", "channels_last"}}),
                              "model", 0);
  EXPECT_EQ(a->layer(0).name(), "average_pooling2d");
  EXPECT_EQ(a->layer(0).class_name(), "AveragePooling2D");
  EXPECT_EQ(a->output_shape(), (Shape{3, 2, 3}));
  const json cfg = a->layer(0).config();
  EXPECT_EQ(cfg["pool_size"], json::array({3, 3}));
  EXPECT_EQ(cfg["strides"], json::array({3, 3}));
  EXPECT_EQ(cfg["padding"], "same");
  auto again = Model::from_config(pool_model("AveragePooling2D", cfg), "model", 0);
  EXPECT_EQ(again->layer(0).config(), cfg);
  auto s = Model::from_config(pool_model("MaxPooling2D", {{"pool_size", {3, 2}}, {"strides", 1}}),
                              "model", 0);
  EXPECT_EQ(s->output_shape(), (Shape{6, 5, 3}));
  EXPECT_EQ(s->count_params(), 0);
}

TEST(Pooling2D, ConfigErrorsNameTheJsonPath) {
  auto error = [](const std::string& cls, const json& cfg) -> std::string {
    try {
      Model::from_config(pool_model(cls, cfg), "model", 0);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string at = "'model.config.layers[0].config.";
  EXPECT_NE(error("MaxPooling2D", {{"pool_size", {2, 0}}}).find(at + "pool_size[1]'"),
            std::string::npos);
  EXPECT_NE(error("MaxPooling2D", {{"pool_size", {2, 2, 2}}}).find(at + "pool_size'"),
            std::string::npos);
  EXPECT_NE(error("AveragePooling2D", {{"strides", -1}}).find(at + "strides'"), std::string::npos);
  EXPECT_NE(error("AveragePooling2D", {{"padding", "causal"}}).find(at + "padding'"),
            std::string::npos);
  EXPECT_NE(error("MaxPooling2D", {{"data_format", "channels_first"}}).find(at + "data_format'"),
            std::string::npos);
  EXPECT_NE(error("MaxPooling2D", {{"pool", 2}}).find(at + "pool': unknown key"),
            std::string::npos);
  const std::string big = error("MaxPooling2D", {{"pool_size", 9}});
  EXPECT_NE(big.find("'model.config.layers[0]'"), std::string::npos) << big;
  EXPECT_NE(big.find("layer 'max_pooling2d' (MaxPooling2D)"), std::string::npos) << big;
}

}  // namespace
}  // namespace tandem::nn
