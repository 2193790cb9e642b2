// AUC, MeanIoU and OneHotMeanIoU against values worked out by hand: a ROC curve's trapezoids,
// a precision-recall curve's steps, a confusion matrix's IoUs; sample weights counted as
// repeated samples; logits read through a sigmoid; the value of the epoch computed from the
// summed histogram (not a mean of the batches' values); and the configs Tandem refuses, at
// their keys.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/ops.hpp"
#include "nn/histogram_metrics.hpp"
#include "nn/objective.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::unique_ptr<Metric> metric_for(const json& spec, const json& loss, const Shape& out) {
  auto l = make_loss(loss, "loss");
  auto m = make_metrics(json::array({spec}), "metrics", *l, out);
  return std::move(m.at(0));
}

std::unique_ptr<Metric> auc(const json& config) {
  return metric_for({{"class_name", "AUC"}, {"config", config}}, "binary_crossentropy", {1});
}

// Four samples: negatives at 0.1 and 0.4, positives at 0.35 and 0.8.
const Tensor kScores = Tensor::from_vector({4, 1}, {0.1f, 0.4f, 0.35f, 0.8f});
const Tensor kLabels = Tensor::from_vector({4, 1}, {0, 0, 1, 1});

TEST(HistogramMetrics, RocAucIsTheTrapezoidsUnderTheCurve) {
  // The ROC points (fpr, tpr): (1, 1), (0.5, 1), (0.5, 0.5), (0, 0.5), (0, 0): area 0.75, the
  // share of (positive, negative) pairs ranked right.
  auto m = auc(json::object());
  EXPECT_EQ(m->name(), "auc");
  EXPECT_TRUE(m->histogram());
  EXPECT_EQ(m->parts(), 400u);  // 200 thresholds, positive and negative weight each
  EXPECT_NEAR(m->evaluate(kScores, kLabels).sum, 0.75, 1e-12);
  // Logits (shifted by 5: the same order) rank the samples the same way through the sigmoid.
  Tensor logits({4, 1});
  for (std::int64_t i = 0; i < 4; ++i) logits[i] = std::log(kScores[i] / (1 - kScores[i])) + 5;
  EXPECT_NEAR(auc({{"from_logits", true}})->evaluate(logits, kLabels).sum, 0.75, 1e-12);
  // Read as probabilities, they are all above 1: clipped, tied, no better than chance.
  EXPECT_NEAR(auc(json::object())->evaluate(logits, kLabels).sum, 0.5, 1e-12);
}

// Keras casts each label to bool before counting it: a soft or count label is a positive one
// (it was counted as t positives and 1 - t negatives: an AUC above 1 for counts).
TEST(HistogramMetrics, AucCountsEveryNonZeroLabelAsAPositive) {
  const Tensor soft = Tensor::from_vector({4, 1}, {0, 0, 0.3f, 2});
  EXPECT_NEAR(auc(json::object())->evaluate(kScores, soft).sum, 0.75, 1e-12);
  EXPECT_NEAR(auc({{"curve", "PR"}})->evaluate(kScores, soft).sum, (1 - std::log(1.5)) / 2 + 0.5,
              1e-12);
}

TEST(HistogramMetrics, PrecisionRecallAucSumsItsSteps) {
  // (recall, precision) from the lowest threshold up: (1, 1/2), (1, 2/3), (1/2, 1/2), (1/2, 1),
  // (0, 0). Minoring takes the lower precision of each step, majoring the higher.
  EXPECT_NEAR(
      auc({{"curve", "PR"}, {"summation_method", "minoring"}})->evaluate(kScores, kLabels).sum,
      0.25, 1e-12);
  EXPECT_NEAR(
      auc({{"curve", "PR"}, {"summation_method", "majoring"}})->evaluate(kScores, kLabels).sum,
      0.5 * 2.0 / 3.0 + 0.5, 1e-12);
  // Interpolated (Davis & Goadrich, Keras' interpolate_pr_auc), by hand. From threshold to
  // threshold the (tp, predicted positives) counts go (2, 4) -> (2, 3) -> (1, 2) -> (1, 1) ->
  // (0, 0); only steps where tp drops add area: (2, 3) -> (1, 2) with slope 1 and intercept
  // 1 - 2 = -1 adds (1 - log(3/2)) / (tp + fn = 2), and (1, 1) -> (0, 0) with intercept 0 adds
  // 1 / 2.
  EXPECT_NEAR(auc({{"curve", "PR"}})->evaluate(kScores, kLabels).sum, (1 - std::log(1.5)) / 2 + 0.5,
              1e-12);
  // Keras' from_str spellings: "pr", "Minoring".
  EXPECT_NEAR(
      auc({{"curve", "pr"}, {"summation_method", "Minoring"}})->evaluate(kScores, kLabels).sum,
      0.25, 1e-12);
  // ROC with minoring and majoring bound the interpolated area.
  EXPECT_NEAR(auc({{"summation_method", "minoring"}})->evaluate(kScores, kLabels).sum, 0.75, 1e-12);
  EXPECT_NEAR(auc({{"summation_method", "majoring"}})->evaluate(kScores, kLabels).sum, 0.75, 1e-12);
}

TEST(HistogramMetrics, SampleWeightsCountAsRepeatedSamples) {
  // Weight 2 on the positive at 0.35 is that sample twice: pairs ranked right (2·1 + 1 + 1) of
  // 3 · 2.
  auto m = auc(json::object());
  backend::Backend& ops = backend::cpu_backend();
  auto sums = ops.sums();
  sums->reset(m->parts());
  const Tensor weights = Tensor::from_vector({4}, {1, 1, 2, 1});
  ops.metric_histogram(m->desc(), kScores, kLabels, {&weights}, 1, *sums, 0);
  std::vector<MetricSum> parts;
  for (double v : sums->read()) parts.push_back({v, 0});
  EXPECT_NEAR(m->value(parts), 4.0 / 6.0, 1e-12);
  const Tensor repeated = Tensor::from_vector({5, 1}, {0.1f, 0.4f, 0.35f, 0.35f, 0.8f});
  EXPECT_NEAR(m->evaluate(repeated, Tensor::from_vector({5, 1}, {0, 0, 1, 1, 1})).sum, 4.0 / 6.0,
              1e-12);
}

// True classes 0 0 1 1 2, predicted (argmax) 0 1 1 1 0.
const Tensor kClassScores = Tensor::from_vector(
    {5, 3},
    {0.8f, 0.1f, 0.1f, 0.2f, 0.7f, 0.1f, 0.1f, 0.6f, 0.3f, 0.3f, 0.4f, 0.3f, 0.5f, 0.2f, 0.3f});
const Tensor kClassLabels = Tensor::from_vector({5}, {0, 0, 1, 1, 2});

TEST(HistogramMetrics, MeanIouAveragesTheClassesIntersectionOverUnion) {
  // IoU: class 0 1 / (2 + 2 - 1), class 1 2 / (2 + 3 - 2), class 2 0 / (1 + 0 - 0).
  auto m = metric_for(
      {{"class_name", "MeanIoU"}, {"config", {{"num_classes", 3}, {"sparse_y_pred", false}}}},
      "sparse_categorical_crossentropy", {3});
  EXPECT_EQ(m->name(), "mean_io_u");
  EXPECT_EQ(m->parts(), 9u);
  EXPECT_NEAR(m->evaluate(kClassScores, kClassLabels).sum, (1.0 / 3 + 2.0 / 3 + 0) / 3, 1e-12);
  // Without class 2's row: class 0 1 / 2, class 1 2 / 3, class 2 absent (not averaged).
  auto ignoring = metric_for(
      {{"class_name", "MeanIoU"},
       {"config",
        {{"num_classes", 3}, {"sparse_y_pred", false}, {"ignore_class", 2}, {"name", "miou"}}}},
      "sparse_categorical_crossentropy", {3});
  EXPECT_EQ(ignoring->name(), "miou");
  EXPECT_NEAR(ignoring->evaluate(kClassScores, kClassLabels).sum, (0.5 + 2.0 / 3) / 2, 1e-12);
  // 2.0, as Python may write the index, is class 2.
  auto ignoring_float = metric_for(
      {{"class_name", "MeanIoU"},
       {"config", {{"num_classes", 3}, {"sparse_y_pred", false}, {"ignore_class", 2.0}}}},
      "sparse_categorical_crossentropy", {3});
  EXPECT_NEAR(ignoring_float->evaluate(kClassScores, kClassLabels).sum, (0.5 + 2.0 / 3) / 2, 1e-12);
  // One-hot targets: the same matrix.
  Tensor one_hot({5, 3});
  for (std::int64_t r = 0; r < 5; ++r)
    one_hot[r * 3 + static_cast<std::int64_t>(kClassLabels[r])] = 1;
  auto from_one_hot =
      metric_for({{"class_name", "OneHotMeanIoU"}, {"config", {{"num_classes", 3}}}},
                 "categorical_crossentropy", {3});
  EXPECT_EQ(from_one_hot->name(), "one_hot_mean_io_u");
  EXPECT_NEAR(from_one_hot->evaluate(kClassScores, one_hot).sum, (1.0 / 3 + 2.0 / 3) / 3, 1e-12);
}

TEST(HistogramMetrics, AnEpochsValueComesFromItsSummedHistogramNotTheBatchesMean) {
  auto model = Model::from_config(
      json::parse(R"({"class_name": "Sequential", "config": {"layers": [{"class_name": "Dense",
        "config": {"units": 1, "activation": "sigmoid", "input_shape": [1]}}]}})"),
      "model", 3);
  const Objective o =
      make_objective("binary_crossentropy", json(), json::array({"AUC", "accuracy"}), *model);
  // Named by a string, a metric is logged under that string in Keras 3 (compile_utils'
  // get_metric); a Keras 2 model logs a class name under the class's default name.
  EXPECT_EQ(o.metric_names(), (std::vector<std::string>{"AUC", "accuracy"}));
  auto keras2 = Model::from_config(
      json::parse(R"({"class_name": "Sequential", "keras_version": "2.15.0", "config": {"layers":
        [{"class_name": "Dense", "config": {"units": 1, "input_shape": [1]}}]}})"),
      "model", 3);
  EXPECT_EQ(
      make_objective("binary_crossentropy", json(), json::array({"AUC", "Recall", "acc"}), *keras2)
          .metric_names(),
      (std::vector<std::string>{"auc", "recall", "acc"}));
  EXPECT_EQ(o.part_count(), 401u);
  const Tensor x = Tensor::from_vector({6, 1}, {-2, 1, 0.5f, 2, -1, 3});
  const Tensor y = Tensor::from_vector({6, 1}, {0, 1, 0, 1, 1, 0});
  auto sums_of = [&](std::int64_t first, std::int64_t rows) {
    ObjectiveScratch scratch;
    auto sums = backend::cpu_backend().sums();
    const Tensor xs = Tensor::view(x, first, {rows, 1}), ys = Tensor::view(y, first, {rows, 1});
    o.enqueue(backend::cpu_backend(), *model, model->forward_outputs(xs, false), ys, 1.0f, false,
              scratch, *sums);
    return o.read(*sums, rows).metrics;
  };
  const auto whole = sums_of(0, 6), a = sums_of(0, 3), b = sums_of(3, 3);
  std::vector<MetricSum> added = a;
  for (std::size_t i = 0; i < added.size(); ++i) added[i].add(b[i]);
  const double epoch = o.values(added)[0];
  EXPECT_EQ(epoch, o.values(whole)[0]);
  EXPECT_NE(epoch, (o.values(a)[0] + o.values(b)[0]) / 2);  // AUC is no mean
  EXPECT_EQ(o.values(added)[1], o.values(whole)[1]);
}

std::string config_error(const json& spec, const json& loss, const Shape& out) {
  try {
    metric_for(spec, loss, out);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(HistogramMetrics, ConfigsTandemCannotComputeAreRefusedAtTheirKeys) {
  const json sparse = "sparse_categorical_crossentropy";
  const auto expect_error = [](const std::string& error, const std::string& expected) {
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  };
  const auto with = [](const char* cls, const json& config) {
    return json{{"class_name", cls}, {"config", config}};
  };
  expect_error(config_error("MeanIoU", sparse, {3}), "at 'metrics[0].config.num_classes'");
  expect_error(config_error(with("MeanIoU", {{"num_classes", 3}}), sparse, {3}),
               "at 'metrics[0].config.sparse_y_pred': the output has 3 values on its last axis");
  expect_error(config_error(with("MeanIoU", {{"num_classes", 3}, {"sparse_y_pred", false}}),
                            "categorical_crossentropy", {3}),
               "at 'metrics[0].config.sparse_y_true': the targets are 3 values on the last axis");
  expect_error(config_error(with("OneHotMeanIoU", {{"num_classes", 3}}), sparse, {3}),
               "the targets are class indices");
  expect_error(
      config_error(with("MeanIoU", {{"num_classes", 4}, {"sparse_y_pred", false}}), sparse, {3}),
      "at 'metrics[0].config.num_classes': 4 classes, but the output has 3");
  expect_error(config_error(with("MeanIoU", {{"num_classes", 1}}), sparse, {3}),
               "expected 2 to 4096 classes");
  expect_error(config_error(with("MeanIoU", {{"num_classes", 3}, {"axis", 1}}), sparse, {3}),
               "at 'metrics[0].config.axis'");
  expect_error(
      config_error(with("MeanIoU", {{"num_classes", 3}, {"ignore_class", "cat"}}), sparse, {3}),
      "at 'metrics[0].config.ignore_class'");
  expect_error(
      config_error(with("MeanIoU", {{"num_classes", 3}, {"ignore_class", 1.5}}), sparse, {3}),
      "at 'metrics[0].config.ignore_class': expected a class index or null, got 1.5");
  expect_error(config_error("AUC", sparse, {3}), "AUC compares every output value");
  expect_error(config_error(with("AUC", {{"multi_label", true}}), "binary_crossentropy", {2}),
               "at 'metrics[0].config.multi_label'");
  expect_error(config_error(with("AUC", {{"thresholds", {0.5}}}), "binary_crossentropy", {1}),
               "at 'metrics[0].config.thresholds'");
  expect_error(config_error(with("AUC", {{"num_thresholds", 1}}), "binary_crossentropy", {1}),
               "at 'metrics[0].config.num_thresholds'");
  expect_error(config_error(with("AUC", {{"curve", "DET"}}), "binary_crossentropy", {1}),
               "at 'metrics[0].config.curve'");
  expect_error(config_error(with("AUC", {{"from_logit", true}}), "binary_crossentropy", {1}),
               "metrics[0].config.from_logit");
  // Keras' own null and default values pass.
  EXPECT_EQ(config_error(with("AUC", {{"multi_label", false},
                                      {"num_labels", nullptr},
                                      {"label_weights", nullptr},
                                      {"thresholds", nullptr},
                                      {"dtype", "float32"}}),
                         "binary_crossentropy", {1}),
            "no error");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
