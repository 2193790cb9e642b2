// A Keras mask that reaches a model output weighs its loss and metrics (nn/objective.hpp), as
// Keras' apply_mask does: the loss is the sum over the kept steps divided by their number in the
// batch, the metrics are means over the kept steps. Checked against values written by hand in
// double from the model's outputs, the loss gradient against central differences, and a padded
// tagger's training against the same tagger on its sequences with the padding cut out. (The
// meta-model's contract 1 for such outputs, whose count is the global batch's, is in
// replica_model_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/ops.hpp"
#include "gradient_check.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

constexpr int kClasses = 3;

// Tokens (0 pads) -> Embedding(mask_zero) -> LSTM over the steps -> Dense softmax per step: a
// sequence tagger, its output (steps, 3) carrying the mask.
json tagger(int steps, bool mask_zero = true) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"name", "tagger"},
            {"layers",
             {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, steps}}}}},
              {{"class_name", "Embedding"},
               {"config",
                {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 4}, {"mask_zero", mask_zero}}}},
              {{"class_name", "LSTM"},
               {"config", {{"name", "rnn"}, {"units", 5}, {"return_sequences", true}}}},
              {{"class_name", "Dense"},
               {"config", {{"name", "tags"}, {"units", kClasses}, {"activation", "softmax"}}}}}}}}};
}

struct Step {
  Step(const json& config, const json& weighted_metrics)
      : model(Model::from_config(config, "model", 5)),
        objective(make_objective("sparse_categorical_crossentropy", json(), {"accuracy"}, *model,
                                 weighted_metrics)) {}
  std::unique_ptr<Model> model;
  Objective objective;
  ObjectiveScratch scratch;
  std::unique_ptr<backend::Sums> sums = backend::cpu_backend().sums();

  StepSums run(const Tensor& x, const Tensor& y, bool gradients) {
    const auto& outputs = model->forward_outputs(x, gradients);
    objective.enqueue(backend::cpu_backend(), *model, outputs, y,
                      1.0f / static_cast<float>(x.dim(0)), gradients, scratch, *sums);
    return objective.read(*sums, x.dim(0));
  }
};

// Four sequences of 5 steps: 2, 3, 0 and 5 tokens kept (holes included).
const std::vector<float> kTokens{3, 1, 0, 0, 0, 2, 0, 4, 5, 0, 0, 0, 0, 0, 0, 7, 7, 8, 6, 1};
const std::vector<float> kLabels{0, 2, 1, 1, 1, 1, 0, 2, 0, 2, 1, 0, 2, 1, 0, 2, 2, 0, 1, 0};
const std::vector<float> kSampleWeights{0.5f, 2.0f, 1.0f, 1.5f};
// Keras' temporal weights: one per step (a padding step's weighs nothing, as the mask drops it).
const std::vector<float> kStepWeights{0.5f, 3.0f, 9.0f, 9.0f, 9.0f, 1.0f, 7.0f, 0.25f, 2.0f, 9.0f,
                                      4.0f, 4.0f, 4.0f, 4.0f, 4.0f, 1.5f, 0.0f, 2.5f,  1.0f, 0.75f};

enum class Weights { none, per_sample, per_step };

double weight_of(Weights weights, std::size_t value) {
  switch (weights) {
    case Weights::none:
      return 1.0;
    case Weights::per_sample:
      return kSampleWeights[value / 5];
    case Weights::per_step:
      return kStepWeights[value];
  }
  return 0;
}

// y with each row's labels, then its weights: the sample's, or one per step.
Tensor targets(Weights weights = Weights::none) {
  const std::int64_t extra = weights == Weights::none ? 0 : weights == Weights::per_sample ? 1 : 5;
  const std::int64_t cols = 5 + extra;
  Tensor y({4, cols});
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t t = 0; t < 5; ++t)
      y[r * cols + t] = kLabels[static_cast<std::size_t>(r * 5 + t)];
    for (std::int64_t k = 0; k < extra; ++k)
      y[r * cols + 5 + k] =
          static_cast<float>(weight_of(weights, static_cast<std::size_t>(r * 5 + k)));
  }
  return y;
}

struct Expected {
  double loss = 0, accuracy = 0, weighted_accuracy = 0;
};

// Keras' values in double from the tagger's probabilities: the loss Σ w·m·(−log p[label]) / Σ m,
// the accuracy Σ m·[argmax = label] / Σ m, the weighted accuracy Σ w·m·[...] / Σ w·m — w the
// step's sample's weight, or the step's own.
Expected by_hand(const Tensor& probs, Weights weights) {
  double loss = 0, kept = 0, hits = 0, weighted_hits = 0, weighted_kept = 0;
  for (std::size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == 0) continue;
    const double w = weight_of(weights, i);
    const float* p = probs.data() + i * kClasses;
    const auto label = static_cast<std::size_t>(kLabels[i]);
    std::size_t best = 0;
    for (std::size_t c = 1; c < kClasses; ++c)
      if (p[c] > p[best]) best = c;
    loss += -w * std::log(static_cast<double>(p[label]));
    kept += 1;
    hits += best == label;
    weighted_hits += w * (best == label);
    weighted_kept += w;
  }
  return {loss / kept, hits / kept, weighted_hits / weighted_kept};
}

TEST(MaskedOutputs, LossAndMetricsAreMeansOverTheKeptSteps) {
  for (const Weights weights : {Weights::none, Weights::per_sample, Weights::per_step}) {
    SCOPED_TRACE(weights == Weights::none         ? "no weights"
                 : weights == Weights::per_sample ? "sample weights"
                                                  : "weights by step");
    const bool weighted = weights != Weights::none;
    Step step(tagger(5), weighted ? json{"accuracy"} : json());
    ASSERT_TRUE(step.model->output_masked(0));
    // Larger weights than the initializers', so that the steps' losses differ (the padding's from
    // the kept steps' too).
    for (Parameter* p : step.model->parameters())
      for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] *= 6.0f;
    const Tensor x = Tensor::from_vector({4, 5}, kTokens);
    const StepSums s = step.run(x, targets(weights), false);
    const Expected want = by_hand(step.model->forward(x, false), weights);
    EXPECT_NEAR(s.loss.mean(), want.loss, 1e-6 * want.loss);
    ASSERT_EQ(s.metrics.size(), weighted ? 2u : 1u);
    EXPECT_NEAR(s.metrics[0].mean(), want.accuracy, 1e-12);
    if (weighted) EXPECT_NEAR(s.metrics[1].mean(), want.weighted_accuracy, 1e-12);
    if (weights == Weights::per_step) {  // each step's own weight, not its sample's
      const Expected per_sample = by_hand(step.model->forward(x, false), Weights::per_sample);
      EXPECT_GT(std::fabs(want.loss - per_sample.loss), 0.05 * want.loss);
      EXPECT_GT(std::fabs(want.weighted_accuracy - per_sample.weighted_accuracy), 0.01);
    }
    // Not the mean over every step, padding included (what the loss was before masks).
    const Tensor& probs = step.model->forward(x, false);
    double all = 0;
    for (std::size_t i = 0; i < kLabels.size(); ++i)
      all -= std::log(static_cast<double>(
          probs[static_cast<std::int64_t>(i * kClasses + static_cast<std::size_t>(kLabels[i]))]));
    EXPECT_GT(std::fabs(all / 20 - want.loss), 0.05 * want.loss);
  }
}

// The gradient given to the output is the derivative of the reported loss: central differences
// of the loss the objective computes, each output value moved in turn (the mask stays the
// model's: it depends on the tokens alone). Masked steps get none.
TEST(MaskedOutputs, TheOutputsGradientIsTheMaskedLosssDerivative) {
  for (const Weights weights : {Weights::per_sample, Weights::per_step}) {
    SCOPED_TRACE(weights == Weights::per_sample ? "sample weights" : "weights by step");
    Step step(tagger(5), json());
    const Tensor x = Tensor::from_vector({4, 5}, kTokens);
    const Tensor y = targets(weights);
    step.model->forward_outputs(x, false);
    const Tensor probs = step.model->forward(x, false).clone();
    const auto loss_at = [&](const Tensor& p) {
      step.objective.enqueue(backend::cpu_backend(), *step.model, {&p}, y, 0.25f, true,
                             step.scratch, *step.sums);
      return step.objective.read(*step.sums, 4).loss.mean();
    };
    loss_at(probs);
    const Tensor grad = step.scratch.grads[0].clone();
    const std::vector<double> numeric = test::numeric_gradient(
        [&](const std::vector<double>& values) {
          Tensor p(probs.shape());
          for (std::int64_t i = 0; i < p.size(); ++i)
            p[i] = static_cast<float>(values[static_cast<std::size_t>(i)]);
          return loss_at(p);
        },
        test::to_double(probs), 1e-3);
    for (std::int64_t i = 0; i < probs.size(); ++i) {
      EXPECT_NEAR(grad[i], numeric[static_cast<std::size_t>(i)], 2e-3) << "output value " << i;
      if (kTokens[static_cast<std::size_t>(i / kClasses)] == 0) EXPECT_EQ(grad[i], 0.0f);
    }
  }
}

// Ratio and histogram metrics of a masked output count its kept steps alone: Precision and
// Recall by hand, AUC as the same metric computes it on the kept steps' values gathered into rows
// of their own.
TEST(MaskedOutputs, RatioAndHistogramMetricsCountTheKeptStepsAlone) {
  json config = tagger(5);
  config["config"]["layers"][3]["config"]["units"] = 1;
  config["config"]["layers"][3]["config"]["activation"] = "sigmoid";
  auto model = Model::from_config(config, "model", 3);
  for (Parameter* p : model->parameters())
    for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] *= 6.0f;
  const Objective objective =
      make_objective("binary_crossentropy", json(), {"Precision", "Recall", "AUC"}, *model, json());
  Tensor x = Tensor::from_vector({4, 5}, kTokens), y({4, 5});
  for (std::int64_t i = 0; i < y.size(); ++i) y[i] = kLabels[static_cast<std::size_t>(i)] > 0;
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  objective.enqueue(backend::cpu_backend(), *model, model->forward_outputs(x, false), y, 0.25f,
                    false, scratch, *sums);
  const std::vector<double> values = objective.values(objective.read(*sums, 4).metrics);
  const Tensor& p = model->forward(x, false);
  std::vector<float> kept_p, kept_t;
  double tp = 0, predicted = 0, actual = 0;
  for (std::size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == 0) continue;
    const float pi = p[static_cast<std::int64_t>(i)], ti = y[static_cast<std::int64_t>(i)];
    kept_p.push_back(pi);
    kept_t.push_back(ti);
    tp += pi > 0.5f && ti != 0;
    predicted += pi > 0.5f;
    actual += ti != 0;
  }
  ASSERT_GT(predicted, 0);
  ASSERT_GT(actual, 0);
  const auto kept = static_cast<std::int64_t>(kept_p.size());
  const auto auc = make_metrics({"AUC"}, "metrics", *make_loss("binary_crossentropy", "loss"), {1});
  const double want_auc =
      auc[0]
          ->evaluate(Tensor::from_vector({kept, 1}, kept_p), Tensor::from_vector({kept, 1}, kept_t))
          .sum;
  ASSERT_EQ(values.size(), 3u);
  EXPECT_NEAR(values[0], tp / predicted, 1e-12);
  EXPECT_NEAR(values[1], tp / actual, 1e-12);
  EXPECT_NEAR(values[2], want_auc, 1e-9);
  EXPECT_GT(std::fabs(want_auc - 0.5), 1e-3);  // not a constant
}

// MeanIoU's confusion matrix of a masked tagger takes the kept steps alone: the same metric on
// the kept steps' probabilities and labels gathered into rows of their own.
TEST(MaskedOutputs, MeanIouCountsTheKeptStepsAlone) {
  auto model = Model::from_config(tagger(5), "model", 4);
  for (Parameter* p : model->parameters())
    for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] *= 6.0f;
  const json iou = {{"class_name", "MeanIoU"},
                    {"config", {{"num_classes", kClasses}, {"sparse_y_pred", false}}}};
  const Objective objective =
      make_objective("sparse_categorical_crossentropy", json(), json::array({iou}), *model, json());
  const Tensor x = Tensor::from_vector({4, 5}, kTokens);
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  objective.enqueue(backend::cpu_backend(), *model, model->forward_outputs(x, false), targets(),
                    0.25f, false, scratch, *sums);
  const double masked = objective.values(objective.read(*sums, 4).metrics)[0];
  const Tensor& p = model->forward(x, false);
  std::vector<float> kept_p, kept_t;
  for (std::size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == 0) continue;
    for (int c = 0; c < kClasses; ++c)
      kept_p.push_back(p[static_cast<std::int64_t>(i) * kClasses + c]);
    kept_t.push_back(kLabels[i]);
  }
  const auto kept = static_cast<std::int64_t>(kept_t.size());
  const auto metric =
      make_metrics(json::array({iou}), "metrics",
                   *make_loss("sparse_categorical_crossentropy", "loss"), {kClasses});
  const double want = metric[0]
                          ->evaluate(Tensor::from_vector({kept, kClasses}, kept_p),
                                     Tensor::from_vector({kept}, kept_t))
                          .sum;
  EXPECT_NEAR(masked, want, 1e-9);
  // Every step counted would give another value (the padding's steps are labelled too).
  const auto all = make_metrics(json::array({iou}), "metrics",
                                *make_loss("sparse_categorical_crossentropy", "loss"), {kClasses});
  const double everything =
      all[0]
          ->evaluate(
              Tensor::from_vector({20, kClasses}, std::vector<float>(p.data(), p.data() + 60)),
              Tensor::from_vector({20}, kLabels))
          .sum;
  EXPECT_GT(std::fabs(everything - want), 1e-3);
}

// A batch of padding alone keeps no step: a loss of 0 and no gradient, as Keras' divide_no_nan
// gives, not 0 / 0.
TEST(MaskedOutputs, ABatchWithoutKeptStepsHasNoLossAndNoGradient) {
  Step step(tagger(5), json());
  const StepSums s = step.run(Tensor({4, 5}), targets(), true);
  EXPECT_EQ(s.loss.sum, 0.0);
  EXPECT_EQ(s.metrics[0].count, 0.0);
  for (std::int64_t i = 0; i < step.scratch.grads[0].size(); ++i)
    ASSERT_EQ(step.scratch.grads[0][i], 0.0f) << i;
}

// A tagger on padded sequences trains as the same tagger on the sequences with the padding cut
// out: the LSTM skips the masked steps, and the loss counts the kept steps alone.
TEST(MaskedOutputs, APaddedTaggerTrainsAsItsSequencesWithThePaddingCutOut) {
  Step padded(tagger(6), {"accuracy"}), cut(tagger(3, false), {"accuracy"});
  cut.model->copy_weights_from(*padded.model);
  auto adam = [] {
    return make_optimizer(json{{"class_name", "Adam"}, {"config", {{"learning_rate", 0.05}}}},
                          "optimizer");
  };
  auto padded_opt = adam(), cut_opt = adam();
  // [4, 0, 7, 0, 0, 2] and [1, 2, 3, 0, 0, 0] hold the tokens [4, 7, 2] and [1, 2, 3]; the
  // padding's labels are any class (Keras reads them and weighs them 0).
  const Tensor x_padded = Tensor::from_vector({2, 6}, {4, 0, 7, 0, 0, 2, 1, 2, 3, 0, 0, 0});
  const Tensor y_padded =
      Tensor::from_vector({2, 7}, {1, 2, 0, 0, 1, 2, 0.5f, 0, 2, 1, 1, 1, 2, 3.0f});
  const Tensor x_cut = Tensor::from_vector({2, 3}, {4, 7, 2, 1, 2, 3});
  const Tensor y_cut = Tensor::from_vector({2, 4}, {1, 0, 2, 0.5f, 0, 2, 1, 3.0f});
  for (int k = 0; k < 5; ++k) {
    const StepSums a = padded.run(x_padded, y_padded, true);
    padded.model->backward_outputs(padded.scratch.grad_views, [](std::size_t) {});
    padded_opt->apply(padded.model->trainable_parameters());
    const StepSums b = cut.run(x_cut, y_cut, true);
    cut.model->backward_outputs(cut.scratch.grad_views, [](std::size_t) {});
    cut_opt->apply(cut.model->trainable_parameters());
    EXPECT_NEAR(a.loss.mean(), b.loss.mean(), 1e-6) << "step " << k;
    EXPECT_NEAR(a.metrics[1].mean(), b.metrics[1].mean(), 1e-12) << "weighted accuracy";
  }
  const auto pa = padded.model->parameters(), pb = cut.model->parameters();
  double moved = 0;
  for (std::size_t i = 0; i < pa.size(); ++i)
    for (std::int64_t v = 0; v < pa[i]->value.size(); ++v) {
      EXPECT_NEAR(pa[i]->value[v], pb[i]->value[v], 1e-5) << pa[i]->name << " [" << v << "]";
      moved = std::max(moved, static_cast<double>(std::fabs(pa[i]->value[v])));
    }
  EXPECT_GT(moved, 0.1);
}

// SparseCategoricalCrossentropy(ignore_class): a step labelled with the ignored class (here -1,
// no class index) has no loss and no gradient, and the loss is divided by the other steps' count
// — Keras' own test case, [[-1, 2]] over two steps of 3 logits: 1.48012 —; its accuracy still
// counts every step, as Keras' metrics do not see the loss's mask.
TEST(MaskedOutputs, AnIgnoredClassLeavesItsStepsOutOfTheLoss) {
  const json steps = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 2, 3}}}}},
          {{"class_name", "Activation"}, {"config", {{"activation", "linear"}}}}}}}}};
  auto model = Model::from_config(steps, "model", 1);
  const json loss = {{"class_name", "SparseCategoricalCrossentropy"},
                     {"config", {{"from_logits", true}, {"ignore_class", -1}}}};
  const Objective objective = make_objective(loss, json(), {"accuracy"}, *model, json());
  const Tensor logits =
      Tensor::from_vector({1, 2, 3}, {0.854f, 0.698f, 0.598f, 0.088f, 0.86f, 0.018f});
  const Tensor y = Tensor::from_vector({1, 2}, {-1, 2});
  model->forward_outputs(logits, false);
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  objective.check_labels(y, *model);  // -1 is no class index, but the ignored one
  objective.enqueue(backend::cpu_backend(), *model, {&logits}, y, 1.0f, true, scratch, *sums);
  const StepSums s = objective.read(*sums, 1);
  double z = 0;
  for (int c = 3; c < 6; ++c) z += std::exp(static_cast<double>(logits[c]));
  const double kept = std::log(z) - static_cast<double>(logits[5]);
  EXPECT_NEAR(kept, 1.48012, 1e-5);  // Keras' value
  EXPECT_NEAR(s.loss.mean(), kept, 1e-6);
  const Tensor& g = scratch.grads[0];
  for (int c = 0; c < 3; ++c) EXPECT_EQ(g[c], 0.0f);
  for (int c = 3; c < 6; ++c)
    EXPECT_NEAR(g[c], std::exp(static_cast<double>(logits[c])) / z - (c == 5), 1e-6);
  // The accuracy over both steps: labelled [-1, 1], step 2's argmax right, the ignored step
  // counted wrong (0.5, where leaving it out would give 1).
  objective.enqueue(backend::cpu_backend(), *model, {&logits}, Tensor::from_vector({1, 2}, {-1, 1}),
                    1.0f, false, scratch, *sums);
  EXPECT_EQ(objective.read(*sums, 1).metrics[0].mean(), 0.5);
  // Without ignore_class, -1 is no class: the label check names it.
  const Objective plain = make_objective(
      json{{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
      json(), json(), *model, json());
  EXPECT_THROW(plain.check_labels(y, *model), DataError);
}

// ignore_class on a masked output: a step counts when the mask keeps it and its label is not
// the ignored class; ignore_class is SparseCategoricalCrossentropy's alone.
TEST(MaskedOutputs, AnIgnoredClassAndAMaskKeepTheStepsBothKeep) {
  const json loss = {{"class_name", "SparseCategoricalCrossentropy"},
                     {"config", {{"ignore_class", 1}}}};
  auto model = Model::from_config(tagger(5), "model", 5);
  for (Parameter* p : model->parameters())
    for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] *= 6.0f;
  const Objective objective = make_objective(loss, json(), json(), *model, json());
  const Tensor x = Tensor::from_vector({4, 5}, kTokens);
  ObjectiveScratch scratch;
  auto sums = backend::cpu_backend().sums();
  objective.enqueue(backend::cpu_backend(), *model, model->forward_outputs(x, false), targets(),
                    0.25f, false, scratch, *sums);
  const Tensor& probs = model->forward(x, false);
  double sum = 0, count = 0;
  for (std::size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == 0 || kLabels[i] == 1) continue;
    sum -= std::log(static_cast<double>(
        probs[static_cast<std::int64_t>(i * kClasses + static_cast<std::size_t>(kLabels[i]))]));
    count += 1;
  }
  EXPECT_NEAR(objective.read(*sums, 4).loss.mean(), sum / count, 1e-6 * sum / count);
  for (const char* other : {"CategoricalCrossentropy", "BinaryCrossentropy"}) {
    try {
      make_loss(json{{"class_name", other}, {"config", {{"ignore_class", 1}}}}, "loss");
      ADD_FAILURE() << other << " took ignore_class";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'loss.config.ignore_class': only "
                                           "SparseCategoricalCrossentropy ignores a class"),
                std::string::npos)
          << e.what();
    }
  }
  for (const json bad : {json(1.5), json("1"), json(1e9)})
    EXPECT_THROW(make_loss(json{{"class_name", "SparseCategoricalCrossentropy"},
                                {"config", {{"ignore_class", bad}}}},
                           "loss"),
                 ConfigError)
        << bad.dump();
  // Written back as Keras writes it.
  EXPECT_EQ(make_loss(loss, "loss")->config()["config"]["ignore_class"], 1);
}

// An output whose steps hold more than one axis cannot be weighed by a mask of its steps (nor can
// it in Keras): refused at the output's call.
TEST(MaskedOutputs, AMaskOverAnOutputOfMoreAxesIsRefused) {
  json config = tagger(5);
  auto& layers = config["config"]["layers"];
  layers.erase(layers.size() - 1);
  layers.push_back(
      {{"class_name", "TimeDistributed"},
       {"config",
        {{"name", "grid"},
         {"layer", {{"class_name", "Reshape"}, {"config", {{"target_shape", {5, 1}}}}}}}}});
  try {
    Model::from_config(config, "model", 1);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'model.config.layers[3]': the model's output 'grid' "
                                         "carries a mask of its steps"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(None, 5, 5, 1)"), std::string::npos) << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
