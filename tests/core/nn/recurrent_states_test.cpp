// A recurrent layer's several outputs (return_state) and given states (initial_state) in a
// functional model, beside the oracle's and the CLI's tests: Keras 3's call form (the keyword
// initial_state, a list of tensors) builds the model Keras 2's form (the states after the
// sequence in the call's list) builds; the config written back reads back to the same model;
// every misuse is named at its place.
#include <gtest/gtest.h>

#include <cmath>

#include "keras_config_builders.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json keras3_tensor(const std::string& layer, int tensor) {
  return {{"class_name", "__keras_tensor__"},
          {"config",
           {{"shape", {nullptr, 3}}, {"dtype", "float32"}, {"keras_history", {layer, 0, tensor}}}}};
}

// (Lists built from vectors: a braced list of one json is a copy of it for clang, not a list.)
json keras3_layer(const std::string& cls, const std::string& name, json config,
                  const std::vector<json>& args, json kwargs = json::object()) {
  config["name"] = name;
  return {{"class_name", cls},
          {"name", name},
          {"config", config},
          {"inbound_nodes", json::array({json{{"args", json(args)}, {"kwargs", kwargs}}})}};
}

json tensors(const std::vector<json>& list) {
  return json(list);
}

// x (4, 3) -> encoder LSTM (return_state) -> decoder LSTM on x from the encoder's h and c
// (return_sequences, return_state) -> a GRU on x from the decoder's h; the decoder's sequence
// flattened, the GRU's output and the decoder's c concatenated into a Dense. `keras3`: the calls
// as Keras 3 writes them (initial_state a keyword), else as Keras 2 does.
json stated_model(bool keras3) {
  json layers = json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"name", "x"},
                    {"config", {{"name", "x"}, {"batch_shape", {nullptr, 4, 3}}}},
                    {"inbound_nodes", json::array()}});
  const json lstm = {{"units", 3}, {"return_state", true}};
  json decoder = lstm;
  decoder["return_sequences"] = true;
  const json gru = {{"units", 3}};
  if (keras3) {
    layers.push_back(keras3_layer("LSTM", "encoder", lstm, {keras3_tensor("x", 0)}));
    layers.push_back(keras3_layer(
        "LSTM", "decoder", decoder, {keras3_tensor("x", 0)},
        {{"initial_state", tensors({keras3_tensor("encoder", 1), keras3_tensor("encoder", 2)})}}));
    layers.push_back(keras3_layer("GRU", "gru", gru, {keras3_tensor("x", 0)},
                                  {{"initial_state", tensors({keras3_tensor("decoder", 1)})}}));
    layers.push_back(
        keras3_layer("Flatten", "flat", json::object(), {keras3_tensor("decoder", 0)}));
    layers.push_back(keras3_layer("Concatenate", "join", json::object(),
                                  {tensors({keras3_tensor("flat", 0), keras3_tensor("gru", 0),
                                            keras3_tensor("decoder", 2)})}));
    layers.push_back(keras3_layer("Dense", "out", {{"units", 2}}, {keras3_tensor("join", 0)}));
  } else {
    using test::keras2_ref;
    layers.push_back(test::keras2_layer("LSTM", "encoder", lstm, {keras2_ref("x", 0)}));
    layers.push_back(test::keras2_layer(
        "LSTM", "decoder", decoder,
        {keras2_ref("x", 0), keras2_ref("encoder", 1), keras2_ref("encoder", 2)}));
    layers.push_back(
        test::keras2_layer("GRU", "gru", gru, {keras2_ref("x", 0), keras2_ref("decoder", 1)}));
    layers.push_back(
        test::keras2_layer("Flatten", "flat", json::object(), {keras2_ref("decoder", 0)}));
    layers.push_back(test::keras2_layer(
        "Concatenate", "join", json::object(),
        {keras2_ref("flat", 0), keras2_ref("gru", 0), keras2_ref("decoder", 2)}));
    layers.push_back(test::keras2_layer("Dense", "out", {{"units", 2}}, {keras2_ref("join", 0)}));
  }
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "stated"},
            {"layers", layers},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"out", 0, 0}}}}}};
}

Tensor outputs_of(const json& config) {
  auto model = Model::from_config(config, "model", 5);
  Tensor x({6, 4, 3});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  return model->forward(x, false).clone();
}

TEST(RecurrentStates, Keras3sCallFormBuildsTheModelKeras2sDoes) {
  const Tensor keras2 = outputs_of(stated_model(false)), keras3 = outputs_of(stated_model(true));
  ASSERT_EQ(keras2.shape(), (Shape{6, 2}));
  for (std::int64_t i = 0; i < keras2.size(); ++i) EXPECT_EQ(keras2[i], keras3[i]) << i;
  // Written back (Keras 2's form, the states' references with their tensor indices) and read
  // again: the same model.
  for (bool keras3_form : {false, true}) {
    const json written = Model::from_config(stated_model(keras3_form), "model", 5)->config();
    const Tensor again = outputs_of(written);
    for (std::int64_t i = 0; i < keras2.size(); ++i) EXPECT_EQ(again[i], keras2[i]) << i;
  }
  // The encoder reaches the output through its states alone: zero weights there (zero states)
  // give another output.
  auto model = Model::from_config(stated_model(false), "model", 5);
  for (Parameter* p : model->layer(0).parameters())
    for (std::int64_t i = 0; i < p->value.size(); ++i) p->value[i] = 0;
  ASSERT_EQ(model->layer(0).name(), "encoder");
  Tensor x({6, 4, 3});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const Tensor& without = model->forward(x, false);
  double diff = 0;
  for (std::int64_t i = 0; i < keras2.size(); ++i)
    diff = std::max(diff, static_cast<double>(std::fabs(without[i] - keras2[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(RecurrentStates, MisusesAreNamedAtTheirPlace) {
  const auto error = [](const json& config) { return test::model_config_error(config); };
  json one_state = stated_model(false);
  one_state["config"]["layers"][2]["inbound_nodes"][0].erase(2);
  EXPECT_NE(error(one_state).find("'model.config.layers[2]': layer 'decoder' (LSTM) starts from "
                                  "2 initial states (h and c), got 1"),
            std::string::npos)
      << error(one_state);
  json no_such_output = stated_model(false);
  no_such_output["config"]["layers"][2]["inbound_nodes"][0][2][2] = 3;
  EXPECT_NE(error(no_such_output)
                .find("layer 'decoder' takes output 3 of 'encoder' (LSTM), which has 3 outputs"),
            std::string::npos)
      << error(no_such_output);
  json single = stated_model(false);
  single["config"]["layers"][5]["inbound_nodes"][0][0] = {"flat", 0, 1, json::object()};
  EXPECT_NE(error(single).find("layer 'join' takes output 1 of 'flat' (Flatten), which has one "
                               "output (tensor index 0)"),
            std::string::npos)
      << error(single);
  json wide = stated_model(false);  // a state of another width than the layer's units
  wide["config"]["layers"][3]["config"]["units"] = 5;
  EXPECT_NE(error(wide).find("layer 'gru' (GRU): initial state 0 has shape (None, 3), but the "
                             "layer's states are (None, 5)"),
            std::string::npos)
      << error(wide);
  json keyword = stated_model(true);
  keyword["config"]["layers"][2]["inbound_nodes"][0]["kwargs"]["mask"] = true;
  EXPECT_NE(error(keyword).find("layer 'decoder' (LSTM) takes no call options here"),
            std::string::npos)
      << error(keyword);
  const json sequential = {
      {"class_name", "Sequential"},
      {"config",
       {{"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_shape", {nullptr, 4, 3}}}}},
          {{"class_name", "LSTM"},
           {"config", {{"name", "lstm"}, {"units", 2}, {"return_state", true}}}}}}}}};
  EXPECT_NE(error(sequential)
                .find("layer 'lstm' (LSTM) gives 3 outputs: a Sequential model's "
                      "layers give one"),
            std::string::npos)
      << error(sequential);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
