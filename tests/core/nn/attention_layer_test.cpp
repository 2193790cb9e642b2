// Keras' Attention and AdditiveAttention layers (nn/attention_layer.hpp): their weights kept as
// Keras keeps them (Attention's scalar scale and concat_score_weight, AdditiveAttention's scale
// per feature, through a checkpoint file), tf.keras' `causal` argument as the call's
// use_causal_mask, the call forms Keras writes, and what Tandem does not compute refused at its
// place. (LayerOracle.AttentionMatchesPyTorch checks outputs and gradients against torch;
// SequenceMasks.APaddedSelfAttentionIsTheAttentionOnItsTokens its masks.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "gradient_check.hpp"
#include "nn/attention_layer.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// query (4, 3) and value (5, 3) -> Attention (or `class_name`), Keras 2's functional form;
// `config` the layer's, `call` the keyword arguments of its call (which Keras 2 writes beside each
// of its tensors).
json attention_model(const json& config, const json& call = json::object(),
                     const std::string& class_name = "Attention") {
  json m = json::parse(R"({"class_name": "Functional", "config": {"name": "m", "layers": [
    {"class_name": "InputLayer", "name": "q", "config": {"name": "q",
     "batch_input_shape": [null, 4, 3]}, "inbound_nodes": []},
    {"class_name": "InputLayer", "name": "v", "config": {"name": "v",
     "batch_input_shape": [null, 5, 3]}, "inbound_nodes": []}],
    "input_layers": [["q", 0, 0], ["v", 0, 0]], "output_layers": [["attention", 0, 0]]},
    "keras_version": "2.15.0"})");
  json attention_config = config;
  attention_config["name"] = "attention";
  m["config"]["layers"].push_back(
      {{"class_name", class_name},
       {"name", "attention"},
       {"config", attention_config},
       {"inbound_nodes", json::array({json::array(
                             {json::array({"q", 0, 0, call}), json::array({"v", 0, 0, call})})})}});
  return m;
}

TEST(Attention, ItsScaleIsAScalarThatACheckpointKeeps) {
  auto m = Model::from_config(attention_model({{"use_scale", true}}), "model", 1);
  ASSERT_EQ(m->parameter_names(), (std::vector<std::string>{"attention/scale"}));
  Parameter& scale = *m->parameters()[0];
  EXPECT_EQ(scale.value.shape(), Shape{});
  EXPECT_EQ(scale.value[0], 1.0f);  // Keras' initializer "ones"
  scale.value[0] = 2.5f;
  CheckpointData data;
  m->save_weights(data);
  const auto file = test::scratch_dir("attention-scale") / "w.h5";
  write_checkpoint_file(file, data);
  auto fresh = Model::from_config(m->config(), "model", 9);
  fresh->load_weights(read_checkpoint_file(file), file.string());
  EXPECT_EQ(fresh->parameters()[0]->value[0], 2.5f);
  EXPECT_EQ(fresh->output_shape(0), (Shape{4, 3}));
}

// The weights of the other score forms, as Keras names, shapes and starts them, kept through a
// checkpoint file by a model rebuilt from the config written back.
TEST(Attention, ConcatAndAdditiveScoresKeepTheirWeightsAsKerasDoes) {
  const auto written_config = [](const Model& m) {
    const json config = m.config();
    for (const json& entry : config["config"]["layers"])
      if (entry["name"] == "attention") return entry["config"];
    ADD_FAILURE() << "no layer 'attention' in " << config.dump();
    return json::object();
  };
  const auto round_trip = [](Model& m, const std::string& tag) {
    CheckpointData data;
    m.save_weights(data);
    const auto file = test::scratch_dir(tag) / "w.h5";
    write_checkpoint_file(file, data);
    auto fresh = Model::from_config(m.config(), "model", 9);
    fresh->load_weights(read_checkpoint_file(file), file.string());
    return fresh;
  };
  auto concat = Model::from_config(attention_model({{"score_mode", "concat"}, {"use_scale", true}}),
                                   "model", 1);
  ASSERT_EQ(concat->parameter_names(),
            (std::vector<std::string>{"attention/scale", "attention/concat_score_weight"}));
  for (Parameter* p : concat->parameters()) {
    EXPECT_EQ(p->value.shape(), Shape{});
    EXPECT_EQ(p->value[0], 1.0f);  // Keras' initializer "ones", both
  }
  concat->parameters()[0]->value[0] = 0.5f;
  concat->parameters()[1]->value[0] = -2.0f;
  auto concat_again = round_trip(*concat, "attention-concat");
  EXPECT_EQ(concat_again->parameters()[0]->value[0], 0.5f);
  EXPECT_EQ(concat_again->parameters()[1]->value[0], -2.0f);
  EXPECT_EQ(written_config(*concat_again)["score_mode"], "concat");

  auto additive = Model::from_config(
      attention_model(json::object(), json::object(), "AdditiveAttention"), "model", 1);
  ASSERT_EQ(additive->parameter_names(), (std::vector<std::string>{"attention/scale"}));
  const Tensor& scale = additive->parameters()[0]->value;
  EXPECT_EQ(scale.shape(), Shape{3});  // one per feature: use_scale is AdditiveAttention's default
  for (std::int64_t d = 0; d < 3; ++d) {
    EXPECT_LE(std::fabs(scale[d]), 1.0f);  // glorot_uniform of a vector: ±√(6 / (3 + 3))
    EXPECT_NE(scale[d], scale[(d + 1) % 3]);
  }
  const json written = written_config(*additive);
  EXPECT_FALSE(written.contains("score_mode")) << written.dump();  // as Keras writes it
  EXPECT_EQ(written["use_scale"], true);
  auto additive_again = round_trip(*additive, "attention-additive");
  for (std::int64_t d = 0; d < 3; ++d)
    EXPECT_EQ(additive_again->parameters()[0]->value[d], scale[d]);
  auto unscaled = Model::from_config(
      attention_model({{"use_scale", false}}, json::object(), "AdditiveAttention"), "model", 1);
  EXPECT_TRUE(unscaled->parameters().empty());
  // The three score forms compute different outputs from one input.
  const Tensor x = test::random_tensor({2, 4 * 3 + 5 * 3}, 3);
  auto dot = Model::from_config(attention_model(json::object()), "model", 1);
  const Tensor a = dot->forward(x, false).clone();
  const Tensor b = concat->forward(x, false).clone();
  const Tensor c = unscaled->forward(x, false).clone();
  double ab = 0, bc = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    ab = std::max(ab, static_cast<double>(std::fabs(a[i] - b[i])));
    bc = std::max(bc, static_cast<double>(std::fabs(b[i] - c[i])));
  }
  EXPECT_GT(ab, 1e-3);
  EXPECT_GT(bc, 1e-3);
}

// tf.keras' deprecated `causal` argument is the call's use_causal_mask: the two models compute
// the same, and differ from the model without it.
TEST(Attention, TfKerasCausalArgumentIsTheCallsCausalMask) {
  auto by_config = Model::from_config(attention_model({{"causal", true}}), "model", 1);
  auto by_call =
      Model::from_config(attention_model(json::object(), {{"use_causal_mask", true}}), "model", 1);
  auto plain = Model::from_config(attention_model(json::object()), "model", 1);
  const Tensor x = test::random_tensor({2, 4 * 3 + 5 * 3}, 3);
  const Tensor a = by_config->forward(x, false).clone();
  const Tensor b = by_call->forward(x, false).clone();
  const Tensor c = plain->forward(x, false).clone();
  double apart = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], b[i]) << i;
    apart = std::max(apart, static_cast<double>(std::fabs(a[i] - c[i])));
  }
  EXPECT_GT(apart, 1e-3);
}

TEST(Attention, WhatTandemDoesNotComputeIsRefusedAtItsPlace) {
  const auto error = [](const json& config, const json& call = json::object()) {
    return test::model_config_error(attention_model(config, call));
  };
  const std::vector<std::tuple<json, json, std::string>> bad{
      {{{"score_mode", "other"}},
       json::object(),
       "'model.config.layers[2].config.score_mode': expected one of 'dot', 'concat'"},
      {{{"dropout", 1.0}}, json::object(), "dropout"},
      {json::object(),
       {{"return_attention_scores", true}},
       "the call argument return_attention_scores=true is not supported"},
      {json::object(), {{"use_causal_mask", "yes"}}, "use_causal_mask"},
  };
  for (const auto& [config, call, message] : bad)
    EXPECT_NE(error(config, call).find(message), std::string::npos)
        << config.dump() << call.dump() << ": " << error(config, call);
  // A key of other features than the query's.
  json key = attention_model(json::object());
  key["config"]["layers"][1]["config"]["batch_input_shape"] = {nullptr, 5, 2};
  try {
    Model::from_config(key, "model", 1);
    ADD_FAILURE() << "a value of 2 features served as the key of a query of 3";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("needs the value's steps and the query's features"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
