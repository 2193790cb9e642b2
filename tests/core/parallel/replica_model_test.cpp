// The meta-model contracts (docs/design.md contracts 1 and 2) and determinism.
#include "parallel/replica_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/ops.hpp"
#include "keras_config_builders.hpp"
#include "meta_test_models.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using namespace meta_test;

TEST(ReplicaModel, SplitSpreadsTheRemainderOverTheFirstReplicas) {
  EXPECT_EQ(ReplicaModel::split(10, 4), (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(ReplicaModel::split(130, 7), (std::vector<std::int64_t>{19, 19, 19, 19, 18, 18, 18}));
  EXPECT_EQ(ReplicaModel::split(1, 3), (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_EQ(ReplicaModel::split(128, 1), (std::vector<std::int64_t>{128}));
}

struct Case {
  int replicas;
  std::int64_t batch;
};

class MetaEqualsTemplate : public ::testing::TestWithParam<Case> {};

// Contract 1: 10 Adam steps through the meta-model equal template-only training.
TEST_P(MetaEqualsTemplate, TenAdamStepsMatchTemplateOnlyTraining) {
  const Case c = GetParam();
  Fixture alone, through_meta;
  train_template_alone(alone, c.batch, 10);
  ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(c.replicas));
  train_meta(through_meta, meta, c.batch, 10);
  const double diff = max_relative_difference(meta.template_model(), *alone.model);
  EXPECT_LE(diff, 1e-5) << c.replicas << " replicas, batch " << c.batch;
  // The weights moved: the comparison is not between two untouched models.
  Fixture untouched;
  EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
}

// Contract 1 on functional graphs: a residual connection (the input's gradient summed from two
// readers), a Concatenate and Dropout; a shared layer; a transformer block (attention with
// dropout, LayerNormalization); models nested as layers. 10 Adam steps through the meta-model
// equal the template's.
TEST(MetaEqualsTemplate, AResidualFunctionalModelTrainsAsTheTemplateDoes) {
  for (const json& config : {residual_model_config(), shared_model_config(),
                             attention_model_config(), nested_model_config()})
    for (int replicas : {2, 3, 7})
      for (std::int64_t batch : {7, 130}) {
        Fixture alone(config), through_meta(config);
        train_template_alone(alone, batch, 10);
        ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
        train_meta(through_meta, meta, batch, 10);
        EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5)
            << replicas << " replicas, batch " << batch;
        const Batch probe = make_batch(9, 999);
        const Tensor expected = alone.model->forward(probe.x, false).clone();
        const Tensor& got = meta.template_model().forward(probe.x, false);
        for (std::int64_t k = 0; k < expected.size(); ++k)
          EXPECT_NEAR(got[k], expected[k], 1e-5 * std::max(1.0f, std::fabs(expected[k])))
              << replicas << " replicas, batch " << batch << ", output " << k;
        Fixture untouched(config);
        EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
      }
}

// Two inputs and two outputs: make_batch's 6 values as inputs a (4) and b (2), packed; a Dense 6
// relu of a, concatenated with b, -> logits (sparse cross-entropy) and, from the Dense alone, a
// regression head (mse, loss weight 0.25). Targets packed: [class index, value].
json two_io_model_config() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "two_io", "layers": [
      {"class_name": "InputLayer", "name": "a", "config": {"batch_input_shape": [null, 4]},
       "inbound_nodes": []},
      {"class_name": "InputLayer", "name": "b", "config": {"batch_input_shape": [null, 2]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "hidden", "config": {"name": "hidden", "units": 6,
       "activation": "relu"}, "inbound_nodes": [[["a", 0, 0, {}]]]},
      {"class_name": "Dropout", "name": "drop", "config": {"name": "drop", "rate": 0.25},
       "inbound_nodes": [[["hidden", 0, 0, {}]]]},
      {"class_name": "Concatenate", "name": "join", "config": {"name": "join"},
       "inbound_nodes": [[["drop", 0, 0, {}], ["b", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "logits", "config": {"name": "logits", "units": 5},
       "inbound_nodes": [[["join", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "value", "config": {"name": "value", "units": 1},
       "inbound_nodes": [[["hidden", 0, 0, {}]]]}],
      "input_layers": [["a", 0, 0], ["b", 0, 0]],
      "output_layers": [["logits", 0, 0], ["value", 0, 0]]}})");
}

Objective two_io_objective(const Model& model) {
  return make_objective(json::parse(R"({"logits": {"class_name":
                          "SparseCategoricalCrossentropy", "config": {"from_logits": true}},
                          "value": "mse"})"),
                        json::parse(R"({"value": 0.25})"),
                        json::parse(R"({"logits": ["accuracy"]})"), model);
}

Batch make_two_io_batch(std::int64_t n, std::uint64_t seed) {
  Batch b = make_batch(n, seed);
  Tensor y({n, 2});
  for (std::int64_t i = 0; i < n; ++i) {
    y[2 * i] = b.y[i];
    y[2 * i + 1] = b.x[6 * i] - b.x[6 * i + 5];
  }
  b.y = y;
  return b;
}

// Contract 1 with several inputs and outputs: the packed rows are split per replica as any
// rows are, and 10 Adam steps of the weighted two-output loss equal the template's.
TEST(MetaEqualsTemplate, TwoInputsAndTwoOutputsTrainAsTheTemplateDoes) {
  for (int replicas : {2, 3, 7})
    for (std::int64_t batch : {7, 130}) {
      Fixture alone(two_io_model_config()), through_meta(two_io_model_config());
      const Objective objective = two_io_objective(*alone.model);
      ObjectiveScratch scratch;
      auto sums = backend::cpu_backend().sums();
      std::vector<double> alone_losses, meta_losses;
      for (int step = 0; step < 10; ++step) {
        const Batch b = make_two_io_batch(batch, 300 + static_cast<std::uint64_t>(step));
        const auto& outputs = alone.model->forward_outputs(b.x, true);
        objective.enqueue(backend::cpu_backend(), *alone.model, outputs, b.y,
                          1.0f / static_cast<float>(batch), true, scratch, *sums);
        alone.model->backward_outputs(scratch.grad_views, [](std::size_t) {});
        alone_losses.push_back(objective.read(*sums, batch).loss.sum);
        alone.opt->apply(alone.model->trainable_parameters());
      }
      ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
      for (int step = 0; step < 10; ++step) {
        const Batch b = make_two_io_batch(batch, 300 + static_cast<std::uint64_t>(step));
        const StepSums s = meta.forward_backward(b, objective);
        ASSERT_EQ(s.metrics.size(), 3u);  // logits_loss, value_loss, logits_accuracy
        EXPECT_NEAR(s.loss.sum, s.metrics[0].sum + 0.25 * s.metrics[1].sum,
                    1e-9 * std::fabs(s.loss.sum));
        meta_losses.push_back(s.loss.sum);
        meta.apply_update();
      }
      EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5)
          << replicas << " replicas, batch " << batch;
      for (std::size_t k = 0; k < alone_losses.size(); ++k)
        EXPECT_NEAR(meta_losses[k], alone_losses[k], 1e-5 * std::fabs(alone_losses[k]));
      Fixture untouched(two_io_model_config());
      EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
    }
}

// A layer entry of a Keras model config.
json layer(const char* cls, json config) {
  return json{{"class_name", cls}, {"config", config}};
}

// Contract 1 for `model`: 10 Adam steps through `replicas` CPU replicas at `batch` equal the
// template's, and moved its weights (the comparison is not between untouched models).
void expect_meta_equals_template(const json& model, int replicas, std::int64_t batch) {
  Fixture alone(model), through_meta(model);
  train_template_alone(alone, batch, 10);
  ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
  train_meta(through_meta, meta, batch, 10);
  EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5)
      << replicas << " replicas, batch " << batch;
  Fixture untouched(model);
  EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
}

// Contract 1 with every augmentation layer in front of the weights: each draws per sample, keyed
// by the sample's place in the global batch, so a replica transforms its rows exactly as the
// template transforms them in the whole batch.
TEST(MetaEqualsTemplate, AugmentationLayersDrawPerSampleSoReplicasTrainAsTheTemplate) {
  const json images = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2, 1}}}),
          layer("RandomFlip", {{"seed", 1}}),
          layer("RandomTranslation", {{"height_factor", 0.3}, {"width_factor", 0.3}, {"seed", 2}}),
          layer("RandomRotation", {{"factor", 0.2}, {"fill_mode", "wrap"}, {"seed", 3}}),
          layer("RandomZoom", {{"height_factor", 0.3}, {"seed", 4}}),
          layer("RandomContrast", {{"factor", 0.4}, {"value_range", {-1, 1}}, {"seed", 5}}),
          layer("RandomBrightness", {{"factor", 0.2}, {"value_range", {-1, 1}}, {"seed", 6}}),
          layer("RandomCrop", {{"height", 2}, {"width", 2}, {"seed", 7}}),
          layer("Flatten", json::object()),
          layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(images, replicas, batch);
}

// Contract 1 through time: an LSTM with both dropouts (masks drawn per global sample), a GRU
// backwards, a GRU with reset_after false and recurrent dropout, a Bidirectional LSTM with
// dropout and a SimpleRNN, stacked; 10 Adam steps through the
// meta-model equal the template's.
TEST(MetaEqualsTemplate, RecurrentLayersWithDropoutTrainAsTheTemplate) {
  const json sequences = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2}}}),
          layer("LSTM", {{"units", 4},
                         {"return_sequences", true},
                         {"dropout", 0.2},
                         {"recurrent_dropout", 0.3},
                         {"seed", 1}}),
          layer("GRU", {{"units", 3}, {"return_sequences", true}, {"go_backwards", true}}),
          layer("GRU", {{"units", 3},
                        {"return_sequences", true},
                        {"reset_after", false},
                        {"recurrent_dropout", 0.2}}),
          layer("Bidirectional",
                {{"layer",
                  {{"class_name", "LSTM"},
                   {"config", {{"units", 2}, {"return_sequences", true}, {"dropout", 0.3}}}}}}),
          layer("SimpleRNN", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(sequences, replicas, batch);
}

// Contract 1 through a recurrent layer's several outputs and given states: an encoder LSTM's h
// and c start a decoder LSTM, whose h starts a GRU and (with the encoder's h) a Bidirectional
// GRU; the decoder's sequence and c, the GRU's output and the Bidirectional's backward state
// reach the Dense (gradients into the packed outputs' parts, out through the states).
TEST(MetaEqualsTemplate, RecurrentStatesPassedBetweenLayersTrainAsTheTemplate) {
  using test::keras2_layer;
  using test::keras2_ref;
  const json model = {
      {"class_name", "Functional"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"},
           {"name", "x"},
           {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 6}}}},
           {"inbound_nodes", json::array()}},
          keras2_layer("Reshape", "steps", {{"target_shape", {3, 2}}}, {keras2_ref("x", 0)}),
          keras2_layer("LSTM", "encoder", {{"units", 3}, {"return_state", true}},
                       {keras2_ref("steps", 0)}),
          keras2_layer(
              "LSTM", "decoder", {{"units", 3}, {"return_sequences", true}, {"return_state", true}},
              {keras2_ref("steps", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}),
          keras2_layer("GRU", "gru", {{"units", 3}},
                       {keras2_ref("steps", 0), keras2_ref("decoder", 1)}),
          keras2_layer(
              "Bidirectional", "bi",
              {{"layer",
                {{"class_name", "GRU"},
                 {"config", {{"name", "inner"}, {"units", 3}, {"return_state", true}}}}}},
              {keras2_ref("steps", 0), keras2_ref("decoder", 1), keras2_ref("encoder", 1)}),
          keras2_layer("Flatten", "flat", json::object(), {keras2_ref("decoder", 0)}),
          keras2_layer("Concatenate", "join", json::object(),
                       {keras2_ref("flat", 0), keras2_ref("gru", 0), keras2_ref("decoder", 2),
                        keras2_ref("bi", 2)}),
          keras2_layer("Dense", "out", {{"units", 5}}, {keras2_ref("join", 0)})}},
        {"input_layers", {{"x", 0, 0}}},
        {"output_layers", {{"out", 0, 0}}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(model, replicas, batch);
}

// Contract 1 for a convolutional seq2seq in Keras 2's form: an encoder ConvLSTM1D's final h and c
// (return_state) start a decoder's (initial_state, after the sequence in the call's list), the
// decoder with dropout and recurrent dropout; their gradients flow back into the encoder.
TEST(MetaEqualsTemplate, ConvolutionalStatesPassedBetweenLayersTrainAsTheTemplate) {
  using test::keras2_layer;
  using test::keras2_ref;
  const json model = {
      {"class_name", "Functional"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"},
           {"name", "x"},
           {"config", {{"name", "x"}, {"batch_input_shape", {nullptr, 6}}}},
           {"inbound_nodes", json::array()}},
          keras2_layer("Dense", "lift", {{"units", 24}}, {keras2_ref("x", 0)}),
          keras2_layer("Reshape", "clips", {{"target_shape", {2, 4, 3}}}, {keras2_ref("lift", 0)}),
          keras2_layer(
              "ConvLSTM1D", "encoder",
              {{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}, {"return_state", true}},
              {keras2_ref("clips", 0)}),
          keras2_layer(
              "ConvLSTM1D", "decoder",
              {{"filters", 2},
               {"kernel_size", 3},
               {"padding", "same"},
               {"return_sequences", true},
               {"dropout", 0.2},
               {"recurrent_dropout", 0.3}},
              {keras2_ref("clips", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}),
          keras2_layer("Flatten", "flat", json::object(), {keras2_ref("decoder", 0)}),
          keras2_layer("Dense", "out", {{"units", 5}}, {keras2_ref("flat", 0)})}},
        {"input_layers", {{"x", 0, 0}}},
        {"output_layers", {{"out", 0, 0}}}}},
      {"keras_version", "2.15.0"}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(model, replicas, batch);
}

// Contract 1 with Keras masks: the padding steps of each sample (Masking) are skipped on any
// replica as on the template.
TEST(MetaEqualsTemplate, MaskedStepsTrainAsTheTemplate) {
  const json sequences = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Dense", {{"units", 6}, {"activation", "relu"}}),  // some steps all 0
          layer("Reshape", {{"target_shape", {3, 2}}}), layer("Masking", {{"mask_value", 0.0}}),
          layer("LSTM", {{"units", 3}, {"return_sequences", true}}),
          layer("GRU", {{"units", 5}})}}}}};
  for (int replicas : {2, 3}) expect_meta_equals_template(sequences, replicas, 32);
}

// Contract 1 with a mask through synchronized BatchNormalization: the statistics of the kept
// steps of the whole batch (every replica's counted together), the mask passed on to the LSTM.
TEST(MetaEqualsTemplate, MaskedBatchNormalizationTrainsAsTheTemplate) {
  const json sequences = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          // Some steps all 0. No bias before the normalization: its gradient is nearly 0 and
          // follows rounding noise amplified by Adam (batch_norm_model says so).
          layer("Dense", {{"units", 8}, {"activation", "relu"}, {"use_bias", false}}),
          layer("Reshape", {{"target_shape", {4, 2}}}), layer("Masking", {{"mask_value", 0.0}}),
          layer("BatchNormalization", {{"synchronized", true}, {"momentum", 0.9}}),
          layer("LSTM", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(sequences, replicas, batch);
}

// Contract 1 for an output carrying a mask (a padded tagger): its loss is divided by the kept
// steps of the whole batch, which the replicas count together before any gradient, so shards
// with more or fewer kept steps (or none: batch 2 on 3 replicas) train as the template does;
// the same with a loss that ignores a class.
TEST(MetaEqualsTemplate, MaskedOutputsTrainAsTheTemplate) {
  const json tagger = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Embedding", {{"input_dim", 9}, {"output_dim", 4}, {"mask_zero", true}}),
          layer("GRU", {{"units", 5}, {"return_sequences", true}}),
          layer("Dense", {{"units", 3}, {"activation", "softmax"}})}}}}};
  // Tokens of 1 to 6 steps kept, padded with 0 (some inside), a label per step, a weight.
  const auto batch_of = [](std::int64_t n, std::uint64_t seed) {
    Batch b;
    b.x = Tensor({n, 6});
    b.y = Tensor({n, 7});
    Rng rng(seed);
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t kept = 1 + static_cast<std::int64_t>(rng.below(6));
      for (std::int64_t t = 0; t < 6; ++t) {
        b.x[r * 6 + t] = t < kept && rng.below(5) > 0 ? static_cast<float>(1 + rng.below(8)) : 0;
        b.y[r * 7 + t] = static_cast<float>(rng.below(3));
      }
      b.y[r * 7 + 6] = 0.5f + static_cast<float>(rng.below(3));
    }
    return b;
  };
  // The loss also ignoring class 2: a step counts where the mask keeps it and its label is
  // another class.
  const json ignoring = {{"class_name", "SparseCategoricalCrossentropy"},
                         {"config", {{"ignore_class", 2}}}};
  for (const json& loss : {json("sparse_categorical_crossentropy"), ignoring})
    for (const auto& [replicas, batch] : {std::pair{2, 9}, std::pair{3, 8}, std::pair{3, 2}}) {
      SCOPED_TRACE(loss.dump());
      Fixture alone(tagger), through_meta(tagger);
      const auto objective = [&](const Model& m) {
        return make_objective(loss, json(), {"accuracy"}, m, {"accuracy"});
      };
      const Objective alone_objective = objective(*alone.model);
      const Objective meta_objective = objective(*through_meta.model);
      ObjectiveScratch scratch;
      auto sums = backend::cpu_backend().sums();
      std::vector<StepSums> alone_sums, meta_sums;
      for (int step = 0; step < 10; ++step) {
        const Batch b = batch_of(batch, 500 + static_cast<std::uint64_t>(step));
        const auto& outputs = alone.model->forward_outputs(b.x, true);
        alone_objective.enqueue(backend::cpu_backend(), *alone.model, outputs, b.y,
                                1.0f / static_cast<float>(batch), true, scratch, *sums);
        alone.model->backward_outputs(scratch.grad_views, [](std::size_t) {});
        alone_sums.push_back(alone_objective.read(*sums, batch));
        alone.opt->apply(alone.model->trainable_parameters());
      }
      ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
      for (int step = 0; step < 10; ++step) {
        meta_sums.push_back(meta.forward_backward(
            batch_of(batch, 500 + static_cast<std::uint64_t>(step)), meta_objective));
        meta.apply_update();
      }
      EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5)
          << replicas << " replicas, batch " << batch;
      for (std::size_t k = 0; k < alone_sums.size(); ++k) {
        EXPECT_NEAR(meta_sums[k].loss.mean(), alone_sums[k].loss.mean(), 1e-5);
        for (std::size_t m = 0; m < 2; ++m)  // accuracy, weighted_accuracy
          EXPECT_NEAR(meta_sums[k].metrics[m].mean(), alone_sums[k].metrics[m].mean(), 1e-12);
      }
      Fixture untouched(tagger);
      EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
    }
}

// Contract 1 with masks joined by Concatenate, side by side and one after the other.
TEST(MetaEqualsTemplate, MasksJoinedByConcatenateTrainAsTheTemplate) {
  const json joined = json::parse(R"({"class_name": "Functional", "config": {"name": "joined",
    "layers": [
    {"class_name": "InputLayer", "name": "x", "config": {"name": "x",
     "batch_input_shape": [null, 6]}, "inbound_nodes": []},
    {"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 6,
     "activation": "relu"}, "inbound_nodes": [[["x", 0, 0, {}]]]},
    {"class_name": "Reshape", "name": "r", "config": {"name": "r", "target_shape": [3, 2]},
     "inbound_nodes": [[["d", 0, 0, {}]]]},
    {"class_name": "Masking", "name": "m", "config": {"name": "m"},
     "inbound_nodes": [[["r", 0, 0, {}]]]},
    {"class_name": "LSTM", "name": "l", "config": {"name": "l", "units": 2,
     "return_sequences": true}, "inbound_nodes": [[["m", 0, 0, {}]]]},
    {"class_name": "Concatenate", "name": "side", "config": {"name": "side", "axis": -1},
     "inbound_nodes": [[["m", 0, 0, {}], ["l", 0, 0, {}]]]},
    {"class_name": "Dense", "name": "dd", "config": {"name": "dd", "units": 2},
     "inbound_nodes": [[["side", 0, 0, {}]]]},
    {"class_name": "Concatenate", "name": "steps", "config": {"name": "steps", "axis": 1},
     "inbound_nodes": [[["dd", 0, 0, {}], ["l", 0, 0, {}]]]},
    {"class_name": "GRU", "name": "g", "config": {"name": "g", "units": 5},
     "inbound_nodes": [[["steps", 0, 0, {}]]]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["g", 0, 0]]},
    "keras_version": "3.6.0"})");
  for (int replicas : {2, 3}) expect_meta_equals_template(joined, replicas, 32);
}

// Contract 1 through TimeDistributed: a wrapped Dropout draws per step of each global sample, a
// wrapped Conv2D and Dense share their weights over the steps.
TEST(MetaEqualsTemplate, TimeDistributedLayersTrainAsTheTemplate) {
  const auto wrapped = [](const char* cls, json config) {
    return layer("TimeDistributed", {{"layer", {{"class_name", cls}, {"config", config}}}});
  };
  const json clips = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Dense", {{"units", 24}}), layer("Reshape", {{"target_shape", {3, 2, 2, 2}}}),
          wrapped("Conv2D", {{"filters", 2}, {"kernel_size", 2}, {"padding", "same"}}),
          wrapped("Dropout", {{"rate", 0.3}, {"seed", 2}}), wrapped("Flatten", json::object()),
          wrapped("Dense", {{"units", 3}, {"activation", "tanh"}}),
          layer("GRU", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(clips, replicas, batch);
}

// Contract 1 for a 3-D CNN (the layers of keras.io's CT-scan classifier, at a small size):
// Conv3D, BatchNormalization over a volume's channels (synchronized: the statistics of the
// global batch, as the template takes them; no bias before it, as batch_norm_model says why),
// MaxPooling3D, ZeroPadding3D, UpSampling3D, Cropping3D, Conv3DTranspose, a grouped Conv3D,
// AveragePooling3D, GlobalAveragePooling3D.
TEST(MetaEqualsTemplate, VolumeLayersTrainAsTheTemplate) {
  const json volumes = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Dense", {{"units", 96}, {"use_bias", false}}),
          layer("Reshape", {{"target_shape", {4, 4, 3, 2}}}),
          layer("Conv3D",
                {{"filters", 4}, {"kernel_size", 3}, {"padding", "same"}, {"use_bias", false}}),
          layer("BatchNormalization", {{"synchronized", true}}),
          layer("Activation", {{"activation", "relu"}}), layer("MaxPooling3D", {{"pool_size", 2}}),
          layer("ZeroPadding3D", {{"padding", {{1, 0}, {0, 1}, {1, 1}}}}),
          layer("UpSampling3D", {{"size", {1, 2, 1}}}),
          layer("Cropping3D", {{"cropping", {{0, 1}, {1, 0}, {0, 1}}}}),
          layer("Conv3DTranspose", {{"filters", 2}, {"kernel_size", 2}, {"strides", {1, 2, 1}}}),
          layer("Conv3D", {{"filters", 4}, {"kernel_size", {1, 2, 1}}, {"groups", 2}}),
          layer("AveragePooling3D", {{"pool_size", {2, 1, 1}}, {"padding", "same"}}),
          layer("GlobalAveragePooling3D", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(volumes, replicas, batch);
}

// Contract 1 through Keras' RNN over stacked cells with dropout (each cell's masks drawn per
// global sample) going backwards, after an RNN over one cell.
TEST(MetaEqualsTemplate, RnnOverStackedCellsTrainsAsTheTemplate) {
  const auto cell = [](const char* cls, const char* name, json config) {
    config["name"] = name;
    return json{{"class_name", cls}, {"config", std::move(config)}};
  };
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2}}}),
          layer("RNN", {{"return_sequences", true},
                        {"cell", cell("GRUCell", "gru_cell", {{"units", 4}})}}),
          layer(
              "RNN",
              {{"go_backwards", true},
               {"cell",
                {{"class_name", "StackedRNNCells"},
                 {"config",
                  {{"cells",
                    {cell(
                         "LSTMCell", "lstm_cell",
                         {{"units", 3}, {"dropout", 0.3}, {"recurrent_dropout", 0.2}, {"seed", 4}}),
                     cell("SimpleRNNCell", "simple_rnn_cell",
                          {{"units", 4}, {"dropout", 0.2}, {"seed", 5}})}}}}}}}),
          layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(model, replicas, batch);
}

// Contract 1 through EinsumDense: a projection to heads, one with a permuted kernel and output
// (the products' arrangements), an axis of all three operands, and an ellipsis, each with its
// bias broadcast over other axes.
TEST(MetaEqualsTemplate, EinsumDenseTrainsAsTheTemplate) {
  const auto einsum = [](const char* equation, json output_shape, json bias_axes,
                         const char* activation) {
    return layer("EinsumDense", {{"equation", equation},
                                 {"output_shape", std::move(output_shape)},
                                 {"bias_axes", std::move(bias_axes)},
                                 {"activation", activation}});
  };
  const json heads = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2}}}),
          einsum("abc,cde->abde", {nullptr, 2, 4}, "de", "tanh"),
          einsum("abcd,edc->abe", {nullptr, 5}, "b", "linear"),
          einsum("abc,bcd->adb", {4, 3}, "d", "relu"), einsum("...b,bc->...c", {2}, "c", "softmax"),
          layer("Flatten", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(heads, replicas, batch);
}

// Contract 1 through convolutional LSTMs: a ConvLSTM2D's every step (its recurrent convolution
// per step, its kernels' gradients over all steps) into a ConvLSTM1D going backwards, then an
// AlphaDropout (drawn per global sample).
TEST(MetaEqualsTemplate, ConvolutionalLstmsTrainAsTheTemplate) {
  const json clips = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Dense", {{"units", 96}}), layer("Reshape", {{"target_shape", {4, 3, 4, 2}}}),
          layer("ConvLSTM2D", {{"filters", 3}, {"kernel_size", 2}, {"padding", "same"},
                               {"return_sequences", true}}),
          layer("Reshape", {{"target_shape", {4, 12, 3}}}),
          layer("ConvLSTM1D", {{"filters", 2}, {"kernel_size", 3}, {"strides", 2},
                               {"go_backwards", true}}),
          layer("AlphaDropout", {{"rate", 0.2}, {"seed", 3}}),
          layer("Flatten", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(clips, replicas, batch);
  // With dropout and recurrent dropout in both: Keras 3's one mask for the four gates, and (the
  // model written by Keras 2) a mask per gate, the convolutions over the four masked copies. The
  // masks are drawn per global sample, so the replicas draw what the template does.
  json dropping = clips;
  for (int at : {3, 5}) {
    dropping["config"]["layers"][at]["config"]["dropout"] = 0.3;
    dropping["config"]["layers"][at]["config"]["recurrent_dropout"] = 0.2;
  }
  json keras2 = dropping;
  keras2["keras_version"] = "2.15.0";
  for (const json& model : {dropping, keras2})
    for (int replicas : {2, 3}) expect_meta_equals_template(model, replicas, 32);
}

// Contract 1 for an LSTM autoencoder as Keras 2 writes one (RepeatVector of the code, an LSTM
// over the steps, a TimeDistributed Dense) with the steps padded, cut, repeated and permuted, and
// a classifier on its reconstruction (the fixture's loss takes a class per sample).
TEST(MetaEqualsTemplate, SequenceShapeLayersTrainAsTheTemplate) {
  const json autoencoder = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2}}}),
          layer("ZeroPadding1D", {{"padding", {1, 2}}}), layer("UpSampling1D", {{"size", 2}}),
          layer("Cropping1D", {{"cropping", {1, 1}}}), layer("LSTM", {{"units", 4}}),
          layer("RepeatVector", {{"n", 3}}),
          layer("LSTM", {{"units", 3}, {"return_sequences", true}}),
          layer("Permute", {{"dims", {2, 1}}}),
          layer("TimeDistributed",
                {{"layer", {{"class_name", "Dense"}, {"config", {{"units", 2}}}}}}),
          layer("Flatten", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3}) expect_meta_equals_template(autoencoder, replicas, 32);
}

// Contract 1 through Keras' Attention (dot and concat scores) and AdditiveAttention with dropout
// on their weights (drawn per global sample).
TEST(MetaEqualsTemplate, AttentionWithDropoutTrainsAsTheTemplate) {
  const json attention = json::parse(R"({"class_name": "Functional", "config": {"name": "a",
    "layers": [
    {"class_name": "InputLayer", "name": "x", "config": {"name": "x",
     "batch_input_shape": [null, 6]}, "inbound_nodes": []},
    {"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 12},
     "inbound_nodes": [[["x", 0, 0, {}]]]},
    {"class_name": "Reshape", "name": "r", "config": {"name": "r", "target_shape": [4, 3]},
     "inbound_nodes": [[["d", 0, 0, {}]]]},
    {"class_name": "Attention", "name": "att", "config": {"name": "att", "use_scale": true,
     "dropout": 0.3, "seed": 5}, "inbound_nodes": [[["r", 0, 0, {}], ["r", 0, 0, {}]]]},
    {"class_name": "Flatten", "name": "f", "config": {"name": "f"},
     "inbound_nodes": [[["att", 0, 0, {}]]]},
    {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 5},
     "inbound_nodes": [[["f", 0, 0, {}]]]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}})");
  for (int replicas : {2, 3}) expect_meta_equals_template(attention, replicas, 32);
  json concat = attention;
  concat["config"]["layers"][3]["config"]["score_mode"] = "concat";
  json additive = attention;
  additive["config"]["layers"][3]["class_name"] = "AdditiveAttention";
  // Batches 31 and 130: at 32 the additive model's first gradient of one output bias is
  // -1.0e-6 (the mean of 32 terms near ±0.1), which Adam's first step turns into a step of nearly
  // its learning rate whose size follows the rounding of that mean (measured: the bias 2e-4
  // apart after 10 steps, every other weight within 8e-6) — the effect the key bias is left out
  // of max_relative_difference for.
  for (const json& config : {concat, additive}) {
    SCOPED_TRACE(config["config"]["layers"][3].dump());
    for (int replicas : {2, 3})
      for (std::int64_t batch : {31, 130}) expect_meta_equals_template(config, replicas, batch);
  }
}

// Contract 1 through SpectralNormalization: every replica divides its copy of the kernel (a
// Conv2D's, a Dense's) by the same estimate before its forward — an empty shard's replica too
// (batch 2 on 3 replicas) — so they stay the template.
TEST(MetaEqualsTemplate, SpectralNormalizationTrainsAsTheTemplate) {
  const auto spectral = [](const char* cls, json config, int iterations) {
    return layer("SpectralNormalization",
                 {{"layer", {{"class_name", cls}, {"config", std::move(config)}}},
                  {"power_iterations", iterations}});
  };
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2, 1}}}),
          spectral(
              "Conv2D",
              {{"filters", 4}, {"kernel_size", 2}, {"padding", "same"}, {"activation", "relu"}}, 1),
          layer("Flatten", json::object()),
          spectral("Dense", {{"units", 8}, {"activation", "tanh"}}, 3),
          layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {2, 7, 32}) expect_meta_equals_template(model, replicas, batch);
}

// Contract 1 through Keras 3's adaptive poolings: overlapping windows whose gradients sum (max
// and average), after a convolution, on 2 and 3 replicas.
TEST(MetaEqualsTemplate, AdaptivePoolingTrainsAsTheTemplate) {
  const json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Reshape", {{"target_shape", {3, 2, 1}}}),
          layer("Conv2D",
                {{"filters", 4}, {"kernel_size", 2}, {"padding", "same"}, {"activation", "tanh"}}),
          layer("AdaptiveMaxPooling2D", {{"output_size", {2, 3}}}),
          layer("AdaptiveAveragePooling2D", {{"output_size", {3, 2}}}),
          layer("Flatten", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(model, replicas, batch);
}

// Contract 1 through a Llama-style decoder block in Keras 3's form: RMSNormalization, causal
// GroupedQueryAttention (4 query heads over 2 key/value heads, dropout on the probabilities) on 3
// tokens of 2 added back, LayerNormalization with rms_scaling, averaged over time -> Dense 5.
TEST(MetaEqualsTemplate, GroupedQueryAttentionWithRmsNormsTrainsAsTheTemplate) {
  const json block = json::parse(R"({"class_name": "Functional", "config": {"name": "decoder",
    "layers": [
    {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_shape": [null, 6]},
     "inbound_nodes": []},
    {"class_name": "Reshape", "name": "tokens", "config": {"name": "tokens",
     "target_shape": [3, 2]}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["x", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "Dense", "name": "embed", "config": {"name": "embed", "units": 6},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["tokens", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "RMSNormalization", "name": "pre", "config": {"name": "pre", "axis": -1,
     "epsilon": 1e-6}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["embed", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "GroupedQueryAttention", "name": "gqa", "config": {"name": "gqa",
     "head_dim": 2, "num_query_heads": 4, "num_key_value_heads": 2, "dropout": 0.2, "seed": 3},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["pre", 0, 0]}}, {"class_name": "__keras_tensor__",
     "config": {"keras_history": ["pre", 0, 0]}}], "kwargs": {"use_causal_mask": true}}]},
    {"class_name": "Add", "name": "skip", "config": {"name": "skip"},
     "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["gqa", 0, 0]}}, {"class_name": "__keras_tensor__",
     "config": {"keras_history": ["embed", 0, 0]}}]], "kwargs": {}}]},
    {"class_name": "LayerNormalization", "name": "post", "config": {"name": "post",
     "rms_scaling": true}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["skip", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "GlobalAveragePooling1D", "name": "pool", "config": {"name": "pool"},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["post", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "Dense", "name": "logits", "config": {"name": "logits", "units": 5},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
     "config": {"keras_history": ["pool", 0, 0]}}], "kwargs": {}}]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["logits", 0, 0]]}})");
  for (int replicas : {2, 3})
    for (std::int64_t batch : {7, 32}) expect_meta_equals_template(block, replicas, batch);
}

// Contract 1 in bf16: the template alone on the bf16 CPU backend and the meta-model with
// precision bf16 round the same operands row by row and sum them in float32 in different
// splits: the same bound as float32's holds (measured 1.4e-7 to 2.4e-7), while bf16 against
// float32 training differs by 1e-2 (Dense) and 7e-2 (Conv2D).
TEST(MetaEqualsTemplate, Bf16TrainsAsTheTemplateInBf16) {
  if (!backend::cpu_precision_unavailable(Precision::bf16).empty())
    GTEST_SKIP() << backend::cpu_precision_unavailable(Precision::bf16);
  const json conv = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {layer("InputLayer", {{"batch_input_shape", {nullptr, 6}}}),
          layer("Dense", {{"units", 32}}),
          layer("Reshape", {{"target_shape", {2, 2, 8}}}),  // 8 channels: a bf16 convolution
          layer("Conv2D", {{"filters", 4}, {"kernel_size", 2}, {"padding", "same"},
                           {"activation", "relu"}}),
          layer("Flatten", json::object()), layer("Dense", {{"units", 5}})}}}}};
  for (const json& config : {model_config(), conv})
    for (int replicas : {2, 3}) {
      Fixture alone(config), through_meta(config), fp32(config);
      for (std::size_t l = 0; l < alone.model->layer_count(); ++l)
        alone.model->layer(l).set_backend(backend::cpu_backend(Precision::bf16));
      train_template_alone(alone, 130, 10);
      train_template_alone(fp32, 130, 10);
      ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas), nullptr,
                        Precision::bf16);
      train_meta(through_meta, meta, 130, 10);
      const double meta_vs_alone = max_relative_difference(meta.template_model(), *alone.model);
      const double bf16_vs_fp32 = max_relative_difference(*alone.model, *fp32.model);
      EXPECT_LE(meta_vs_alone, 1e-5) << replicas << " replicas";
      EXPECT_GT(bf16_vs_fp32, 1e-3) << replicas << " replicas";
    }
}

// Keras' use_ema through the meta-model: each replica averages its own weights, the same ones,
// and at the end every replica and the template take the averages the template alone takes.
TEST(MetaEqualsTemplate, MovingAveragesAreTheTemplatesOnEveryReplica) {
  const json adam = {{"class_name", "Adam"},
                     {"config",
                      {{"learning_rate", 0.01},
                       {"use_ema", true},
                       {"ema_momentum", 0.7},
                       {"ema_overwrite_frequency", 4}}}};
  for (int replicas : {2, 3}) {
    Fixture alone, through_meta, raw;
    alone.opt = make_optimizer(adam, "o");
    through_meta.opt = make_optimizer(adam, "o");
    raw.opt = make_optimizer(adam, "o");
    train_template_alone(alone, 130, 10);
    train_template_alone(raw, 130, 10);
    ASSERT_TRUE(alone.opt->use_moving_averages(alone.model->trainable_parameters()));
    ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
    train_meta(through_meta, meta, 130, 10);
    ASSERT_TRUE(meta.use_moving_averages());
    EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5) << replicas;
    for (int r = 1; r < replicas; ++r)
      EXPECT_LE(max_relative_difference(meta.replica(r), *alone.model), 1e-5) << "replica " << r;
    EXPECT_GT(max_relative_difference(*raw.model, *alone.model), 1e-3)
        << "the averages are not the last weights";
  }
}

// gradient_accumulation_steps through the meta-model: every replica accumulates the same summed
// gradients and updates at the same calls, as the template alone does.
TEST(MetaEqualsTemplate, AccumulatedGradientsTrainAsTheTemplate) {
  const json adam = {
      {"class_name", "Adam"},
      {"config", {{"learning_rate", 0.01}, {"gradient_accumulation_steps", 3}, {"clipnorm", 1.0}}}};
  for (int replicas : {2, 3}) {
    Fixture alone, through_meta;
    alone.opt = make_optimizer(adam, "o");
    through_meta.opt = make_optimizer(adam, "o");
    train_template_alone(alone, 130, 10);
    ReplicaModel meta(*through_meta.model, *through_meta.opt, DevicePlan::cpus(replicas));
    train_meta(through_meta, meta, 130, 10);
    EXPECT_LE(max_relative_difference(meta.template_model(), *alone.model), 1e-5) << replicas;
    for (int r = 1; r < replicas; ++r)
      EXPECT_LE(max_relative_difference(meta.replica(r), *alone.model), 1e-5) << "replica " << r;
    Fixture untouched;
    EXPECT_GT(max_relative_difference(*untouched.model, *alone.model), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(ReplicasAndBatches, MetaEqualsTemplate, ::testing::ValuesIn([] {
                           std::vector<Case> cases;
                           for (int n : {1, 2, 3, 4, 7})
                             for (std::int64_t b : {1, 7, 128, 130}) cases.push_back({n, b});
                           return cases;
                         }()),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.replicas) + "_b" +
                                  std::to_string(info.param.batch);
                         });

TEST(ReplicaModel, LossAndMetricsAreThoseOfTheWholeBatch) {
  Fixture a, b;
  ReplicaModel one(*a.model, *a.opt, DevicePlan::cpus(1));
  ReplicaModel four(*b.model, *b.opt, DevicePlan::cpus(4));
  Batch batch = make_batch(10, 5);
  StepSums s1 = one.evaluate(batch, *a.loss, a.metrics);
  StepSums s4 = four.evaluate(batch, *b.loss, b.metrics);
  EXPECT_NEAR(s4.loss.mean(), s1.loss.mean(), 1e-6);
  EXPECT_EQ(s4.loss.count, 10);
  EXPECT_EQ(s4.metrics[0].sum, s1.metrics[0].sum);
}

TEST(ReplicaModel, PredictReturnsTheTemplateOutputsInOrder) {
  Fixture s;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(3));
  train_meta(s, meta, 16, 3);
  Batch b = make_batch(11, 9);
  Tensor out({11, 5});
  meta.predict(b.x, out.data());
  // Replica r predicts rows [offset_r, offset_r + n_r) (4, 4, 3 rows): the template predicting
  // the same rows gives the same bits, in the same places. The whole batch at once runs GEMMs of
  // another shape, which oneDNN may sum in another order (AVX2 kernels do): equal to float
  // rounding, as contract 1 states.
  const Tensor whole = meta.template_model().forward(b.x, false).clone();
  const std::int64_t offsets[] = {0, 4, 8, 11};
  for (int r = 0; r < 3; ++r) {
    const std::int64_t rows = offsets[r + 1] - offsets[r];
    const Tensor block_x = Tensor::view(b.x, offsets[r] * 6, {rows, 6}).clone();
    const Tensor block = meta.template_model().forward(block_x, false).clone();
    for (std::int64_t i = 0; i < block.size(); ++i)
      ASSERT_EQ(out[offsets[r] * 5 + i], block[i]) << "replica " << r << ", element " << i;
  }
  for (std::int64_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], whole[i], 1e-5 * std::max(1.0f, std::fabs(whole[i]))) << "element " << i;
}

// A two-output model's predictions, packed in output order, when the batch leaves replicas with
// no rows (2 rows over 3 and 7 replicas): the empty shards pack nothing (they failed, sizing
// each output's columns from their zero rows).
TEST(ReplicaModel, APredictionOfSeveralOutputsPacksThemWhenAReplicaHasNoRows) {
  for (int replicas : {3, 7}) {
    Fixture s(two_io_model_config());
    ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(replicas));
    const Batch b = make_two_io_batch(2, 17);
    Tensor out({2, 6});
    meta.predict(b.x, out.data());
    const auto& outputs = meta.template_model().forward_outputs(b.x, false);
    for (std::int64_t r = 0; r < 2; ++r) {
      for (std::int64_t c = 0; c < 5; ++c)
        EXPECT_NEAR(out[r * 6 + c], (*outputs[0])[r * 5 + c], 1e-6) << replicas << " " << r;
      EXPECT_NEAR(out[r * 6 + 5], (*outputs[1])[r], 1e-6) << replicas << " " << r;
    }
  }
}

// Contract 2: whenever looked at, the template equals every replica.
TEST(ReplicaModel, TemplateIsCurrentAfterAnyNumberOfSteps) {
  Fixture s;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(3));
  for (int step = 1; step <= 5; ++step) {
    train_meta(s, meta, 20 + step, 1);
    Model& t = meta.template_model();
    for (int r = 0; r < meta.size(); ++r)
      EXPECT_TRUE(bitwise_equal(t, meta.replica(r))) << "step " << step << ", replica " << r;
  }
}

TEST(ReplicaModel, TwoRunsOnThreeReplicasAreBitwiseEqual) {
  Fixture a, b;
  ReplicaModel ma(*a.model, *a.opt, DevicePlan::cpus(3)), mb(*b.model, *b.opt, DevicePlan::cpus(3));
  train_meta(a, ma, 50, 8);
  train_meta(b, mb, 50, 8);
  EXPECT_TRUE(bitwise_equal(ma.template_model(), mb.template_model()));
}

TEST(ReplicaModel, LearningRateReachesEveryReplica) {
  Fixture s;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(2));
  meta.set_learning_rate(0.5);
  EXPECT_DOUBLE_EQ(s.opt->learning_rate(), 0.5);
  train_meta(s, meta, 9, 2);
  EXPECT_TRUE(bitwise_equal(meta.replica(0), meta.replica(1)));
}

TEST(ReplicaModel, BroadcastCopiesLoadedWeightsAndOptimizerState) {
  Fixture s, other;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(2));
  train_meta(s, meta, 8, 2);
  // Load other weights into the template, as resuming does, then broadcast.
  meta.template_model().copy_weights_from(*other.model);
  meta.broadcast_from_template();
  EXPECT_TRUE(bitwise_equal(meta.replica(1), *other.model));
  train_meta(s, meta, 8, 1);
  EXPECT_TRUE(bitwise_equal(meta.replica(0), meta.replica(1)));
}

TEST(ReplicaModel, AnErrorInOneReplicaSurfacesAndTheModelStaysUsable) {
  Fixture s;
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(3));
  Batch bad = make_batch(9, 1);
  bad.y[8] = 7;  // not a class index: replica 2 fails
  EXPECT_THROW(meta.forward_backward(bad, *s.loss, s.metrics), DataError);
  EXPECT_NO_THROW(train_meta(s, meta, 9, 1));
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

using namespace meta_test;

double batch_norm_meta_vs_template(bool synchronized, int replicas, std::int64_t batch) {
  Fixture alone, meta_side;
  alone.model = Model::from_config(batch_norm_model(synchronized), "model", 23);
  meta_side.model = Model::from_config(batch_norm_model(synchronized), "model", 23);
  train_template_alone(alone, batch, 5);
  {
    ReplicaModel meta(*meta_side.model, *meta_side.opt, DevicePlan::cpus(replicas));
    train_meta(meta_side, meta, batch, 5);
  }
  // Weights and the moving statistics (non-trainable) alike.
  return max_relative_difference(*meta_side.model, *alone.model);
}

TEST(ReplicaModel, SynchronizedBatchNormMatchesTheTemplateOnAnyReplicaCount) {
  for (const auto& [replicas, batch] :
       std::vector<std::pair<int, std::int64_t>>{{2, 16}, {3, 10}, {4, 3}})
    EXPECT_LT(batch_norm_meta_vs_template(true, replicas, batch), 1e-5)
        << replicas << " replicas, batch " << batch;  // {4, 3}: one replica holds no sample
  // The check can fail: per-replica statistics do differ from the template's.
  EXPECT_GT(batch_norm_meta_vs_template(false, 3, 10), 1e-3);
}

// A replica without rows of a batch still takes the batch's statistics into its moving ones (it
// kept stale ones, and validated its shard with them: a logged val_loss no saved model gave).
TEST(ReplicaModel, SynchronizedBatchNormMovesAnEmptyReplicasStatisticsToo) {
  Fixture s(batch_norm_model(true));
  s.model = Model::from_config(batch_norm_model(true), "model", 23);
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(4));
  train_meta(s, meta, 3, 3);  // replica 3 holds no sample of any batch
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(bitwise_equal(meta.replica(0), meta.replica(r))) << r;
}

// Without synchronized statistics each replica moved its moving statistics by its own shard, so
// replicas drifted apart: validation (each replica evaluates its shard with its own) and the
// checkpoint (replica 0's) disagreed. They are averaged over the replicas after each forward: every
// replica holds the same bits, and the moving mean is the whole batch's, as the template's.
TEST(ReplicaModel, ReplicaLocalBatchNormKeepsOneSetOfMovingStatistics) {
  const auto moving_mean_of = [](Model& m) -> const Tensor& {
    for (std::size_t l = 0; l < m.layer_count(); ++l)
      for (Parameter* p : m.layer(l).parameters())
        if (p->name == "moving_mean") return p->value;
    throw std::logic_error("no moving_mean");
  };
  for (const auto& [replicas, batch] :
       std::vector<std::pair<int, std::int64_t>>{{2, 16}, {3, 10}, {4, 3}}) {
    Fixture alone(batch_norm_model(false)), s(batch_norm_model(false));
    alone.model = Model::from_config(batch_norm_model(false), "model", 23);
    s.model = Model::from_config(batch_norm_model(false), "model", 23);
    ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(replicas));
    // One step from the same weights: the moving mean is the whole batch's, as the template's
    // (each replica's own shard mean before).
    train_template_alone(alone, batch, 1);
    train_meta(s, meta, batch, 1);
    const Tensor& mean = moving_mean_of(meta.template_model());
    const Tensor& reference = moving_mean_of(*alone.model);
    float scale = 0, diff = 0;
    for (std::int64_t i = 0; i < mean.size(); ++i) {
      scale = std::max(scale, std::abs(reference[i]));
      diff = std::max(diff, std::abs(mean[i] - reference[i]));
    }
    EXPECT_GT(scale, 0.0f);
    EXPECT_LE(diff, 1e-5f * scale) << replicas << " replicas, batch " << batch;
    // Steps later, still one set of bits on every replica.
    train_meta(s, meta, batch, 4);
    for (int r = 1; r < replicas; ++r)
      EXPECT_TRUE(bitwise_equal(meta.replica(0), meta.replica(r))) << replicas << " replicas";
  }
}

// Synchronized statistics make the replicas meet in the middle of the backward pass. A replica
// that fails in its loss never arrives there: the others must be released (they used to wait for
// it forever), the failed replica's own error must surface (not theirs, which only say that they
// stopped waiting), and the next step must sum afresh.
TEST(ReplicaModel, AReplicaThatFailsReleasesTheOthersFromSynchronizedStatistics) {
  Fixture s(batch_norm_model(true));
  ReplicaModel meta(*s.model, *s.opt, DevicePlan::cpus(3));
  for (const std::int64_t bad_row : {8, 0}) {  // replica 2's shard, then replica 0's
    Batch bad = make_batch(9, 1);
    bad.y[bad_row] = 7;  // not a class index
    try {
      meta.forward_backward(bad, *s.loss, s.metrics);
      ADD_FAILURE() << "a label outside the classes trained";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
    }
  }
  train_meta(s, meta, 9, 2);
  EXPECT_TRUE(bitwise_equal(meta.replica(0), meta.replica(1)));
}

}  // namespace
}  // namespace tandem
