// Models, data and comparisons the meta-model's contract tests share (replica_model_test.cpp,
// pipeline_test.cpp): small Sequential and functional models over 6 inputs and 5 classes, a
// seeded batch maker, template-only training and the weight comparisons.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/loss.hpp"
#include "nn/metric.hpp"
#include "optim/optimizer.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/model.hpp"
#include "tandem/rng.hpp"

namespace tandem::meta_test {

using nlohmann::json;

// Dense 6 -> 12 relu -> Dropout 0.25 -> Dense 5 (logits). Dropout is in on purpose: its masks
// depend on each sample's place in the global batch, so the contract holds with it too.
inline json model_config() {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config", {{"units", 12}, {"activation", "relu"}, {"input_shape", {6}}}}},
              {{"class_name", "Dropout"}, {"config", {{"rate", 0.25}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 5}}}}}}}}};
}

inline Batch make_batch(std::int64_t n, std::uint64_t seed) {
  Batch b;
  b.x = Tensor({n, 6});
  b.y = Tensor({n});
  Rng rng(seed);
  for (std::int64_t i = 0; i < b.x.size(); ++i) b.x[i] = rng.uniform() * 2 - 1;
  for (std::int64_t i = 0; i < n; ++i) b.y[i] = static_cast<float>(rng.below(5));
  return b;
}

// A functional graph over the same shapes: Dense 6 relu -> Dropout, added to the input (a
// residual connection, so the input's gradient is a sum), concatenated with a second Dense 4 of
// the input, -> Dense 5 (logits). Keras 2's form, as to_json() writes it.
inline json residual_model_config() {
  const auto call = [](std::initializer_list<const char*> names) {
    json node = json::array();
    for (const char* n : names) node.push_back({n, 0, 0, json::object()});
    return json::array({node});
  };
  const auto entry = [&](const char* cls, const char* name, json config,
                         std::initializer_list<const char*> inbound) {
    config["name"] = name;
    return json{{"class_name", cls},
                {"name", name},
                {"config", config},
                {"inbound_nodes", inbound.size() ? call(inbound) : json::array()}};
  };
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "residual"},
            {"layers",
             {entry("InputLayer", "x", {{"batch_input_shape", {nullptr, 6}}}, {}),
              entry("Dense", "inner", {{"units", 6}, {"activation", "relu"}}, {"x"}),
              entry("Dropout", "drop", {{"rate", 0.25}}, {"inner"}),
              entry("Add", "skip", json::object(), {"drop", "x"}),
              entry("Dense", "side", {{"units", 4}}, {"x"}),
              entry("Concatenate", "join", {{"axis", -1}}, {"skip", "side"}),
              entry("Dense", "logits", {{"units", 5}}, {"join"})}},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"logits", 0, 0}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

// A shared layer: the same Dense 6 tanh applied twice (to the input, then to its own output),
// both calls added, -> Dense 5: the shared kernel's gradient is the sum of two calls'.
inline json shared_model_config() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "shared", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 6]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "twice", "config": {"name": "twice", "units": 6,
       "activation": "tanh"}, "inbound_nodes": [[["x", 0, 0, {}]], [["twice", 0, 0, {}]]]},
      {"class_name": "Add", "name": "both", "config": {"name": "both"},
       "inbound_nodes": [[["twice", 0, 0, {}], ["twice", 1, 0, {}]]]},
      {"class_name": "Dense", "name": "logits", "config": {"name": "logits", "units": 5},
       "inbound_nodes": [[["both", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["logits", 0, 0]]}})");
}

// Models nested as layers (Keras 2's form): a Functional `block` (Dense 6 tanh -> Dropout 0.25)
// called once, a Sequential `mix` (Dense 6 tanh) called twice, on the input and on the block's
// output, both added -> Dense 5: mix's kernel gradient is the sum of its two calls'.
inline json nested_model_config() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "nested", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 6]},
       "inbound_nodes": []},
      {"class_name": "Functional", "name": "block", "config": {"name": "block", "layers": [
         {"class_name": "InputLayer", "name": "block_in", "config": {"name": "block_in",
          "batch_input_shape": [null, 6]}, "inbound_nodes": []},
         {"class_name": "Dense", "name": "block_dense", "config": {"name": "block_dense",
          "units": 6, "activation": "tanh"}, "inbound_nodes": [[["block_in", 0, 0, {}]]]},
         {"class_name": "Dropout", "name": "block_drop", "config": {"name": "block_drop",
          "rate": 0.25}, "inbound_nodes": [[["block_dense", 0, 0, {}]]]}],
         "input_layers": [["block_in", 0, 0]], "output_layers": [["block_drop", 0, 0]]},
       "inbound_nodes": [[["x", 0, 0, {}]]]},
      {"class_name": "Sequential", "name": "mix", "config": {"name": "mix", "layers": [
         {"class_name": "Dense", "config": {"name": "mix_dense", "units": 6,
          "activation": "tanh"}}]},
       "inbound_nodes": [[["x", 0, 0, {}]], [["block", 1, 0, {}]]]},
      {"class_name": "Add", "name": "both", "config": {"name": "both"},
       "inbound_nodes": [[["mix", 0, 0, {}], ["mix", 1, 0, {}]]]},
      {"class_name": "Dense", "name": "logits", "config": {"name": "logits", "units": 5},
       "inbound_nodes": [[["both", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["logits", 0, 0]]},
      "keras_version": "2.15.0"})");
}

// A transformer block in Keras 3's form: the 6 inputs as a sequence of 3 tokens of 2, causal
// self-attention (2 heads, dropout on the attention probabilities), added back and
// layer-normalised, averaged over time -> Dense 5.
inline json attention_model_config() {
  const auto tensor = [](const char* n) {
    return json{{"class_name", "__keras_tensor__"}, {"config", {{"keras_history", {n, 0, 0}}}}};
  };
  // args as a vector: a braced list of one json would be that json itself under clang (CWG 2137)
  // and a one-element array under GCC.
  const auto entry = [&](const char* cls, const char* name, json config, std::vector<json> args,
                         json kwargs = json::object()) {
    config["name"] = name;
    return json{{"class_name", cls},
                {"name", name},
                {"config", config},
                {"inbound_nodes", json::array({{{"args", json(args)}, {"kwargs", kwargs}}})}};
  };
  json input{{"class_name", "InputLayer"},
             {"name", "x"},
             {"config", {{"batch_shape", {nullptr, 6}}, {"name", "x"}}},
             {"inbound_nodes", json::array()}};
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "attention"},
            {"layers",
             {input,
              entry("Reshape", "tokens", {{"target_shape", {3, 2}}}, {tensor("x")}),
              entry("MultiHeadAttention", "mha",
                    {{"num_heads", 2}, {"key_dim", 2}, {"dropout", 0.25}},
                    {tensor("tokens"), tensor("tokens")}, {{"use_causal_mask", true}}),
              entry("Add", "skip", json::object(), {json::array({tensor("mha"), tensor("tokens")})}),
              entry("LayerNormalization", "norm", {{"epsilon", 1e-3}}, {tensor("skip")}),
              entry("GlobalAveragePooling1D", "pool", json::object(), {tensor("norm")}),
              entry("Dense", "logits", {{"units", 5}}, {tensor("pool")})}},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"logits", 0, 0}}}}}};
}

struct Fixture {
  explicit Fixture(const json& config = model_config())
      : model(Model::from_config(config, "model", 17)) {}
  std::unique_ptr<Model> model;
  std::unique_ptr<Loss> loss = make_loss(
      json{{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
      "loss");
  std::unique_ptr<Optimizer> opt =
      make_optimizer(json{{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}, "o");
  std::vector<std::unique_ptr<Metric>> metrics =
      make_metrics(json::array({"accuracy"}), "metrics", *loss, {5});
};

// Template-only training: the whole batch through one model, no ReplicaModel at all.
inline void train_template_alone(Fixture& s, std::int64_t batch, int steps) {
  Tensor grad;
  for (int step = 0; step < steps; ++step) {
    Batch b = make_batch(batch, 100 + static_cast<std::uint64_t>(step));
    const Tensor& out = s.model->forward(b.x, true);
    s.loss->compute(out, b.y, 1.0f / static_cast<float>(batch), &grad);
    s.model->backward(grad);
    s.opt->apply(s.model->trainable_parameters());
  }
}

inline void train_meta(Fixture& s, ReplicaModel& meta, std::int64_t batch, int steps) {
  for (int step = 0; step < steps; ++step) {
    Batch b = make_batch(batch, 100 + static_cast<std::uint64_t>(step));
    meta.forward_backward(b, *s.loss, s.metrics);
    meta.apply_update();
  }
}

// max|a - b| / max|b| per tensor, worst over tensors. Attention's key bias is left out: it
// adds q·b to every score of a query, which the softmax cancels, so its gradient is zero up to
// rounding; Adam turns that rounding (different sums on different splits) into full-size steps
// of either sign. It has no effect on any output, which the tests compare besides.
inline double max_relative_difference(Model& a, Model& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (pa[i]->name == "key/bias") continue;
    double diff = 0, scale = 0;
    for (std::int64_t k = 0; k < pa[i]->value.size(); ++k) {
      diff = std::max(diff, static_cast<double>(std::fabs(pa[i]->value[k] - pb[i]->value[k])));
      scale = std::max(scale, static_cast<double>(std::fabs(pb[i]->value[k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

inline bool bitwise_equal(Model& a, Model& b) {
  auto pa = a.parameters(), pb = b.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (std::memcmp(pa[i]->value.data(), pb[i]->value.data(),
                    static_cast<std::size_t>(pa[i]->value.size()) * sizeof(float)) != 0)
      return false;
  return true;
}

// Dense 6 -> 12 (no bias), BatchNormalization, relu, Dense 5: with `synchronized` the statistics
// span the whole global batch, so the meta-model equals the template on any number of replicas
// (contract 1 restored); without it each replica normalises its own shard (the documented
// exception).
inline json batch_norm_model(bool synchronized) {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             // No bias before the normalisation: its gradient is exactly 0 in theory, so it would
             // only follow rounding noise (amplified by Adam) and measure nothing.
             {{{"class_name", "Dense"},
               {"config", {{"units", 12}, {"use_bias", false}, {"input_shape", {6}}}}},
              {{"class_name", "BatchNormalization"},
               {"config", {{"synchronized", synchronized}, {"momentum", 0.9}}}},
              {{"class_name", "Activation"}, {"config", {{"activation", "relu"}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 5}}}}}}}}};
}


}  // namespace tandem::meta_test
