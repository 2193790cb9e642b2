// UnitNormalization and Identity (nn/unit_normalization.hpp): values by hand, the floor of an
// all-zero group and its gradient, the gradient against finite differences, the config written
// back, refusals at their place (outputs and gradients against torch: tests/oracle).
#include "nn/unit_normalization.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

TEST(UnitNormalization, ScalesEachGroupToUnitNormByHand) {
  auto layer = test::make_layer("UnitNormalization", json::object());
  Rng init(1);
  layer->build({2, 2}, init);
  // Rows (3, 4) and (0, 0): the first to (0.6, 0.8); the second stays 0, its factor the floor's
  // rsqrt(1e-12) = 1e6, which is also its gradient's factor.
  const Tensor x = Tensor::from_vector({1, 2, 2}, {3, 4, 0, 0});
  const Tensor y = layer->forward(x, true).clone();
  EXPECT_FLOAT_EQ(y[0], 0.6f);
  EXPECT_FLOAT_EQ(y[1], 0.8f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  const Tensor dy = Tensor::from_vector({1, 2, 2}, {1, 0, 0.5f, -2});
  const Tensor dx = layer->backward(dy, true).clone();
  // (dy - y (y·dy)) / 5 = ((1, 0) - 0.6 (0.6, 0.8)) / 5 = (0.128, -0.096).
  EXPECT_FLOAT_EQ(dx[0], 0.128f);
  EXPECT_FLOAT_EQ(dx[1], -0.096f);
  EXPECT_FLOAT_EQ(dx[2], 0.5e6f);
  EXPECT_FLOAT_EQ(dx[3], -2e6f);
}

// The gradient of Σ y·w (w fixed) against central differences of the same sum written in double
// from the definition, for samples (3, 2, 4): over the last axis, and over axes 1 and 3 (for
// x[n, k, j, l], one group per (n, j)).
TEST(UnitNormalization, GradientMatchesFiniteDifferences) {
  for (const json& config : {json{{"axis", -1}}, json{{"axis", {1, 3}}}}) {
    auto layer = test::make_layer("UnitNormalization", config);
    Rng init(1);
    layer->build({3, 2, 4}, init);
    const Tensor x = test::random_tensor({2, 3, 2, 4}, 5);
    const Tensor w = test::random_tensor({2, 3, 2, 4}, 6);
    layer->forward(x, true);
    const Tensor dx = layer->backward(w, true).clone();
    const bool last = config["axis"] == -1;
    // Group of value (n, k, j, l): last axis (n, k, j); axes 1 and 3: (n, j).
    const auto group = [&](std::size_t i) {
      const std::size_t j = (i / 4) % 2, k = (i / 8) % 3, n = i / 24;
      return last ? (n * 3 + k) * 2 + j : n * 2 + j;
    };
    const auto loss = [&](const std::vector<double>& v) {
      std::vector<double> sums(12, 0.0);
      for (std::size_t i = 0; i < v.size(); ++i) sums[group(i)] += v[i] * v[i];
      double total = 0;
      for (std::size_t i = 0; i < v.size(); ++i) total += v[i] / std::sqrt(sums[group(i)]) * w[i];
      return total;
    };
    test::expect_close(test::to_double(dx), test::numeric_gradient(loss, test::to_double(x)), 1e-4,
                       1e-5, config.dump());
  }
}

TEST(UnitNormalization, ConfigReadsBackAndBadAxesAreNamed) {
  for (const json& config : {json{{"axis", -1}}, json{{"axis", {1, 2}}}}) {
    const json written = test::make_layer("UnitNormalization", config)->config();
    EXPECT_EQ(written["axis"], config["axis"]);
    EXPECT_EQ(test::layer_config_error("UnitNormalization", written), "(no error)");
  }
  EXPECT_NE(test::layer_config_error("UnitNormalization", {{"axis", "last"}})
                .find("'layer.config.axis': expected an axis or a list of axes"),
            std::string::npos);
  EXPECT_NE(test::layer_config_error("UnitNormalization", {{"axis", json::array()}})
                .find("'layer.config.axis': expected at least one axis"),
            std::string::npos);
  Rng init(1);
  for (const auto& [axis, message] : std::vector<std::pair<json, std::string>>{
           {0, "axis 0 is the batch axis"},
           {-3, "axis -3 is the batch axis"},
           {3, "axis 3 is not an axis of inputs (None, 4, 2)"}}) {
    auto layer = test::make_layer("UnitNormalization", {{"axis", axis}});
    try {
      layer->build({4, 2}, init);
      ADD_FAILURE() << axis;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Identity, PassesItsInputAndGradientThrough) {
  auto layer = test::make_layer("Identity", json::object());
  Rng init(1);
  EXPECT_EQ(layer->build({3, 2}, init), (Shape{3, 2}));
  const Tensor x = test::random_tensor({4, 3, 2}, 2);
  const Tensor& y = layer->forward(x, true);
  ASSERT_EQ(y.shape(), x.shape());
  for (std::int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]);
  const Tensor dy = test::random_tensor({4, 3, 2}, 3);
  const Tensor& dx = layer->backward(dy, true);
  for (std::int64_t i = 0; i < dy.size(); ++i) EXPECT_EQ(dx[i], dy[i]);
  EXPECT_THROW(layer->forward(test::random_tensor({4, 6}, 1), true), ShapeError);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
