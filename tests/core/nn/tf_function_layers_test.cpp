// tf.keras 2's TensorFlow functions called on Keras tensors (TFOpLambda entries, as its
// to_json() writes them: the first argument in the node, the others as keyword arguments) read
// as the Keras layers that compute them (nn/tf_function_layers.hpp): each function's entry as
// the layer entry expected by hand; a model of them against its arithmetic written out by hand;
// the config written back; what has no layer refused at its path, naming the function.
#include "nn/tf_function_layers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "test_support.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// A TFOpLambda entry as tf.keras 2.15 writes it: `node` its one inbound node.
json function_entry(const std::string& function, json node) {
  const std::string name = "tf." + function;
  return {{"class_name", "TFOpLambda"},
          {"config",
           {{"name", name}, {"trainable", true}, {"dtype", "float32"}, {"function", function}}},
          {"name", name},
          {"inbound_nodes", json::array({std::move(node)})}};
}

// A call on the tensor `on` with keyword arguments: the node ["on", 0, 0, {args, "name": null}].
json on(const std::string& layer, json args = json::object()) {
  args["name"] = nullptr;
  return json::array({layer, 0, 0, args});
}

json ref(const std::string& layer) {
  return json::array({layer, 0, 0});
}

// The model x (batch, shape...) -> entries (in order, each named by its entry) -> output `out`.
json model_of(const json& shape, std::vector<json> entries, const std::string& out) {
  json batch_shape = json::array({nullptr});
  for (const json& d : shape) batch_shape.push_back(d);
  json layers = json::array({{{"class_name", "InputLayer"},
                              {"config", {{"batch_input_shape", batch_shape}, {"name", "x"}}},
                              {"name", "x"},
                              {"inbound_nodes", json::array()}}});
  for (json& e : entries) layers.push_back(std::move(e));
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", layers},
            {"input_layers", {ref("x")}},
            {"output_layers", {ref(out)}}}},
          {"keras_version", "2.15.0"}};
}

// The layer entry `function_entry(function, node)` becomes in a model of input `shape`.
json translated(const std::string& function, const json& node) {
  std::vector<std::string> kinds;
  const json model = tf_functions_as_layers(
      model_of({3}, {function_entry(function, node)}, "tf." + function), "model", kinds);
  EXPECT_EQ(kinds.size(), 1u);
  json entry = model["config"]["layers"][1];
  EXPECT_EQ(entry["name"], "tf." + function);
  EXPECT_EQ(entry["config"]["name"], "tf." + function);
  EXPECT_EQ(entry["config"]["dtype"], "float32");
  EXPECT_EQ(entry["config"]["trainable"], true);
  entry["config"].erase("name");
  entry["config"].erase("dtype");
  entry["config"].erase("trainable");
  entry.erase("name");
  return entry;
}

// {"class_name": cls, "config": config, "inbound_nodes": [[inputs with {}]]}.
json expected(const char* cls, json config, std::vector<std::string> inputs = {"x"}) {
  json node = json::array();
  for (const std::string& input : inputs)
    node.push_back(json::array({input, 0, 0, json::object()}));
  return {{"class_name", cls}, {"config", config}, {"inbound_nodes", json::array({node})}};
}

TEST(TfFunctionLayers, EachFunctionBecomesTheLayerThatComputesIt) {
  const json none = json::object();
  EXPECT_EQ(translated("__operators__.add", on("x", {{"y", ref("x")}})),
            expected("Add", none, {"x", "x"}));
  EXPECT_EQ(translated("math.subtract", on("x", {{"y", ref("x")}})),
            expected("Subtract", none, {"x", "x"}));
  EXPECT_EQ(translated("math.multiply", on("x", {{"y", ref("x")}})),
            expected("Multiply", none, {"x", "x"}));
  EXPECT_EQ(translated("math.maximum", on("x", {{"y", ref("x")}})),
            expected("Maximum", none, {"x", "x"}));
  EXPECT_EQ(translated("__operators__.add", on("x", {{"y", 2.5}})),
            expected("Rescaling", {{"scale", 1.0}, {"offset", 2.5}}));
  EXPECT_EQ(translated("math.subtract", on("x", {{"y", 2.5}})),
            expected("Rescaling", {{"scale", 1.0}, {"offset", -2.5}}));
  EXPECT_EQ(translated("math.multiply", on("x", {{"y", 0.5}})),
            expected("Rescaling", {{"scale", 0.5}, {"offset", 0.0}}));
  EXPECT_EQ(translated("math.truediv", on("x", {{"y", 4}})),
            expected("Rescaling", {{"scale", 0.25}, {"offset", 0.0}}));
  EXPECT_EQ(translated("math.negative", on("x")),
            expected("Rescaling", {{"scale", -1.0}, {"offset", 0.0}}));
  EXPECT_EQ(
      translated("__operators__.add", on("x", {{"y", {{1.0, -2.0, 3.0}}}})),
      expected("Normalization", {{"axis", -1}, {"mean", {-1.0, 2.0, -3.0}}, {"variance", 1.0}}));
  EXPECT_EQ(
      translated("math.subtract", on("x", {{"y", {1.0, -2.0, 3.0}}})),
      expected("Normalization", {{"axis", -1}, {"mean", {1.0, -2.0, 3.0}}, {"variance", 1.0}}));
  EXPECT_EQ(translated("math.maximum", on("x", {{"y", 0}})), expected("ReLU", none));
  EXPECT_EQ(translated("nn.relu", on("x")), expected("Activation", {{"activation", "relu"}}));
  EXPECT_EQ(translated("math.sigmoid", on("x")),
            expected("Activation", {{"activation", "sigmoid"}}));
  EXPECT_EQ(translated("nn.gelu", on("x", {{"approximate", false}})),
            expected("Activation", {{"activation", "gelu"}}));
  EXPECT_EQ(translated("nn.softmax", on("x", {{"axis", -1}})),
            expected("Activation", {{"activation", "softmax"}}));
  EXPECT_EQ(translated("nn.silu", on("x")), expected("Activation", {{"activation", "swish"}}));
  EXPECT_EQ(translated("math.exp", on("x")),
            expected("Activation", {{"activation", "exponential"}}));
  EXPECT_EQ(translated("nn.relu6", on("x")), expected("ReLU", {{"max_value", 6.0}}));
  EXPECT_EQ(translated("nn.leaky_relu", on("x", {{"alpha", 0.1}})),
            expected("LeakyReLU", {{"alpha", 0.1}}));
  EXPECT_EQ(translated("nn.leaky_relu", on("x")), expected("LeakyReLU", {{"alpha", 0.2}}));
  EXPECT_EQ(translated("reshape", on("x", {{"shape", {-1, 3, 1}}})),
            expected("Reshape", {{"target_shape", {3, 1}}}));
  EXPECT_EQ(translated("transpose", on("x", {{"perm", {0, 2, 1}}})),
            expected("Permute", {{"dims", {2, 1}}}));
  EXPECT_EQ(
      translated("math.reduce_mean", on("x", {{"axis", 1}})),
      expected("GlobalAveragePooling1D", {{"data_format", "channels_last"}, {"keepdims", false}}));
  EXPECT_EQ(translated("math.reduce_max", on("x", {{"axis", {1, 2}}, {"keepdims", true}})),
            expected("GlobalMaxPooling2D", {{"data_format", "channels_last"}, {"keepdims", true}}));
  EXPECT_EQ(translated("linalg.matmul", on("x", {{"b", ref("x")}, {"transpose_b", true}})),
            expected("Dot", {{"axes", {2, 2}}, {"normalize", false}}, {"x", "x"}));
  EXPECT_EQ(translated("linalg.matmul", on("x", {{"b", ref("x")}})),
            expected("Dot", {{"axes", {2, 1}}, {"normalize", false}}, {"x", "x"}));
  // tf.concat([x, x], -1): the first argument a list, each tensor carrying the arguments.
  const json args = {{"axis", -1}, {"name", nullptr}};
  EXPECT_EQ(translated("concat", json::array({{"x", 0, 0, args}, {"x", 0, 0, args}})),
            expected("Concatenate", {{"axis", -1}}, {"x", "x"}));
}

// x (2, 3) -> a = x * 0.5 -> b = a + x -> c = b - [1, 2, 3] -> d = relu(c) -> e = concat([d,
// x], -1) -> f = transpose(e, [0, 2, 1]) -> g = reduce_mean(f, 1) -> h = g / 4, against the
// arithmetic by hand; the config written back holds the layers and rebuilds the same model.
TEST(TfFunctionLayers, AModelOfFunctionsComputesTheirArithmetic) {
  const json model = model_of(
      {2, 3},
      {function_entry("math.multiply", on("x", {{"y", 0.5}})),
       function_entry("__operators__.add", on("tf.math.multiply", {{"y", ref("x")}})),
       function_entry("math.subtract", on("tf.__operators__.add", {{"y", {{1.0, 2.0, 3.0}}}})),
       function_entry("nn.relu", on("tf.math.subtract")),
       function_entry("concat",
                      json::array({{"tf.nn.relu", 0, 0, {{"axis", -1}, {"name", nullptr}}},
                                   {"x", 0, 0, {{"axis", -1}, {"name", nullptr}}}})),
       function_entry("transpose", on("tf.concat", {{"perm", {0, 2, 1}}})),
       function_entry("math.reduce_mean", on("tf.transpose", {{"axis", 1}})),
       function_entry("math.truediv", on("tf.math.reduce_mean", {{"y", 4.0}}))},
      "tf.math.truediv");
  ASSERT_TRUE(calls_tf_functions(model));
  auto m = Model::from_config(model, "model", 1);
  const std::vector<float> x{0.5f, 1.5f,  2.5f, -1.0f, 3.0f, 4.0f,   // sample 0: (2, 3)
                             2.0f, -2.0f, 0.0f, 1.0f,  1.0f, 6.0f};  // sample 1
  const Tensor& y = m->forward(Tensor::from_vector({2, 2, 3}, x), false);
  ASSERT_EQ(y.shape(), (Shape{2, 2}));
  for (int s = 0; s < 2; ++s) {
    // f is (6, 2): the 6 features of e (3 of d, 3 of x) by step; g averages f over its axis 1
    // (e's features): g[t] = mean over the features of e[t].
    for (int t = 0; t < 2; ++t) {
      double sum = 0;
      for (int k = 0; k < 3; ++k) {
        const double v = x[s * 6 + t * 3 + k];
        sum += std::max(0.0, v * 0.5 + v - (k + 1)) + v;
      }
      EXPECT_NEAR(y[s * 2 + t], sum / 6 / 4, 1e-6) << s << " " << t;
    }
  }
  const json written = m->config();
  ASSERT_FALSE(calls_tf_functions(written));
  EXPECT_EQ(written["config"]["layers"][1]["class_name"], "Rescaling");
  EXPECT_EQ(written["config"]["layers"][5]["class_name"], "Concatenate");
  auto again = Model::from_config(written, "model", 1);
  const Tensor& z = again->forward(Tensor::from_vector({2, 2, 3}, x), false);
  for (std::int64_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], y[i]);
}

// tf.matmul(x, x, transpose_b=True) of sequences (2, 3): each sample's Gram matrix; a function in
// a model nested as a layer is read too.
TEST(TfFunctionLayers, MatmulAndNestedModels) {
  json inner = model_of({2, 3}, {}, "x");
  inner["config"]["name"] = "inner";
  inner["config"]["layers"][0]["name"] = "inner_x";
  inner["config"]["layers"][0]["config"]["name"] = "inner_x";
  inner["config"]["layers"].push_back(function_entry(
      "linalg.matmul", on("inner_x", {{"b", ref("inner_x")}, {"transpose_b", true}})));
  inner["config"]["input_layers"] = {ref("inner_x")};
  inner["config"]["output_layers"] = {ref("tf.linalg.matmul")};
  inner.erase("keras_version");
  inner["name"] = "inner";
  inner["inbound_nodes"] = json::array({json::array({json::array({"x", 0, 0, json::object()})})});
  json outer = model_of({2, 3}, {inner}, "inner");
  outer["config"]["output_layers"] = {{"inner", 1, 0}};  // Keras numbers its calls from 1
  ASSERT_TRUE(calls_tf_functions(outer));
  auto m = Model::from_config(outer, "model", 1);
  const Tensor& y = m->forward(Tensor::from_vector({1, 2, 3}, {1, 2, 3, 4, 5, 6}), false);
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(y[0], 14.0f);  // 1·1 + 2·2 + 3·3
  EXPECT_EQ(y[1], 32.0f);  // 1·4 + 2·5 + 3·6
  EXPECT_EQ(y[2], 32.0f);
  EXPECT_EQ(y[3], 77.0f);
  EXPECT_FALSE(calls_tf_functions(m->config()));
}

std::string error_of(const json& entry, const json& shape = {3}) {
  return test::model_config_error(model_of(shape, {entry}, entry["name"].get<std::string>()));
}

TEST(TfFunctionLayers, WhatHasNoLayerIsRefusedNamingTheFunction) {
  EXPECT_EQ(error_of(function_entry("math.cos", on("x"))),
            "config error at 'model.config.layers[1].config.function': layer 'tf.math.cos' "
            "(TensorFlow's tf.math.cos) is a TensorFlow function called on a Keras tensor "
            "(TFOpLambda) that Tandem has no layer for; write it with the Keras layer that "
            "computes it (docs/config.md, functions called on Keras tensors)");
  EXPECT_EQ(error_of(function_entry("math.truediv", on("x", {{"y", ref("x")}}))),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'tf.math.truediv' "
            "(TensorFlow's tf.math.truediv) divides a tensor by a tensor, which Tandem has no "
            "layer for");
  EXPECT_EQ(error_of(function_entry("nn.softmax", on("x", {{"axis", 1}}))),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'tf.nn.softmax' "
            "(TensorFlow's tf.nn.softmax) takes the softmax over axis 1, which Tandem has no "
            "layer for");
  EXPECT_NE(error_of(function_entry("reshape", on("x", {{"shape", {4, 3}}})))
                .find("reshapes to [4,3] (the first axis, the batch, must stay -1)"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("nn.relu", on("x", {{"features_scale", 2}})))
                .find("(TensorFlow's tf.nn.relu) passes features_scale=2, which Tandem has no "
                      "layer for"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.multiply", on("x", {{"y", {{1, 2}, {3, 4}}}})))
                .find("combines the tensor with the constant [[1,2],[3,4]]"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.truediv", on("x", {{"y", 0}}))).find("divides by 0"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.reduce_mean", on("x", {{"axis", -1}})))
                .find("reduces over axis [-1]"),
            std::string::npos);
  // 2 * x written tf.multiply(2, x): the first argument is no tensor.
  EXPECT_NE(error_of(function_entry("math.multiply", json::array({2.0})))
                .find("'model.config.layers[1].inbound_nodes[0]': layer 'tf.math.multiply' "
                      "(TensorFlow's tf.math.multiply): its first argument is not a Keras tensor"),
            std::string::npos);
  json twice = function_entry("nn.relu", on("x"));
  twice["inbound_nodes"].push_back(on("x"));
  EXPECT_NE(error_of(twice).find("'model.config.layers[1].inbound_nodes': layer 'tf.nn.relu' "
                                 "(TensorFlow's tf.nn.relu): expected one call"),
            std::string::npos);
  json nameless = function_entry("nn.relu", on("x"));
  nameless["config"].erase("function");
  EXPECT_NE(error_of(nameless).find("'model.config.layers[1].config.function': expected the "
                                    "TensorFlow function's name"),
            std::string::npos);
  // Shapes the layer cannot take fail at the layer, named with its class.
  EXPECT_NE(error_of(function_entry("__operators__.add", on("x", {{"y", {1.0, 2.0}}})))
                .find("tf.__operators__.add"),
            std::string::npos);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem::nn
