// Nested models (a Keras model used as a layer of another): a model holding them computes what
// the same layers written into one graph compute (the flat graph's arithmetic is checked against
// PyTorch elsewhere), in Keras 2's and Keras 3's forms; its config, summary and weights keep
// Keras' nesting (a nested model one group, its trainable weights first); what cannot be run is
// refused at its JSON path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json input_entry(const std::string& name, std::int64_t width) {
  return {
      {"class_name", "InputLayer"},
      {"config", {{"batch_input_shape", {nullptr, width}}, {"dtype", "float32"}, {"name", name}}},
      {"name", name},
      {"inbound_nodes", json::array()}};
}

json dense_config(const std::string& name, std::int64_t units, const std::string& activation) {
  return {{"name", name}, {"trainable", true}, {"units", units}, {"activation", activation}};
}

json ref(const std::string& layer, int node, int tensor = 0) {
  return json::array({layer, node, tensor, json::object()});
}

using Calls = std::initializer_list<std::vector<json>>;
json calls(Calls per_call) {
  return test::keras2_calls(per_call);
}

// A Keras 2 functional layer entry called as `per_call` says.
json dense_entry(const std::string& name, std::int64_t units, const std::string& activation,
                 Calls per_call) {
  return {{"class_name", "Dense"},
          {"config", dense_config(name, units, activation)},
          {"name", name},
          {"inbound_nodes", calls(per_call)}};
}

// Keras 2.15's to_json() of a siamese model:
//   encoder = Model(Input(8) -> Dense(16, relu) -> Dense(8))       (enc_in, enc_d1, enc_d2)
//   head = Sequential([Input(16), Dense(8, relu), Dense(1, sigmoid)])   (head_d1, head_out)
//   y = head(Concatenate()([encoder(left), encoder(right)]))
// Keras 2 numbers a nested Functional model's calls (and a Sequential one's with an InputLayer)
// from 1.
json siamese_keras2() {
  json encoder = {
      {"class_name", "Functional"},
      {"name", "encoder"},
      {"config",
       {{"name", "encoder"},
        {"layers",
         {input_entry("enc_in", 8), dense_entry("enc_d1", 16, "relu", {{ref("enc_in", 0)}}),
          dense_entry("enc_d2", 8, "linear", {{ref("enc_d1", 0)}})}},
        {"input_layers", {{"enc_in", 0, 0}}},
        {"output_layers", {{"enc_d2", 0, 0}}}}},
      {"inbound_nodes", calls({{ref("left", 0)}, {ref("right", 0)}})}};
  json head = {
      {"class_name", "Sequential"},
      {"name", "head"},
      {"config",
       {{"name", "head"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"config",
            {{"batch_input_shape", {nullptr, 16}}, {"dtype", "float32"}, {"name", "head_in"}}}},
          {{"class_name", "Dense"}, {"config", dense_config("head_d1", 8, "relu")}},
          {{"class_name", "Dense"}, {"config", dense_config("head_out", 1, "sigmoid")}}}}}},
      {"inbound_nodes", calls({{ref("concat", 0)}})}};
  json concat = {{"class_name", "Concatenate"},
                 {"name", "concat"},
                 {"config", {{"name", "concat"}, {"axis", -1}}},
                 {"inbound_nodes", calls({{ref("encoder", 1), ref("encoder", 2)}})}};
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "siamese"},
            {"layers", {input_entry("left", 8), input_entry("right", 8), encoder, concat, head}},
            {"input_layers", {{"left", 0, 0}, {"right", 0, 0}}},
            {"output_layers", {{"head", 1, 0}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

// The same layers written into one graph: enc_d1 and enc_d2 shared by the two inputs.
json siamese_flat() {
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "flat"},
            {"layers",
             {input_entry("left", 8),
              input_entry("right", 8),
              dense_entry("enc_d1", 16, "relu", {{ref("left", 0)}, {ref("right", 0)}}),
              dense_entry("enc_d2", 8, "linear", {{ref("enc_d1", 0)}, {ref("enc_d1", 1)}}),
              {{"class_name", "Concatenate"},
               {"name", "concat"},
               {"config", {{"name", "concat"}, {"axis", -1}}},
               {"inbound_nodes", calls({{ref("enc_d2", 0), ref("enc_d2", 1)}})}},
              dense_entry("head_d1", 8, "relu", {{ref("concat", 0)}}),
              dense_entry("head_out", 1, "sigmoid", {{ref("head_d1", 0)}})}},
            {"input_layers", {{"left", 0, 0}, {"right", 0, 0}}},
            {"output_layers", {{"head_out", 0, 0}}}}}};
}

// Keras 3's to_json() of the siamese model: calls as {"args": [...]}, whose references count a
// nested model's calls from 0; output_layers counts a nested Functional model's from 1.
json siamese_keras3() {
  const auto tensor = [](const std::string& layer, int node) {
    return json{{"class_name", "__keras_tensor__"},
                {"config", {{"keras_history", {layer, node, 0}}}}};
  };
  const auto call = [](json arg) {
    return json{{"args", json::array({std::move(arg)})}, {"kwargs", json::object()}};
  };
  const auto input3 = [](const std::string& name, std::int64_t width) {
    return json{
        {"class_name", "InputLayer"},
        {"config", {{"batch_shape", {nullptr, width}}, {"dtype", "float32"}, {"name", name}}},
        {"name", name},
        {"inbound_nodes", json::array()}};
  };
  const auto dense3 = [&](const std::string& name, std::int64_t units, const char* act,
                          json nodes) {
    return json{{"module", "keras.layers"},
                {"class_name", "Dense"},
                {"config", dense_config(name, units, act)},
                {"registered_name", nullptr},
                {"name", name},
                {"inbound_nodes", std::move(nodes)}};
  };
  json encoder = {
      {"module", "keras"},
      {"class_name", "Functional"},
      {"name", "encoder"},
      {"config",
       {{"name", "encoder"},
        {"trainable", true},
        {"layers",
         {input3("enc_in", 8),
          dense3("enc_d1", 16, "relu", json::array({call(tensor("enc_in", 0))})),
          dense3("enc_d2", 8, "linear", json::array({call(tensor("enc_d1", 0))}))}},
        {"input_layers", {{"enc_in", 0, 0}}},
        {"output_layers", {{"enc_d2", 0, 0}}}}},
      {"registered_name", "Functional"},
      {"inbound_nodes", json::array({call(tensor("left", 0)), call(tensor("right", 0))})}};
  json head = {
      {"module", "keras"},
      {"class_name", "Sequential"},
      {"name", "head"},
      {"config",
       {{"name", "head"},
        {"trainable", true},
        {"dtype", "float32"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"config", {{"batch_shape", {nullptr, 16}}, {"dtype", "float32"}, {"name", "head_in"}}}},
          {{"class_name", "Dense"}, {"config", dense_config("head_d1", 8, "relu")}},
          {{"class_name", "Dense"}, {"config", dense_config("head_out", 1, "sigmoid")}}}},
        {"build_input_shape", {nullptr, 16}}}},
      {"registered_name", "Sequential"},
      {"inbound_nodes", json::array({call(tensor("concat", 0))})}};
  json concat = {{"class_name", "Concatenate"},
                 {"name", "concat"},
                 {"config", {{"name", "concat"}, {"axis", -1}}},
                 {"inbound_nodes",
                  json::array({call(json::array({tensor("encoder", 0), tensor("encoder", 1)}))})}};
  return {{"module", "keras"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "siamese"},
            {"trainable", true},
            {"layers", {input3("left", 8), input3("right", 8), encoder, concat, head}},
            {"input_layers", {{"left", 0, 0}, {"right", 0, 0}}},
            {"output_layers", {{"head", 0, 0}}}}},
          {"registered_name", "Functional"}};
}

std::string error_of(const json& model) {
  return test::model_config_error(model);
}

// The two models give the same outputs and the same gradients, bit for bit, once b has a's
// weights (layers in the same order).
void expect_same_arithmetic(Model& a, Model& b, std::int64_t rows = 5) {
  b.copy_weights_from(a);
  const Tensor x = test::random_tensor({rows, shape_size(a.input_shape())}, 11);
  const Tensor ya = a.forward(x, true).clone();
  const Tensor yb = b.forward(x, true).clone();
  ASSERT_EQ(ya.shape(), yb.shape());
  for (std::int64_t i = 0; i < ya.size(); ++i) EXPECT_EQ(ya[i], yb[i]) << "output " << i;
  const Tensor g = test::random_tensor(ya.shape(), 12);
  a.backward(g);
  b.backward(g);
  const auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t j = 0; j < pa.size(); ++j)
    for (std::int64_t i = 0; i < pa[j]->grad.size(); ++i)
      ASSERT_EQ(pa[j]->grad[i], pb[j]->grad[i]) << "parameter " << j << " value " << i;
}

TEST(NestedModels, ASiameseModelComputesWhatItsLayersInOneGraphCompute) {
  auto nested = Model::from_config(siamese_keras2(), "model", 1);
  auto flat = Model::from_config(siamese_flat(), "model", 2);
  EXPECT_EQ(nested->layer_count(), 5u);  // enc_d1, enc_d2, concat, head_d1, head_out
  EXPECT_EQ(nested->call_count(), 7u);   // the encoder's layers twice
  EXPECT_EQ(nested->input_count(), 2u);
  EXPECT_EQ(nested->output_name(0), "head");  // named as output_layers names it, Keras' way
  EXPECT_EQ(nested->count_params(), flat->count_params());
  expect_same_arithmetic(*flat, *nested);
}

TEST(NestedModels, KerasThreesFormReadsAsKerasTwos) {
  auto keras2 = Model::from_config(siamese_keras2(), "model", 1);
  auto keras3 = Model::from_config(siamese_keras3(), "model", 2);
  EXPECT_EQ(keras3->call_count(), 7u);
  expect_same_arithmetic(*keras2, *keras3);

  // A nested Functional model's call as the model's output: output_layers counts it from 1 in
  // both Keras versions.
  for (const bool keras3_form : {false, true}) {
    json model = keras3_form ? siamese_keras3() : siamese_keras2();
    auto& layers = model["config"]["layers"];
    layers.erase(layers.begin() + 3, layers.end());  // left, right, encoder
    model["config"]["output_layers"] = {{"encoder", 1, 0}, {"encoder", 2, 0}};
    auto two = Model::from_config(model, "model", 3);
    ASSERT_EQ(two->output_count(), 2u) << keras3_form;
    EXPECT_EQ(two->output_name(0), "encoder");
    EXPECT_EQ(two->output_name(1), "encoder_1");  // Keras' names of a layer's later outputs
    EXPECT_NE(two->output_call(0), two->output_call(1));
  }
}

TEST(NestedModels, ANestedModelOfTwoInputsAndTwoOutputs) {
  // pair = Model([a(3), b(2)], [Dense 4 of Concatenate([a, b]), Dense 1 of a]); the model calls
  // it on [x, y], reads its output 0 with a Dense and gives its output 1 as its own.
  const json pair = {{"class_name", "Functional"},
                     {"name", "pair"},
                     {"config",
                      {{"name", "pair"},
                       {"layers",
                        {input_entry("a", 3),
                         input_entry("b", 2),
                         {{"class_name", "Concatenate"},
                          {"name", "ab"},
                          {"config", {{"name", "ab"}}},
                          {"inbound_nodes", calls({{ref("a", 0), ref("b", 0)}})}},
                         dense_entry("wide", 4, "tanh", {{ref("ab", 0)}}),
                         dense_entry("narrow", 1, "linear", {{ref("a", 0)}})}},
                       {"input_layers", {{"a", 0, 0}, {"b", 0, 0}}},
                       {"output_layers", {{"wide", 0, 0}, {"narrow", 0, 0}}}}},
                     {"inbound_nodes", calls({{ref("x", 0), ref("y", 0)}})}};
  const json nested = {
      {"class_name", "Functional"},
      {"config",
       {{"name", "m"},
        {"layers",
         {input_entry("x", 3), input_entry("y", 2), pair,
          dense_entry("top", 2, "linear", {{ref("pair", 1, 0)}})}},
        {"input_layers", {{"x", 0, 0}, {"y", 0, 0}}},
        {"output_layers", {{"top", 0, 0}, {"pair", 1, 1}}}}},
      {"keras_version", "2.15.0"}};
  const json flat = {{"class_name", "Functional"},
                     {"config",
                      {{"name", "flat"},
                       {"layers",
                        {input_entry("x", 3),
                         input_entry("y", 2),
                         {{"class_name", "Concatenate"},
                          {"name", "ab"},
                          {"config", {{"name", "ab"}}},
                          {"inbound_nodes", calls({{ref("x", 0), ref("y", 0)}})}},
                         dense_entry("wide", 4, "tanh", {{ref("ab", 0)}}),
                         dense_entry("narrow", 1, "linear", {{ref("x", 0)}}),
                         dense_entry("top", 2, "linear", {{ref("wide", 0)}})}},
                       {"input_layers", {{"x", 0, 0}, {"y", 0, 0}}},
                       {"output_layers", {{"top", 0, 0}, {"narrow", 0, 0}}}}}};
  auto a = Model::from_config(flat, "model", 1);
  auto b = Model::from_config(nested, "model", 2);
  ASSERT_EQ(b->output_count(), 2u);
  EXPECT_EQ(b->output_name(1), "pair");
  EXPECT_EQ(b->output_shape(1), (Shape{1}));
  EXPECT_EQ(b->output_shape(0), (Shape{2}));
  expect_same_arithmetic(*a, *b);
  EXPECT_NE(b->summary().find(" pair (Functional)           [(None, 4), (None, 1)]    28"),
            std::string::npos)
      << b->summary();
}

TEST(NestedModels, ConfigSummaryAndWeightsKeepKerasNesting) {
  auto model = Model::from_config(siamese_keras2(), "model", 1);
  model->layer(0).set_trainable(false);  // enc_d1: the written config says so
  const json config = model->config();
  const json& encoder = config["config"]["layers"][2];
  EXPECT_EQ(encoder["class_name"], "Functional");
  EXPECT_EQ(encoder["inbound_nodes"], siamese_keras2()["config"]["layers"][2]["inbound_nodes"]);
  EXPECT_EQ(encoder["config"]["layers"][1]["config"]["trainable"], false);
  EXPECT_EQ(encoder["config"]["layers"][1]["config"]["units"], 16);
  EXPECT_EQ(config["config"]["layers"][4]["config"]["layers"][2]["config"]["activation"],
            "sigmoid");
  // The written config reads back into the same model.
  auto again = Model::from_config(config, "model", 5);
  EXPECT_FALSE(again->layer(0).trainable());
  expect_same_arithmetic(*model, *again);

  const std::string summary = model->summary();
  EXPECT_NE(summary.find(" encoder (Functional)        (None, 8)                 280       "
                         "['left[0][0]',"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find(" concat (Concatenate)        (None, 16)                0         "
                         "['encoder[0][0]',"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find(" head (Sequential)           (None, 1)                 145"),
            std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("enc_d1"), std::string::npos) << summary;  // inside its model's row
  // Expanded, as Keras' summary(expand_nested=True): the nested models' layers after each.
  const std::string expanded = model->summary(true);
  EXPECT_NE(expanded.find(" encoder (Functional)        (None, 8)                 280       "
                          "['left[0][0]',\n"
                          "                                                                  "
                          "'right[0][0]']\n\n"
                          " └ enc_d1 (Dense)            (None, 16)                144       "
                          "['enc_in[0][0]']\n\n"
                          " └ enc_d2 (Dense)            (None, 8)                 136       "
                          "['enc_d1[0][0]']\n\n"
                          " concat (Concatenate)"),
            std::string::npos)
      << expanded;
  EXPECT_NE(expanded.find(" └ head_out (Dense)          (None, 1)                 9         "
                          "['head_d1[0][0]']"),
            std::string::npos)
      << expanded;

  CheckpointData data;
  model->save_weights(data);
  std::vector<std::string> groups;
  for (const auto& lw : data.layers) groups.push_back(lw.layer);
  EXPECT_EQ(groups, (std::vector<std::string>{"left", "right", "encoder", "concat", "head"}));
  std::vector<std::string> names;
  for (const auto& w : data.layers[2].weights) names.push_back(w.name);
  // enc_d1 is frozen: Keras lists a nested model's trainable weights first.
  EXPECT_EQ(names, (std::vector<std::string>{"enc_d2/kernel", "enc_d2/bias", "enc_d1/kernel",
                                             "enc_d1/bias"}));
  auto loaded = Model::from_config(config, "model", 9);
  EXPECT_EQ(loaded->load_weights(data, "file.h5"), "");
  expect_same_arithmetic(*model, *loaded);
  EXPECT_EQ(loaded->parameters()[0]->value[3], model->parameters()[0]->value[3]);
}

// Input(4) -> Sequential([Dense(3), BatchNormalization, Dense(2)]) as `block`, then Dense(1).
json model_with_block(bool block_trainable) {
  json block = {
      {"class_name", "Sequential"},
      {"name", "block"},
      {"config",
       {{"name", "block"},
        {"trainable", block_trainable},
        {"layers",
         {{{"class_name", "Dense"}, {"config", dense_config("b_d1", 3, "relu")}},
          {{"class_name", "BatchNormalization"}, {"config", {{"name", "b_bn"}}}},
          {{"class_name", "Dense"}, {"config", dense_config("b_d2", 2, "linear")}}}}}},
      {"inbound_nodes", calls({{ref("x", 0)}})}};  // no InputLayer: Keras 2 counts its calls from 0
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers",
             {input_entry("x", 4), block, dense_entry("out", 1, "linear", {{ref("block", 0)}})}},
            {"input_layers", {{"x", 0, 0}}},
            {"output_layers", {{"out", 0, 0}}}}},
          {"keras_version", "2.15.0"}};
}

std::vector<std::string> block_weight_names(const Model& model) {
  CheckpointData data;
  model.save_weights(data);
  std::vector<std::string> names;
  for (const auto& lw : data.layers)
    if (lw.layer == "block")
      for (const auto& w : lw.weights) names.push_back(w.name);
  return names;
}

TEST(NestedModels, AFrozenNestedModelFreezesItsLayersAndListsItsWeightsAsKerasDoes) {
  auto trainable = Model::from_config(model_with_block(true), "model", 1);
  EXPECT_EQ(block_weight_names(*trainable),
            (std::vector<std::string>{"b_d1/kernel", "b_d1/bias", "b_bn/gamma", "b_bn/beta",
                                      "b_d2/kernel", "b_d2/bias", "b_bn/moving_mean",
                                      "b_bn/moving_variance"}));
  EXPECT_EQ(trainable->count_trainable_params(), 15 + 6 + 8 + 3);

  auto frozen = Model::from_config(model_with_block(false), "model", 1);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FALSE(frozen->layer(i).trainable()) << i;
  EXPECT_TRUE(frozen->layer(3).trainable());
  EXPECT_EQ(frozen->count_trainable_params(), 3);  // out's kernel and bias
  // All non-trainable: layer by layer (Keras' non_trainable_weights of a frozen model).
  EXPECT_EQ(block_weight_names(*frozen),
            (std::vector<std::string>{"b_d1/kernel", "b_d1/bias", "b_bn/gamma", "b_bn/beta",
                                      "b_bn/moving_mean", "b_bn/moving_variance", "b_d2/kernel",
                                      "b_d2/bias"}));
  EXPECT_EQ(frozen->config()["config"]["layers"][1]["config"]["trainable"], false);
}

TEST(NestedModels, ANestedModelCalledWithTrainingFalseRunsInInferenceMode) {
  // Keras' transfer-learning idiom, base_model(inputs, training=False), in tf.keras 2's form: the
  // nested model's BatchNormalization keeps its moving statistics while the model trains (its
  // gamma and beta still train once the base is unfrozen).
  json config = model_with_block(true);
  config["config"]["layers"][1]["inbound_nodes"][0][0][3] = {{"training", false}};
  auto model = Model::from_config(config, "model", 1);
  Parameter* moving_mean = nullptr;
  Parameter* gamma = nullptr;
  for (Parameter* p : model->layer(1).parameters()) {
    if (p->name == "moving_mean") moving_mean = p;
    if (p->name == "gamma") gamma = p;
  }
  ASSERT_TRUE(moving_mean && gamma);
  const Tensor x = test::random_tensor({8, 4}, 21);
  const Tensor before = moving_mean->value.clone();
  const Tensor y_training = model->forward(x, true).clone();
  for (std::int64_t i = 0; i < before.size(); ++i) EXPECT_EQ(moving_mean->value[i], before[i]);
  const Tensor& y_inference = model->forward(x, false);
  for (std::int64_t i = 0; i < y_training.size(); ++i) EXPECT_EQ(y_training[i], y_inference[i]);
  model->forward(x, true);
  model->backward(test::random_tensor({8, 1}, 22));
  double sum = 0;
  for (std::int64_t i = 0; i < gamma->grad.size(); ++i) sum += std::fabs(gamma->grad[i]);
  EXPECT_GT(sum, 0.0);
  // Without the argument the same model trains its statistics.
  auto plain = Model::from_config(model_with_block(true), "model", 1);
  plain->forward(x, true);
  bool moved = false;
  for (Parameter* p : plain->layer(1).parameters())
    if (p->name == "moving_mean")
      for (std::int64_t i = 0; i < p->value.size(); ++i) moved = moved || p->value[i] != before[i];
  EXPECT_TRUE(moved);
  // The config written back keeps the call as it was given.
  EXPECT_EQ(model->config()["config"]["layers"][1]["inbound_nodes"],
            config["config"]["layers"][1]["inbound_nodes"]);
}

TEST(NestedModels, KerasTwoNumbersASequentialModelsCallsByItsInput) {
  // Keras 2.2 gave a Sequential model's first layer its batch_input_shape (no InputLayer) and
  // counted the nested model's calls from 1; a Sequential model without any input, built by its
  // first call, is counted from 0 by tf.keras 2 and from 1 by Keras 2.2: its references tell.
  json reference = model_with_block(true);
  auto from_zero = Model::from_config(reference, "model", 1);
  json shaped = reference;
  shaped["config"]["layers"][1]["config"]["layers"][0]["config"]["batch_input_shape"] = {nullptr,
                                                                                         4};
  shaped["config"]["layers"][2]["inbound_nodes"][0][0][1] = 1;
  auto keras22 = Model::from_config(shaped, "model", 2);
  expect_same_arithmetic(*from_zero, *keras22);
  json unshaped = reference;
  unshaped["config"]["layers"][2]["inbound_nodes"][0][0][1] = 1;
  auto counted_from_one = Model::from_config(unshaped, "model", 3);
  expect_same_arithmetic(*from_zero, *counted_from_one);
  // With an input, node 0 is the nested model's own.
  shaped["config"]["layers"][2]["inbound_nodes"][0][0][1] = 0;
  EXPECT_NE(error_of(shaped).find("names node 0 of 'block', a nested model whose calls Keras "
                                  "numbers from 1 here"),
            std::string::npos)
      << error_of(shaped);
}

TEST(NestedModels, ASequentialModelOfABackboneAndAHead) {
  // Sequential([backbone, Dense(2)]) without an InputLayer of its own: the backbone's gives
  // the input shape.
  json backbone = {
      {"class_name", "Functional"},
      {"config",
       {{"name", "backbone"},
        {"layers", {input_entry("bb_in", 6), dense_entry("bb_d", 4, "tanh", {{ref("bb_in", 0)}})}},
        {"input_layers", {{"bb_in", 0, 0}}},
        {"output_layers", {{"bb_d", 0, 0}}}}}};
  json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "seq"},
        {"layers",
         {backbone, {{"class_name", "Dense"}, {"config", dense_config("top", 2, "linear")}}}}}}};
  auto nested = Model::from_config(model, "model", 1);
  EXPECT_EQ(nested->input_shape(), (Shape{6}));
  EXPECT_FALSE(nested->functional());
  const std::string summary = nested->summary();
  EXPECT_NE(summary.find(" backbone (Functional)       (None, 4)                 28"),
            std::string::npos)
      << summary;
  json flat = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "flat"},
        {"layers",
         {{{"class_name", "Dense"},
           {"config",
            {{"name", "bb_d"}, {"units", 4}, {"activation", "tanh"}, {"input_shape", {6}}}}},
          {{"class_name", "Dense"}, {"config", dense_config("top", 2, "linear")}}}}}}};
  auto reference = Model::from_config(flat, "model", 2);
  expect_same_arithmetic(*reference, *nested);
  CheckpointData data;
  nested->save_weights(data);
  ASSERT_EQ(data.layers.size(), 2u);
  EXPECT_EQ(data.layers[0].layer, "backbone");
  EXPECT_EQ(data.layers[0].weights[0].name, "bb_d/kernel");
}

TEST(NestedModels, LoadsKerasThreesNestedGroups) {
  // Keras 3 keeps a nested model's layers under its group: /layers/functional/layers/dense/vars
  // (a group per class and place, the Functional model's InputLayers counted, a Sequential
  // model's not).
  auto model = Model::from_config(siamese_keras3(), "model", 1);
  CheckpointData data;
  data.layout = WeightsLayout::keras3;
  const auto params = model->parameters();  // enc_d1 k b, enc_d2 k b, head_d1 k b, head_out k b
  std::vector<Tensor> values;
  for (Parameter* p : params)
    values.push_back(test::random_tensor(p->value.shape(), 40 + values.size()));
  data.layers = {{"input_layer", {}},
                 {"input_layer_1", {}},
                 {"functional",
                  {{"layers/dense/0", values[0]},
                   {"layers/dense/1", values[1]},
                   {"layers/dense_1/0", values[2]},
                   {"layers/dense_1/1", values[3]}}},
                 {"concatenate", {}},
                 {"sequential",
                  {{"layers/dense/0", values[4]},
                   {"layers/dense/1", values[5]},
                   {"layers/dense_1/0", values[6]},
                   {"layers/dense_1/1", values[7]}}}};
  EXPECT_EQ(model->load_weights(data, "w.weights.h5"), "");
  for (std::size_t j = 0; j < params.size(); ++j) EXPECT_EQ(params[j]->value[1], values[j][1]) << j;

  data.layers[2].weights.pop_back();
  try {
    model->load_weights(data, "w.weights.h5");
    FAIL() << "a missing weight loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("w.weights.h5: /layers/functional has no "
                                         "layers/dense_1/vars/1, which layer 'enc_d2' (Dense, 2 "
                                         "weights) needs"),
              std::string::npos)
        << e.what();
  }
}

TEST(NestedModels, WhatCannotRunIsRefusedAtItsPlace) {
  json clash = siamese_keras2();
  clash["config"]["layers"][4]["config"]["layers"][1]["config"]["name"] = "enc_d1";
  EXPECT_NE(error_of(clash).find("'model.config.layers[4].config.layers[1].name': layer 'enc_d1' "
                                 "has the name of the layer at model.config.layers[2].config."
                                 "layers[1]: Tandem's layers need names unique in the whole "
                                 "model"),
            std::string::npos)
      << error_of(clash);

  json two_args = siamese_keras2();
  two_args["config"]["layers"][2]["inbound_nodes"][0].push_back(ref("right", 0));
  EXPECT_NE(error_of(two_args).find("'model.config.layers[2].inbound_nodes[0]': model 'encoder' "
                                    "has 1 input, but this call passes 2"),
            std::string::npos)
      << error_of(two_args);

  json second_output = siamese_keras2();
  second_output["config"]["layers"][3]["inbound_nodes"][0][1][2] = 1;
  EXPECT_NE(error_of(second_output).find("takes output 1 of model 'encoder', which has 1 output"),
            std::string::npos)
      << error_of(second_output);

  json output_two = siamese_keras2();  // the model's output: the encoder's second, which it lacks
  auto& layers = output_two["config"]["layers"];
  layers.erase(layers.begin() + 3, layers.end());  // concat and head
  output_two["config"]["output_layers"] = {{"encoder", 1, 1}, {"encoder", 2, 0}};
  EXPECT_NE(error_of(output_two)
                .find("'model.config.output_layers[0]': takes output 1 of model "
                      "'encoder', which has 1 output"),
            std::string::npos)
      << error_of(output_two);

  json node_zero = siamese_keras2();
  node_zero["config"]["layers"][3]["inbound_nodes"][0][0][1] = 0;
  EXPECT_NE(error_of(node_zero).find("'model.config.layers[3].inbound_nodes[0]': names node 0 of "
                                     "'encoder', a nested model whose calls Keras numbers from 1"),
            std::string::npos)
      << error_of(node_zero);

  json wrong_shape = siamese_keras2();
  wrong_shape["config"]["layers"][4]["config"]["layers"][0]["config"]["batch_input_shape"] = {
      nullptr, 15};
  EXPECT_NE(error_of(wrong_shape)
                .find("'model.config.layers[4].inbound_nodes[0]': passes model 'head' a tensor of "
                      "shape (16,) where its InputLayer (model.config.layers[4].config.layers[0]) "
                      "takes (15,)"),
            std::string::npos)
      << error_of(wrong_shape);

  json unused = siamese_keras2();  // the encoder gives a second output nothing reads
  unused["config"]["layers"][2]["config"]["layers"].push_back(
      dense_entry("enc_extra", 2, "linear", {{ref("enc_d1", 0)}}));
  unused["config"]["layers"][2]["config"]["output_layers"].push_back({"enc_extra", 0, 0});
  EXPECT_NE(error_of(unused).find("layer 'enc_extra' of the nested model 'encoder' computes an "
                                  "output of 'encoder' that leads to no output of this model"),
            std::string::npos)
      << error_of(unused);

  json no_layers = siamese_keras2();
  no_layers["config"]["layers"][4]["config"].erase("layers");
  EXPECT_NE(error_of(no_layers).find("model.config.layers[4].config.layers"), std::string::npos)
      << error_of(no_layers);

  json unknown_key = siamese_keras2();
  unknown_key["config"]["layers"][2]["config"]["colour"] = "blue";
  EXPECT_NE(error_of(unknown_key).find("model.config.layers[2].config.colour"), std::string::npos)
      << error_of(unknown_key);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
