#include <gtest/gtest.h>

#include "tandem/error.hpp"
#include "nn/metric.hpp"

namespace tandem {
namespace {

using nlohmann::json;

std::unique_ptr<Metric> accuracy_for(const json& loss, const Shape& out) {
  auto l = make_loss(loss, "loss");
  auto m = make_metrics(json::array({"accuracy"}), "metrics", *l, out);
  return std::move(m.at(0));
}

TEST(Metrics, AccuracyIsChosenTheWayKerasChooses) {
  // Sparse labels with the sparse loss: argmax == label.
  Tensor p = Tensor::from_vector({3, 3}, {0.1f, 0.7f, 0.2f, 0.5f, 0.2f, 0.3f, 0.2f, 0.2f, 0.6f});
  auto sparse = accuracy_for("sparse_categorical_crossentropy", {3});
  MetricSum s = sparse->evaluate(p, Tensor::from_vector({3}, {1, 0, 1}));
  EXPECT_DOUBLE_EQ(s.sum, 2);
  EXPECT_DOUBLE_EQ(s.count, 3);
  // One-hot labels with categorical loss: argmax == argmax.
  auto cat = accuracy_for("categorical_crossentropy", {3});
  Tensor onehot = Tensor::from_vector({3, 3}, {0, 1, 0, 0, 0, 1, 0, 0, 1});
  EXPECT_DOUBLE_EQ(cat->evaluate(p, onehot).sum, 2);
  // One output unit: binary accuracy at 0.5, even with mse.
  auto bin = accuracy_for("mse", {1});
  Tensor pb = Tensor::from_vector({4, 1}, {0.2f, 0.6f, 0.51f, 0.4f});
  EXPECT_DOUBLE_EQ(bin->evaluate(pb, Tensor::from_vector({4, 1}, {0, 1, 0, 0})).sum, 3);
  // Binary loss from logits thresholds at 0.
  auto logits = accuracy_for(
      json{{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}}, {1});
  Tensor pl = Tensor::from_vector({3, 1}, {-0.1f, 0.3f, 2.0f});
  EXPECT_DOUBLE_EQ(logits->evaluate(pl, Tensor::from_vector({3, 1}, {0, 1, 0})).sum, 2);
}

TEST(Metrics, SumsCombineByAddition) {
  MetricSum a{3, 4}, b{1, 4};
  a.add(b);
  EXPECT_DOUBLE_EQ(a.mean(), 0.5);
  EXPECT_DOUBLE_EQ(MetricSum{}.mean(), 0.0);
}

TEST(Metrics, UnknownOrDuplicateMetricIsAPathError) {
  auto l = make_loss("mse", "loss");
  try {
    make_metrics(json::array({"accuracy", "f1"}), "metrics", *l, {1});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'metrics[1]'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_metrics(json::array({"mae", "mae"}), "metrics", *l, {1}), ConfigError);
  EXPECT_THROW(make_metrics(json("accuracy"), "metrics", *l, {1}), ConfigError);
}

}  // namespace
}  // namespace tandem
