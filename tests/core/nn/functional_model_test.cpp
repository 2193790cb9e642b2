// Functional models (Model over a Keras functional config): the graph runs as the layers'
// arithmetic says (checked by hand-written double-precision references and finite differences),
// both Keras forms read the same, and what Tandem cannot run is refused at its JSON path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradient_check.hpp"
#include "nn/elementwise_merge.hpp"
#include "nn/objective.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Keras 2.15's to_json() of
//   x = Input((4,)); h = Dense(4, "tanh")(x); s = Add()([h, x]); c = Concatenate()([s, h])
//   y = Dense(2)(c)
json keras2_model() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "model", "trainable": true,
    "layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "dtype": "float32",
       "sparse": false, "ragged": false, "name": "input_1"}, "name": "input_1", "inbound_nodes": []},
      {"class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": "float32",
       "units": 4, "activation": "tanh", "use_bias": true,
       "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
       "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null,
       "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
       "bias_constraint": null}, "name": "dense", "inbound_nodes": [[["input_1", 0, 0, {}]]]},
      {"class_name": "Add", "config": {"name": "add", "trainable": true, "dtype": "float32"},
       "name": "add", "inbound_nodes": [[["dense", 0, 0, {}], ["input_1", 0, 0, {}]]]},
      {"class_name": "Concatenate", "config": {"name": "concatenate", "trainable": true,
       "dtype": "float32", "axis": -1}, "name": "concatenate",
       "inbound_nodes": [[["add", 0, 0, {}], ["dense", 0, 0, {}]]]},
      {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "dtype": "float32",
       "units": 2, "activation": "linear", "use_bias": true}, "name": "dense_1",
       "inbound_nodes": [[["concatenate", 0, 0, {}]]]}],
    "input_layers": [["input_1", 0, 0]], "output_layers": [["dense_1", 0, 0]]},
    "keras_version": "2.15.0", "backend": "tensorflow"})");
}

// The same model as Keras 3's to_json() writes it.
json keras3_model() {
  const auto tensor = [](const char* n) {
    return json{
        {"class_name", "__keras_tensor__"},
        {"config", {{"shape", {nullptr, 4}}, {"dtype", "float32"}, {"keras_history", {n, 0, 0}}}}};
  };
  const auto call = [](json arg) {
    return json::array({{{"args", {arg}}, {"kwargs", json::object()}}});
  };
  json layers = json::array();
  layers.push_back({{"module", "keras.layers"},
                    {"class_name", "InputLayer"},
                    {"config",
                     {{"batch_shape", {nullptr, 4}},
                      {"dtype", "float32"},
                      {"sparse", false},
                      {"name", "input_layer"}}},
                    {"registered_name", nullptr},
                    {"name", "input_layer"},
                    {"inbound_nodes", json::array()}});
  layers.push_back(
      {{"module", "keras.layers"},
       {"class_name", "Dense"},
       {"config",
        {{"name", "dense"},
         {"trainable", true},
         {"dtype",
          {{"module", "keras"}, {"class_name", "DTypePolicy"}, {"config", {{"name", "float32"}}}}},
         {"units", 4},
         {"activation", "tanh"},
         {"use_bias", true}}},
       {"name", "dense"},
       {"inbound_nodes", call(tensor("input_layer"))}});
  layers.push_back(
      {{"class_name", "Add"},
       {"config", {{"name", "add"}, {"trainable", true}}},
       {"name", "add"},
       {"inbound_nodes", call(json::array({tensor("dense"), tensor("input_layer")}))}});
  layers.push_back({{"class_name", "Concatenate"},
                    {"config", {{"name", "concatenate"}, {"axis", -1}}},
                    {"name", "concatenate"},
                    {"inbound_nodes", call(json::array({tensor("add"), tensor("dense")}))}});
  layers.push_back({{"class_name", "Dense"},
                    {"config", {{"name", "dense_1"}, {"units", 2}}},
                    {"name", "dense_1"},
                    {"inbound_nodes", call(tensor("concatenate"))}});
  return {{"module", "keras"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "functional"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {"input_layer", 0, 0}},
            {"output_layers", {"dense_1", 0, 0}}}},
          {"registered_name", "Functional"}};
}

// The model's function in double precision from its weights: kernel (in, out) row-major.
std::vector<double> reference(Model& m, const std::vector<double>& x, std::int64_t batch) {
  auto p = m.parameters();  // dense/kernel, dense/bias, dense_1/kernel, dense_1/bias
  const auto w = [&](int i, std::int64_t k) { return static_cast<double>(p[i]->value[k]); };
  std::vector<double> y(static_cast<std::size_t>(batch * 2));
  for (std::int64_t b = 0; b < batch; ++b) {
    double h[4], c[8];
    for (int j = 0; j < 4; ++j) {
      double z = w(1, j);
      for (int i = 0; i < 4; ++i) z += x[static_cast<std::size_t>(b * 4 + i)] * w(0, i * 4 + j);
      h[j] = std::tanh(z);
    }
    for (int j = 0; j < 4; ++j) c[j] = h[j] + x[static_cast<std::size_t>(b * 4 + j)];
    for (int j = 0; j < 4; ++j) c[4 + j] = h[j];
    for (int k = 0; k < 2; ++k) {
      double z = w(3, k);
      for (int j = 0; j < 8; ++j) z += c[j] * w(2, j * 2 + k);
      y[static_cast<std::size_t>(b * 2 + k)] = z;
    }
  }
  return y;
}

TEST(FunctionalModel, Keras2ToJsonRunsAsItsLayersSay) {
  auto m = Model::from_config(keras2_model(), "model", 3);
  EXPECT_TRUE(m->functional());
  EXPECT_EQ(m->layer_count(), 4u);
  EXPECT_EQ(m->output_shape(), (Shape{2}));
  EXPECT_EQ(m->call_count(), 4u);
  EXPECT_EQ(m->call_inputs(1), (std::vector<int>{0, Model::kModelInput}));
  const Tensor x = test::random_tensor({5, 4}, 11);
  const Tensor& y = m->forward(x, false);
  test::expect_close(test::to_double(y), reference(*m, test::to_double(x), 5), 1e-5, 1e-6,
                     "outputs");
}

TEST(FunctionalModel, GradientsIncludeEveryPathAnInputTakes) {
  // The input reaches the output through the Dense, the Add's skip and the Concatenate: its
  // gradient (here, the first Dense kernel's, which sees all three) sums over the paths.
  auto m = Model::from_config(keras2_model(), "model", 3);
  const Tensor x = test::random_tensor({3, 4}, 12);
  const Tensor dy = test::random_tensor({3, 2}, 13);
  m->forward(x, true);
  m->backward(dy);
  for (std::size_t p = 0; p < 4; ++p) {
    Parameter& param = *m->parameters()[p];
    const std::vector<double> analytic = test::to_double(param.grad);
    const std::vector<double> numeric = test::numeric_gradient(
        [&](const std::vector<double>& v) {
          const Tensor saved = param.value.clone();
          for (std::size_t k = 0; k < v.size(); ++k)
            param.value[static_cast<std::int64_t>(k)] = static_cast<float>(v[k]);
          std::vector<double> y = reference(*m, test::to_double(x), 3);
          param.value.copy_from(saved);
          double loss = 0;
          for (std::size_t k = 0; k < y.size(); ++k)
            loss += y[k] * dy[static_cast<std::int64_t>(k)];
          return loss;
        },
        test::to_double(param.value), 1e-3);
    test::expect_close(analytic, numeric, 1e-3, 1e-4, m->parameter_names()[p]);
  }
}

TEST(FunctionalModel, Keras3FormReadsAsKeras2FormAndConfigRoundTrips) {
  auto two = Model::from_config(keras2_model(), "model", 3);
  auto three = Model::from_config(keras3_model(), "model", 4);
  ASSERT_EQ(three->layer_count(), 4u);
  three->copy_weights_from(*two);
  const Tensor x = test::random_tensor({6, 4}, 14);
  const std::vector<double> a = test::to_double(two->forward(x, false));
  const std::vector<double> b = test::to_double(three->forward(x, false));
  EXPECT_EQ(a, b);
  // What config() writes (Keras 2's form) builds the same model again.
  auto again = Model::from_config(three->config(), "model", 5);
  again->copy_weights_from(*two);
  EXPECT_EQ(test::to_double(again->forward(x, false)), a);
  EXPECT_EQ(three->config()["class_name"], "Functional");
  EXPECT_EQ(three->config()["config"]["layers"][2]["inbound_nodes"],
            json::parse(R"([[["dense", 0, 0, {}], ["input_layer", 0, 0, {}]]])"));
}

// Keras 3 writes input_layers and output_layers as dicts for a model built on dicts: read in
// key order (Keras' tree order), the same model; a key that is not its layer's name is refused,
// since Tandem names inputs and outputs by their layers.
TEST(FunctionalModel, Keras3DictEndpointsReadByKeyAndKeysNameTheirLayers) {
  auto listed = Model::from_config(keras3_model(), "model", 4);
  json dicts = keras3_model();
  dicts["config"]["input_layers"] = {{"input_layer", {"input_layer", 0, 0}}};
  dicts["config"]["output_layers"] = {{"dense_1", {"dense_1", 0, 0}}};
  auto keyed = Model::from_config(dicts, "model", 4);
  keyed->copy_weights_from(*listed);
  const Tensor x = test::random_tensor({3, 4}, 15);
  EXPECT_EQ(test::to_double(keyed->forward(x, false)), test::to_double(listed->forward(x, false)));
  dicts["config"]["output_layers"] = {{"logits", {"dense_1", 0, 0}}};
  try {
    Model::from_config(dicts, "model", 4);
    ADD_FAILURE() << "a key naming another layer was taken";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "model.config.output_layers.logits");
    EXPECT_NE(std::string(e.what()).find("the key 'logits' names the layer 'dense_1'"),
              std::string::npos)
        << e.what();
  }
}

TEST(FunctionalModel, SummaryHasKerasConnectedToColumn) {
  auto m = Model::from_config(keras2_model(), "model", 3);
  const std::string s = m->summary();
  EXPECT_NE(s.find("Connected to"), std::string::npos) << s;
  // Keras 2 shows an InputLayer's output as the list it is there; Keras 3 as a shape.
  EXPECT_NE(s.find(" input_1 (InputLayer)        [(None, 4)]               0         []"),
            std::string::npos)
      << s;
  const std::string three = Model::from_config(keras3_model(), "model", 3)->summary();
  EXPECT_NE(three.find(" input_layer (InputLayer)    (None, 4)                 0         []"),
            std::string::npos)
      << three;
  EXPECT_NE(s.find(" add (Add)                   (None, 4)                 0         "
                   "['dense[0][0]',\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("'input_1[0][0]']\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 38"), std::string::npos) << s;  // 4*4+4 + 8*2+2
}

// A shared layer: h1 = d(x), h2 = d(h1) with the same Dense d, y = out(h1 + h2).
json shared_model() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "shared", "layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 4]},
       "inbound_nodes": []},
      {"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 4, "activation": "tanh"},
       "inbound_nodes": [[["x", 0, 0, {}]], [["d", 0, 0, {}]]]},
      {"class_name": "Add", "name": "add", "config": {"name": "add"},
       "inbound_nodes": [[["d", 0, 0, {}], ["d", 1, 0, {}]]]},
      {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 2},
       "inbound_nodes": [[["add", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}})");
}

std::vector<double> shared_reference(Model& m, const std::vector<double>& x, std::int64_t batch) {
  auto p = m.parameters();  // d/kernel, d/bias, out/kernel, out/bias
  const auto w = [&](int i, std::int64_t k) { return static_cast<double>(p[i]->value[k]); };
  std::vector<double> y(static_cast<std::size_t>(batch * 2));
  for (std::int64_t b = 0; b < batch; ++b) {
    double h1[4], h2[4];
    for (int j = 0; j < 4; ++j) {
      double z = w(1, j);
      for (int i = 0; i < 4; ++i) z += x[static_cast<std::size_t>(b * 4 + i)] * w(0, i * 4 + j);
      h1[j] = std::tanh(z);
    }
    for (int j = 0; j < 4; ++j) {
      double z = w(1, j);
      for (int i = 0; i < 4; ++i) z += h1[i] * w(0, i * 4 + j);
      h2[j] = std::tanh(z);
    }
    for (int k = 0; k < 2; ++k) {
      double z = w(3, k);
      for (int j = 0; j < 4; ++j) z += (h1[j] + h2[j]) * w(2, j * 2 + k);
      y[static_cast<std::size_t>(b * 2 + k)] = z;
    }
  }
  return y;
}

// Both calls of a shared layer as outputs: named as tf.keras names them (d, d_1), so that each
// has its own loss and logs (one used to hide the other's: both were 'd').
TEST(FunctionalModel, TheOutputsOfOneLayerAreNamedAsKerasNamesThem) {
  json config = shared_model();
  config["config"]["output_layers"] = json::parse(R"([["d", 0, 0], ["d", 1, 0], ["out", 0, 0]])");
  auto m = Model::from_config(config, "model", 7);
  ASSERT_EQ(m->output_count(), 3u);
  EXPECT_EQ(m->output_name(0), "d");
  EXPECT_EQ(m->output_name(1), "d_1");
  EXPECT_EQ(m->output_name(2), "out");
  const Objective objective =
      make_objective(json::parse(R"({"d": "mse", "d_1": "mae", "out": "mse"})"), json(),
                     json::array(), *m);
  const std::vector<std::string> names = objective.metric_names();
  for (const char* loss : {"d_loss", "d_1_loss", "out_loss"})
    EXPECT_NE(std::find(names.begin(), names.end(), loss), names.end()) << loss;
}

TEST(FunctionalModel, ASharedLayerHasOneSetOfWeightsAndSumsItsCallsGradients) {
  auto m = Model::from_config(shared_model(), "model", 7);
  EXPECT_EQ(m->layer_count(), 3u);
  EXPECT_EQ(m->call_count(), 4u);
  EXPECT_EQ(m->count_params(), 4 * 4 + 4 + 4 * 2 + 2);  // d counted once
  const Tensor x = test::random_tensor({3, 4}, 15);
  test::expect_close(test::to_double(m->forward(x, true)), shared_reference(*m, test::to_double(x), 3),
                     1e-5, 1e-6, "outputs");
  const Tensor dy = test::random_tensor({3, 2}, 16);
  m->backward(dy);
  for (std::size_t p = 0; p < 4; ++p) {
    Parameter& param = *m->parameters()[p];
    const std::vector<double> numeric = test::numeric_gradient(
        [&](const std::vector<double>& v) {
          const Tensor saved = param.value.clone();
          for (std::size_t k = 0; k < v.size(); ++k)
            param.value[static_cast<std::int64_t>(k)] = static_cast<float>(v[k]);
          const std::vector<double> y = shared_reference(*m, test::to_double(x), 3);
          param.value.copy_from(saved);
          double loss = 0;
          for (std::size_t k = 0; k < y.size(); ++k) loss += y[k] * dy[static_cast<std::int64_t>(k)];
          return loss;
        },
        test::to_double(param.value), 1e-3);
    test::expect_close(test::to_double(param.grad), numeric, 1e-3, 1e-4, m->parameter_names()[p]);
  }
  // Keras' form of the calls survives config(): d has two inbound nodes, add reads d's call 1.
  const json c = m->config();
  EXPECT_EQ(c["config"]["layers"][1]["inbound_nodes"].size(), 2u);
  EXPECT_EQ(c["config"]["layers"][2]["inbound_nodes"],
            json::parse(R"([[["d", 0, 0, {}], ["d", 1, 0, {}]]])"));
  auto again = Model::from_config(c, "model", 8);
  again->copy_weights_from(*m);
  EXPECT_EQ(test::to_double(again->forward(x, false)), test::to_double(m->forward(x, false)));
  const std::string s = m->summary();
  EXPECT_NE(s.find("['x[0][0]',"), std::string::npos) << s;
  EXPECT_NE(s.find("'d[0][0]']"), std::string::npos) << s;
}

std::string error_of(const json& model) {
  return test::model_config_error(model);
}

TEST(FunctionalModel, WhatCannotRunIsRefusedAtItsPath) {
  json unknown = keras2_model();
  unknown["config"]["layers"][2]["inbound_nodes"][0][1][0] = "dense_9";
  EXPECT_NE(error_of(unknown).find("model.config.layers[2].inbound_nodes[0]"), std::string::npos)
      << error_of(unknown);
  EXPECT_NE(error_of(unknown).find("'dense_9', which is not a layer"), std::string::npos);

  // An InputLayer named with a node it does not have: the node is the fault, not the name.
  json input_node = keras2_model();
  input_node["config"]["input_layers"][0][1] = 1;
  EXPECT_NE(error_of(input_node)
                .find("at 'model.config.input_layers[0]': names node 1 of the "
                      "InputLayer 'input_1', which has one node"),
            std::string::npos)
      << error_of(input_node);
  input_node["config"]["input_layers"][0] = {"dense", 0, 0};
  EXPECT_NE(error_of(input_node).find("names 'dense', which is no InputLayer of the model"),
            std::string::npos)
      << error_of(input_node);

  // Keras 2's and Keras 3's shape keys both given: they must agree.
  json both_shapes = keras2_model();
  both_shapes["config"]["layers"][0]["config"]["batch_shape"] = {nullptr, 4};
  EXPECT_EQ(error_of(both_shapes), "(no error)");
  both_shapes["config"]["layers"][0]["config"]["batch_shape"] = {nullptr, 5};
  EXPECT_NE(error_of(both_shapes)
                .find("at 'model.config.layers[0].config.batch_shape': gives the "
                      "input shape (5,), but batch_input_shape gives (4,)"),
            std::string::npos)
      << error_of(both_shapes);

  json cycle = keras2_model();
  cycle["config"]["layers"][1]["inbound_nodes"][0][0][0] = "concatenate";
  EXPECT_NE(error_of(cycle).find("depends on itself"), std::string::npos) << error_of(cycle);

  json shared_dropout = json::parse(R"({"class_name": "Functional", "config": {"layers": [
      {"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 4]}},
      {"class_name": "Dropout", "name": "drop", "config": {"name": "drop", "rate": 0.5},
       "inbound_nodes": [[["x", 0, 0, {}]], [["drop", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["drop", 1, 0]]}})");
  EXPECT_NE(error_of(shared_dropout).find("model.config.layers[1].inbound_nodes[1]': layer 'drop' "
                                          "(Dropout) draws random numbers"),
            std::string::npos)
      << error_of(shared_dropout);

  json no_such_call = keras2_model();
  no_such_call["config"]["layers"][2]["inbound_nodes"][0][0][1] = 1;  // dense has one call
  EXPECT_NE(error_of(no_such_call).find("takes call 1 of 'dense', which is called 1 time"),
            std::string::npos)
      << error_of(no_such_call);

  // A layer entry of class Sequential is a nested model: its config must be a model's.
  json nested = keras2_model();
  nested["config"]["layers"][1]["class_name"] = "Sequential";
  EXPECT_NE(error_of(nested).find("'model.config.layers[1].config.layers'"), std::string::npos)
      << error_of(nested);
  json lambda = keras2_model();
  lambda["config"]["layers"][1]["class_name"] = "Lambda";
  EXPECT_NE(error_of(lambda).find("layer 'dense' is a Lambda: Python code"), std::string::npos)
      << error_of(lambda);
  // tf.keras 2's tf.boolean_mask on a Keras tensor (a SlicingOpLambda, NumPy's advanced
  // indexing) and Keras 3's keras.ops.split (an entry of class Split, of module
  // keras.src.ops.numpy): refused naming the function, not read as a layer.
  json slice = keras2_model();
  slice["config"]["layers"][1] = json::parse(R"({"class_name": "SlicingOpLambda",
      "config": {"name": "tf.boolean_mask", "trainable": true, "dtype": "float32",
                 "function": "boolean_mask"},
      "name": "tf.boolean_mask",
      "inbound_nodes": [["input_1", 0, 0, {"mask": [true, false]}]]})");
  EXPECT_EQ(error_of(slice),
            "config error at 'model.config.layers[1].config.function': layer 'tf.boolean_mask' "
            "(tf.boolean_mask) is a function called on a Keras tensor that Tandem has no layer "
            "for; write it with the Keras layer that computes it (docs/config.md, functions "
            "called on Keras tensors)");
  json op = keras2_model();
  op["config"]["layers"][1]["class_name"] = "Split";
  op["config"]["layers"][1]["module"] = "keras.src.ops.numpy";
  EXPECT_NE(error_of(op).find("'model.config.layers[1].class_name': layer 'dense' is Keras' "
                              "operation keras.src.ops.numpy.Split called on a Keras tensor, not "
                              "a layer, which Tandem does not run; write it with the Keras layer"),
            std::string::npos)
      << error_of(op);

  json no_such_input = keras2_model();
  no_such_input["config"]["input_layers"].push_back({"input_2", 0, 0});
  EXPECT_NE(error_of(no_such_input)
                .find("at 'model.config.input_layers[1]': names 'input_2', which is no InputLayer"),
            std::string::npos)
      << error_of(no_such_input);

  json twice = keras2_model();
  twice["config"]["output_layers"].push_back(twice["config"]["output_layers"][0]);
  EXPECT_NE(error_of(twice).find("at 'model.config.output_layers[1]': names 'dense_1' a second "
                                 "time"),
            std::string::npos)
      << error_of(twice);

  json dead = keras2_model();
  dead["config"]["output_layers"] = json::parse(R"([["concatenate", 0, 0]])");
  EXPECT_NE(error_of(dead).find("at 'model.config.layers[4]': layer 'dense_1' does not lead to an "
                                "output of the model"),
            std::string::npos)
      << error_of(dead);

  json mismatch = keras2_model();
  mismatch["config"]["layers"][1]["config"]["units"] = 3;  // Add of (3) and (4)
  EXPECT_NE(error_of(mismatch).find("at 'model.config.layers[2]': layer 'add' (Add) merges inputs of one "
                                    "shape, got (None, 3) and (None, 4)"),
            std::string::npos)
      << error_of(mismatch);

  json dense_on_two = keras2_model();
  dense_on_two["config"]["layers"][4]["inbound_nodes"] =
      json::parse(R"([[["add", 0, 0, {}], ["concatenate", 0, 0, {}]]])");
  EXPECT_NE(error_of(dense_on_two)
                .find("layer 'dense_1' (Dense) takes one input, but is called "
                      "on 2"),
            std::string::npos)
      << error_of(dense_on_two);

  // Keras 2 writes a call's keyword arguments beside each of its tensors, alike; a later
  // tensor's that differ were dropped unsaid (Keras 2 reads the last's).
  json later_kwargs = keras2_model();
  later_kwargs["config"]["layers"][2]["inbound_nodes"][0][1][3] = {{"foo", 1}};
  EXPECT_NE(error_of(later_kwargs)
                .find("at 'model.config.layers[2].inbound_nodes[0][1]': the call's keyword "
                      "arguments {\"foo\":1} differ from those beside its first tensor, {}"),
            std::string::npos)
      << error_of(later_kwargs);

  json called_input = keras2_model();
  called_input["config"]["layers"][0]["inbound_nodes"] = json::parse(R"([[["dense", 0, 0, {}]]])");
  EXPECT_NE(error_of(called_input)
                .find("at 'model.config.layers[0].inbound_nodes': InputLayer 'input_1' is called "
                      "on nothing"),
            std::string::npos)
      << error_of(called_input);

  json bad_axis = keras2_model();
  bad_axis["config"]["layers"][3]["config"]["axis"] = 0;
  EXPECT_NE(error_of(bad_axis).find("model.config.layers[3].config.axis"), std::string::npos)
      << error_of(bad_axis);

  const json add_in_sequential = json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"units": 2, "input_shape": [3]}},
      {"class_name": "Add", "config": {}}]}})");
  EXPECT_NE(error_of(add_in_sequential)
                .find("at 'model.config.layers[1]': layer 'add' (Add) merges "
                      "several inputs"),
            std::string::npos)
      << error_of(add_in_sequential);
}

// Self-attention as Keras 2.15's to_json() writes it: the value (and the option) in the first
// reference's kwargs,
//   x = Input((3, 4)); a = MultiHeadAttention(2, 2)(x, x, use_causal_mask=True)
//   n = LayerNormalization()(Add()([a, x])); y = GlobalAveragePooling1D()(n)
json keras2_attention_model() {
  return json::parse(R"({"class_name": "Functional", "config": {"name": "model", "layers": [
      {"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
       "config": {"batch_input_shape": [null, 3, 4], "dtype": "float32", "name": "x"}},
      {"class_name": "MultiHeadAttention", "name": "mha", "config": {"name": "mha",
       "trainable": true, "dtype": "float32", "num_heads": 2, "key_dim": 2, "value_dim": 2,
       "dropout": 0.0, "use_bias": true, "output_shape": null, "attention_axes": [1],
       "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
       "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null,
       "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
       "bias_constraint": null, "query_shape": [null, 3, 4], "key_shape": [null, 3, 4],
       "value_shape": [null, 3, 4]},
       "inbound_nodes": [[["x", 0, 0, {"value": ["x", 0, 0], "use_causal_mask": true}]]]},
      {"class_name": "Add", "name": "add", "config": {"name": "add"},
       "inbound_nodes": [[["mha", 0, 0, {}], ["x", 0, 0, {}]]]},
      {"class_name": "LayerNormalization", "name": "norm", "config": {"name": "norm",
       "axis": [2], "epsilon": 0.001, "center": true, "scale": true,
       "beta_initializer": {"class_name": "Zeros", "config": {}},
       "gamma_initializer": {"class_name": "Ones", "config": {}}, "beta_regularizer": null,
       "gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null},
       "inbound_nodes": [[["add", 0, 0, {}]]]},
      {"class_name": "GlobalAveragePooling1D", "name": "pool", "config": {"name": "pool",
       "data_format": "channels_last", "keepdims": false},
       "inbound_nodes": [[["norm", 0, 0, {}]]]}],
      "input_layers": [["x", 0, 0]], "output_layers": [["pool", 0, 0]]},
      "keras_version": "2.15.0", "backend": "tensorflow"})");
}

// The same in Keras 3's form: the value as the second positional argument, the option a kwarg.
json keras3_attention_model() {
  json m = keras2_attention_model();
  const auto tensor = [](const char* n) {
    return json{{"class_name", "__keras_tensor__"}, {"config", {{"keras_history", {n, 0, 0}}}}};
  };
  json& layers = m["config"]["layers"];
  layers[1]["inbound_nodes"] = json::array(
      {{{"args", {tensor("x"), tensor("x")}}, {"kwargs", {{"use_causal_mask", true}}}}});
  layers[2]["inbound_nodes"] =
      json::array({{{"args", {json::array({tensor("mha"), tensor("x")})}}, {"kwargs", json::object()}}});
  layers[3]["inbound_nodes"] = json::array({{{"args", {tensor("add")}}}});
  layers[4]["inbound_nodes"] = json::array({{{"args", {tensor("norm")}}}});
  return m;
}

TEST(FunctionalModel, AttentionCallArgumentsReadInBothFormsAndRoundTrip) {
  auto k2 = Model::from_config(keras2_attention_model(), "model", 5);
  auto k3 = Model::from_config(keras3_attention_model(), "model", 5);
  EXPECT_EQ(k2->output_shape(), (Shape{4}));
  EXPECT_EQ(k2->call_inputs(0), (std::vector<int>{Model::kModelInput, Model::kModelInput}));
  const Tensor x = test::random_tensor({6, 3, 4}, 12);
  const Tensor y2 = k2->forward(x, false).clone();
  const Tensor y3 = k3->forward(x, false).clone();
  EXPECT_EQ(test::to_double(y2), test::to_double(y3));
  // The config Tandem writes carries the call's arguments in Keras 2's form, and reads back.
  const json written = k2->config();
  EXPECT_EQ(written["config"]["layers"][1]["inbound_nodes"],
            json::parse(R"([[["x", 0, 0, {"value": ["x", 0, 0], "use_causal_mask": true}]]])"));
  // Keras 3, called with keywords only: mha(query=x, value=x, use_causal_mask=True).
  json keywords = keras3_attention_model();
  json& node = keywords["config"]["layers"][1]["inbound_nodes"][0];
  node["kwargs"]["query"] = node["args"][0];
  node["kwargs"]["value"] = node["args"][1];
  node["args"] = json::array();
  EXPECT_EQ(test::to_double(Model::from_config(keywords, "model", 5)->forward(x, false)),
            test::to_double(y2));
  auto again = Model::from_config(written, "model", 5);
  EXPECT_EQ(test::to_double(again->forward(x, false)), test::to_double(y2));
  // The option is in force: without the causal mask the same weights give other outputs.
  json open_config = keras2_attention_model();
  open_config["config"]["layers"][1]["inbound_nodes"][0][0][3].erase("use_causal_mask");
  auto open = Model::from_config(open_config, "model", 5);
  EXPECT_NE(test::to_double(open->forward(x, false)), test::to_double(y2));
  // attention_axes names the time axis however Keras lets it be written; another is refused.
  for (const json& time_axis : {json(1), json(-2), json::array({-2}), json(nullptr)}) {
    json same = keras2_attention_model();
    same["config"]["layers"][1]["config"]["attention_axes"] = time_axis;
    EXPECT_EQ(test::to_double(Model::from_config(same, "model", 5)->forward(x, false)),
              test::to_double(y2))
        << time_axis;
  }
  for (const json& other : {json(2), json::array({1, 2}), json::array({0}), json("time")}) {
    json refused = keras2_attention_model();
    refused["config"]["layers"][1]["config"]["attention_axes"] = other;
    EXPECT_NE(error_of(refused).find("'model.config.layers[1].config.attention_axes': only "
                                     "attention over the time axis"),
              std::string::npos)
        << other << ": " << error_of(refused);
  }
}

// Keras 3 writes `"kwargs": {"training": false}` in each Dropout call (the call signature's
// default; its fit, evaluate and predict replace it): read as no argument, the model is the one
// without Dropout's kwargs. A training that is no boolean stays refused. (Keras 2's explicit
// training is the call's mode: KerasTwosExplicitTrainingIsTheCallsMode.)
TEST(FunctionalModel, Keras3sRecordedTrainingDefaultIsNoCallArgument) {
  json three = keras3_model();
  json& layers = three["config"]["layers"];
  json dropout = {{"class_name", "Dropout"},
                  {"config", {{"name", "drop"}, {"rate", 0.5}, {"seed", 3}}},
                  {"name", "drop"},
                  {"inbound_nodes", layers[4]["inbound_nodes"]}};
  dropout["inbound_nodes"][0]["kwargs"] = {{"training", false}};
  layers[4]["inbound_nodes"][0]["args"][0]["config"]["keras_history"] = {"drop", 0, 0};
  layers.insert(layers.begin() + 4, dropout);
  auto recorded = Model::from_config(three, "model", 4);
  layers[4]["inbound_nodes"][0]["kwargs"] = {{"training", true}};
  auto recorded_true = Model::from_config(three, "model", 4);
  layers[4]["inbound_nodes"][0]["kwargs"] = json::object();
  auto plain = Model::from_config(three, "model", 4);
  recorded->copy_weights_from(*plain);
  recorded_true->copy_weights_from(*plain);
  const Tensor x = test::random_tensor({6, 4}, 14);
  EXPECT_EQ(test::to_double(recorded->forward(x, false)),
            test::to_double(plain->forward(x, false)));
  EXPECT_EQ(test::to_double(recorded_true->forward(x, false)),
            test::to_double(plain->forward(x, false)));
  EXPECT_EQ(test::to_double(recorded->forward(x, true)), test::to_double(plain->forward(x, true)));
  layers[4]["inbound_nodes"][0]["kwargs"] = {{"training", "yes"}};
  EXPECT_NE(error_of(three).find("layer 'drop' (Dropout) takes no call arguments, got "
                                 "{\"training\":\"yes\"}"),
            std::string::npos)
      << error_of(three);
  json two = keras2_model();
  two["config"]["layers"][1]["inbound_nodes"][0][0][3] = {{"training", 1}};
  EXPECT_NE(error_of(two).find("takes no call arguments, got {\"training\":1}"), std::string::npos)
      << error_of(two);
}

// tf.keras 2 runs a call given `training` explicitly in that mode, whatever the model's:
// BatchNormalization(...)(x, training=False) normalises by its moving statistics and leaves them
// (its gamma and beta still train), Dropout(...)(x, training=True) drops at inference too (MC
// dropout). The config written back keeps the argument.
TEST(FunctionalModel, KerasTwosExplicitTrainingIsTheCallsMode) {
  json two = keras2_model();
  json& layers = two["config"]["layers"];
  // input_1 -> dense -> bn (training=False) -> drop (training=True) -> add ...
  json bn = {{"class_name", "BatchNormalization"},
             {"name", "bn"},
             {"config", {{"name", "bn"}, {"momentum", 0.5}}},
             {"inbound_nodes",
              json::array({json::array({json::array({"dense", 0, 0, {{"training", false}}})})})}};
  json drop = {{"class_name", "Dropout"},
               {"name", "drop"},
               {"config", {{"name", "drop"}, {"rate", 0.5}, {"seed", 3}}},
               {"inbound_nodes",
                json::array({json::array({json::array({"bn", 0, 0, {{"training", true}}})})})}};
  layers[2]["inbound_nodes"][0][0][0] = "drop";  // add reads drop instead of dense
  layers.insert(layers.begin() + 2, drop);
  layers.insert(layers.begin() + 2, bn);
  auto model = Model::from_config(two, "model", 4);
  const Tensor x = test::random_tensor({6, 4}, 14);
  const Parameter* moving_mean = nullptr;
  for (Parameter* p : model->layer(1).parameters())
    if (p->name == "moving_mean") moving_mean = p;
  ASSERT_NE(moving_mean, nullptr);
  const auto mean_before = test::to_double(moving_mean->value);
  model->forward(x, true);
  EXPECT_EQ(test::to_double(moving_mean->value), mean_before);  // inference mode: not moved
  // The Dropout's mask shows in training and inference alike: its output has zeros.
  const Tensor& dropout_out = *model->call_output(2);
  int zeros = 0;
  for (std::int64_t i = 0; i < dropout_out.size(); ++i) zeros += dropout_out[i] == 0.0f;
  EXPECT_GT(zeros, 0);
  model->forward(x, false);
  zeros = 0;
  for (std::int64_t i = 0; i < model->call_output(2)->size(); ++i)
    zeros += (*model->call_output(2))[i] == 0.0f;
  EXPECT_GT(zeros, 0);
  // gamma and beta train in inference mode.
  model->forward(x, true);
  model->backward(test::random_tensor({6, 2}, 15));
  double gamma_grad = 0;
  for (Parameter* p : model->layer(1).parameters())
    if (p->name == "gamma")
      for (std::int64_t i = 0; i < p->grad.size(); ++i) gamma_grad += std::fabs(p->grad[i]);
  EXPECT_GT(gamma_grad, 0.0);
  // The config written back keeps both arguments, and reads back the same.
  const json written = model->config();
  EXPECT_EQ(written["config"]["layers"][2]["inbound_nodes"][0][0][3], json({{"training", false}}))
      << written.dump();
  EXPECT_EQ(written["config"]["layers"][3]["inbound_nodes"][0][0][3], json({{"training", true}}))
      << written.dump();
  EXPECT_NO_THROW(Model::from_config(written, "model", 4));
}

TEST(FunctionalModel, CallArgumentsALayerDoesNotTakeAreRefusedAtTheirPath) {
  json dense_kwargs = keras2_model();
  dense_kwargs["config"]["layers"][1]["inbound_nodes"][0][0][3] = {{"value", {"input_1", 0, 0}}};
  EXPECT_NE(error_of(dense_kwargs).find("at 'model.config.layers[1].inbound_nodes[0]': layer "
                                        "'dense' (Dense) takes no call arguments, got the tensor "
                                        "'value'"),
            std::string::npos)
      << error_of(dense_kwargs);
  json scores = keras2_attention_model();
  scores["config"]["layers"][1]["inbound_nodes"][0][0][3]["return_attention_scores"] = true;
  EXPECT_NE(error_of(scores).find("return_attention_scores=true is not supported"),
            std::string::npos)
      << error_of(scores);
  json no_value = keras2_attention_model();
  no_value["config"]["layers"][1]["inbound_nodes"][0][0][3].erase("value");
  EXPECT_NE(error_of(no_value).find("needs a value tensor"), std::string::npos)
      << error_of(no_value);
  json positional = keras3_attention_model();
  positional["config"]["layers"][1]["inbound_nodes"][0]["args"].push_back(3);
  EXPECT_NE(error_of(positional).find("args[2]': a positional argument that is not a tensor"),
            std::string::npos)
      << error_of(positional);
}

// x -> a, b, c (Dense 4 each); Add of two (or all three) -> Activation(relu) -> Dense 3. The
// Add applies the relu that reads it (nn::ReluAbsorber); the same graph exporting the Add's
// output keeps them apart. Same weights and batch: the same outputs and gradients, to the bit.
json add_relu_model(int added, bool export_sum) {
  auto node = [](std::vector<std::string> from) {
    json inbound = json::array();
    for (const auto& n : from) inbound.push_back(json::array({n, 0, 0, json::object()}));
    return json::array({inbound});
  };
  auto entry = [](const std::string& cls, json cfg, json inbound) {
    const std::string name = cfg["name"];
    return json{{"class_name", cls}, {"config", cfg}, {"name", name}, {"inbound_nodes", inbound}};
  };
  json layers = json::array(
      {entry("InputLayer", {{"name", "x"}, {"batch_input_shape", {nullptr, 5}}}, json::array())});
  std::vector<std::string> terms{"a", "b", "c"};
  terms.resize(static_cast<std::size_t>(added));
  for (const auto& t : terms)
    layers.push_back(entry("Dense", {{"name", t}, {"units", 4}}, node({"x"})));
  layers.push_back(entry("Add", {{"name", "sum"}}, node(terms)));
  layers.push_back(entry("Activation", {{"name", "relu"}, {"activation", "relu"}}, node({"sum"})));
  layers.push_back(entry("Dense", {{"name", "out"}, {"units", 3}}, node({"relu"})));
  json outputs = json::array({json::array({"out", 0, 0})});
  if (export_sum) outputs.push_back(json::array({"sum", 0, 0}));
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", layers},
            {"input_layers", json::array({json::array({"x", 0, 0})})},
            {"output_layers", outputs}}}};
}

TEST(FunctionalModel, AnAddAppliesTheReluThatReadsItWithTheSameBits) {
  for (const int added : {2, 3}) {
    SCOPED_TRACE(std::to_string(added) + " inputs");
    auto fused = Model::from_config(add_relu_model(added, false), "model", 3);
    auto plain = Model::from_config(add_relu_model(added, true), "model", 3);
    const auto absorbs = [&](Model& m) {
      return dynamic_cast<nn::Add&>(m.layer(static_cast<std::size_t>(added))).absorbs_output_relu();
    };
    EXPECT_TRUE(absorbs(*fused));
    EXPECT_FALSE(absorbs(*plain));  // its output is the model's too
    auto fp = fused->parameters(), pp = plain->parameters();
    ASSERT_EQ(fp.size(), pp.size());
    for (std::size_t i = 0; i < fp.size(); ++i) pp[i]->value.copy_from(fp[i]->value);
    const Tensor x = test::random_tensor({6, 5}, 31);
    const Tensor g = test::random_tensor({6, 3}, 32);
    const Tensor yf = fused->forward_outputs(x, true)[0]->clone();
    const auto& plain_outputs = plain->forward_outputs(x, true);
    int cut = 0;
    for (float v : plain_outputs[1]->values()) cut += v <= 0.0f;
    EXPECT_GT(cut, 0) << "the relu cuts nothing: the mask goes unchecked";
    for (std::int64_t i = 0; i < yf.size(); ++i) ASSERT_EQ(yf[i], (*plain_outputs[0])[i]) << i;
    Tensor zeros(plain_outputs[1]->shape());
    zeros.fill(0.0f);
    fused->backward_outputs({&g}, [](std::size_t) {});
    plain->backward_outputs({&g, &zeros}, [](std::size_t) {});
    double norm = 0;
    for (std::size_t i = 0; i < fp.size(); ++i)
      for (std::int64_t k = 0; k < fp[i]->grad.size(); ++k) {
        ASSERT_EQ(fp[i]->grad[k], pp[i]->grad[k]) << fp[i]->name << " gradient [" << k << "]";
        norm += std::fabs(fp[i]->grad[k]);
      }
    EXPECT_GT(norm, 0);
  }
}

}  // namespace
}  // namespace tandem
