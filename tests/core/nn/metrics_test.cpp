#include <gtest/gtest.h>

#include "tandem/error.hpp"
#include "nn/metric.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::unique_ptr<Metric> accuracy_for(const json& loss, const Shape& out) {
  auto l = make_loss(loss, "loss");
  auto m = make_metrics(json::array({"accuracy"}), "metrics", *l, out);
  return std::move(m.at(0));
}

// The message of the ConfigError `f` throws ("" when it throws none).
template <class F>
std::string config_error_message(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
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
  // A name listed twice is numbered as Keras numbers it.
  const auto twice = make_metrics(json::array({"mae", "mae", "mae"}), "metrics", *l, {1});
  EXPECT_EQ(twice[1]->name(), "mae_1");
  EXPECT_EQ(twice[2]->name(), "mae_2");
  EXPECT_EQ(twice[1]->kind(), twice[0]->kind());
  EXPECT_THROW(make_metrics(json("accuracy"), "metrics", *l, {1}), ConfigError);
}


TEST(Metrics, TopKAccuraciesCountTheTargetAmongTheKLargest) {
  auto l = make_loss("categorical_crossentropy", "loss");
  // Rows: target class 2 is 2nd largest; 4th largest; tied with the 2nd and 3rd (in, as
  // tf.math.in_top_k counts ties at the boundary).
  Tensor p = Tensor::from_vector({3, 4}, {0.1f, 0.5f, 0.3f, 0.1f,    //
                                          0.4f, 0.3f, 0.05f, 0.25f,  //
                                          0.4f, 0.2f, 0.2f, 0.2f});
  Tensor onehot = Tensor::from_vector({3, 4}, {0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0});
  auto two = make_metrics(json::parse(R"([{"class_name": "TopKCategoricalAccuracy",
                                           "config": {"k": 2, "name": "top2"}}])"),
                          "metrics", *l, {4});
  EXPECT_EQ(two[0]->name(), "top2");
  MetricSum s = two[0]->evaluate(p, onehot);
  EXPECT_DOUBLE_EQ(s.sum, 2);  // rows 0 and 2
  EXPECT_DOUBLE_EQ(s.count, 3);
  auto labels = make_loss("sparse_categorical_crossentropy", "loss");
  auto sparse = make_metrics(json::parse(R"([{"class_name": "SparseTopKCategoricalAccuracy",
                                              "config": {"k": 1}}])"),
                             "metrics", *labels, {4});
  EXPECT_EQ(sparse[0]->name(), "sparse_top_k_categorical_accuracy");
  // k = 1 with labels: plain accuracy but for ties (row 2: class 0 wins outright).
  EXPECT_DOUBLE_EQ(sparse[0]->evaluate(p, Tensor::from_vector({3}, {1, 0, 0})).sum, 3);
  // The function name takes Keras' default k = 5: every class of 4 is in.
  auto five = make_metrics(json::array({"top_k_categorical_accuracy"}), "metrics", *l, {4});
  EXPECT_DOUBLE_EQ(five[0]->evaluate(p, onehot).sum, 3);
}

// Metrics read the targets in the loss's form: one class index per sample for
// sparse_categorical_crossentropy (the sparse metrics), the output's shape for every other loss.
// Read in the other form they compared the wrong values (a row's targets past its one label).
TEST(Metrics, AMetricThatReadsTheTargetsInAnotherFormIsRefused) {
  auto labels = make_loss("sparse_categorical_crossentropy", "loss");
  auto onehot = make_loss("categorical_crossentropy", "loss");
  for (const char* name : {"Precision", "recall", "mse", "mae", "binary_accuracy",
                           "categorical_accuracy", "top_k_categorical_accuracy"}) {
    const auto message = config_error_message([&] {
      make_metrics(json::array({"accuracy", name}), "metrics", *labels, {3});
    });
    EXPECT_NE(message.find("at 'metrics[1]'"), std::string::npos) << message;
    EXPECT_NE(message.find("one class index per sample"), std::string::npos) << message;
  }
  for (const char* name : {"sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy"}) {
    const auto message =
        config_error_message([&] { make_metrics(json::array({name}), "metrics", *onehot, {3}); });
    EXPECT_NE(message.find("at 'metrics[0]'"), std::string::npos) << message;
    EXPECT_NE(message.find("categorical_accuracy"), std::string::npos) << message;
  }
  // "accuracy" resolves to the form the loss gives.
  EXPECT_EQ(make_metrics(json::array({"accuracy"}), "metrics", *labels, {3})[0]->kind(),
            "sparse_categorical_accuracy");
  EXPECT_EQ(make_metrics(json::array({"accuracy"}), "metrics", *onehot, {3})[0]->kind(),
            "categorical_accuracy");
  // By shapes alone, as Keras' is_binary_or_sparse_categorical: binary cross-entropy over 3
  // units (multi-label) is categorical accuracy; one unit is binary accuracy, whatever the loss.
  auto binary = make_loss("binary_crossentropy", "loss");
  EXPECT_EQ(make_metrics(json::array({"accuracy"}), "metrics", *binary, {3})[0]->kind(),
            "categorical_accuracy");
  EXPECT_EQ(make_metrics(json::array({"acc"}), "metrics", *binary, {1})[0]->kind(),
            "binary_accuracy");
  EXPECT_EQ(
      make_metrics(json::array({"accuracy"}), "metrics", *make_loss("mse", "loss"), {1})[0]->kind(),
      "binary_accuracy");
}

TEST(Metrics, PrecisionAndRecallAreRatiosOfSumsOverEveryElement) {
  auto l = make_loss("binary_crossentropy", "loss");
  auto m = make_metrics(json::array({"precision", "Recall"}), "metrics", *l, {2});
  // Elements (pred > 0.5, target): TP (0.9,1) (0.7,1); FP (0.6,0); FN (0.2,1) (0.4,1); TN (0.1,0)
  Tensor p = Tensor::from_vector({3, 2}, {0.9f, 0.6f, 0.2f, 0.7f, 0.1f, 0.4f});
  Tensor t = Tensor::from_vector({3, 2}, {1, 0, 1, 1, 0, 1});
  const MetricSum precision = m[0]->evaluate(p, t), recall = m[1]->evaluate(p, t);
  EXPECT_DOUBLE_EQ(precision.sum, 2);
  EXPECT_DOUBLE_EQ(precision.count, 3);  // predicted positives
  EXPECT_DOUBLE_EQ(recall.sum, 2);
  EXPECT_DOUBLE_EQ(recall.count, 4);  // actual positives
  EXPECT_EQ(m[1]->name(), "Recall");  // a class named as a string: Keras 3 logs the string
  EXPECT_EQ(make_metrics(json::array({"Recall"}), "metrics", *l, {2}, nullptr,
                         KerasDefinitions::keras2)[0]
                ->name(),
            "recall");  // Keras 2: the class's default name
  // Batches combine as Keras' stateful metrics do: a ratio of totals, not a mean of ratios.
  MetricSum a = m[0]->evaluate(Tensor::from_vector({1, 2}, {0.9f, 0.8f}),
                               Tensor::from_vector({1, 2}, {1, 0}));
  a.add(m[0]->evaluate(Tensor::from_vector({1, 2}, {0.9f, 0.1f}),
                       Tensor::from_vector({1, 2}, {1, 0})));
  EXPECT_DOUBLE_EQ(a.mean(), 2.0 / 3.0);
  // Nothing predicted positive: 0, as Keras' divide_no_nan gives.
  EXPECT_DOUBLE_EQ(m[0]->evaluate(Tensor::from_vector({1, 2}, {0.1f, 0.2f}),
                                  Tensor::from_vector({1, 2}, {1, 0}))
                       .mean(),
                   0.0);
  // A custom threshold.
  auto strict = make_metrics(json::parse(R"([{"class_name": "Precision",
                                              "config": {"thresholds": 0.8, "top_k": null}}])"),
                             "metrics", *l, {2});
  EXPECT_DOUBLE_EQ(strict[0]->evaluate(p, t).count, 1);
}

TEST(Metrics, BadClassFormsNameTheirPath) {
  auto l = make_loss("mse", "loss");
  const auto error_of = [&](const char* text) {
    try {
      make_metrics(json::parse(text), "metrics", *l, {3});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"([{"class_name": "TopKCategoricalAccuracy", "config": {"k": 0}}])")
                .find("'metrics[0].config.k'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"class_name": "Precision", "config": {"class_id": 1}}])")
                .find("'metrics[0].config.class_id'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"class_name": "Precision", "config": {"thresholds": 1.5}}])")
                .find("'metrics[0].config.thresholds'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"class_name": "AUCX"}])").find("'metrics[0].class_name': unknown metric"),
            std::string::npos);
  EXPECT_NE(error_of(R"([3])").find("'metrics[0]'"), std::string::npos);
  EXPECT_EQ(error_of(R"(["precision", {"class_name": "Precision"}])"), "no error");
}

}  // namespace
}  // namespace tandem
