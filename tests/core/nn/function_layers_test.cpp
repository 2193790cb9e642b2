// Functions called on Keras tensors read as the Keras layers that compute them
// (nn/function_layers.hpp): tf.keras 2's TFOpLambda entries (the first argument in the node, the
// others as keyword arguments) and Keras 3's operation entries (module keras.src.ops.*, node
// {"args": [x, y]}), as their to_json() writes them. Each function's entry as the layer entry
// expected by hand; models of them against their arithmetic written out by hand; the config
// written back; what has no layer refused at its path, naming the function.
#include "nn/function_layers.hpp"

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
            {"input_layers", json::array({ref("x")})},
            {"output_layers", json::array({ref(out)})}}},
          {"keras_version", "2.15.0"}};
}

// The layer entry `function_entry(function, node)` becomes in a model of input `shape`.
json translated(const std::string& function, const json& node) {
  std::vector<std::string> kinds;
  json functions, given;
  const json model =
      functions_as_layers(model_of({3}, {function_entry(function, node)}, "tf." + function),
                          "model", kinds, functions, given);
  EXPECT_EQ(kinds.size(), 1u);
  EXPECT_EQ(functions, (json{{"tf." + function, "tf." + function}}));
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

TEST(FunctionLayers, EachFunctionBecomesTheLayerThatComputesIt) {
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
  EXPECT_EQ(translated("nn.softmax", on("x", {{"axis", 1}})), expected("Softmax", {{"axis", 1}}));
  EXPECT_EQ(translated("nn.silu", on("x")), expected("Activation", {{"activation", "swish"}}));
  EXPECT_EQ(translated("math.exp", on("x")),
            expected("Activation", {{"activation", "exponential"}}));
  EXPECT_EQ(translated("nn.relu6", on("x")), expected("ReLU", {{"max_value", 6.0}}));
  EXPECT_EQ(translated("nn.leaky_relu", on("x", {{"alpha", 0.1}})),
            expected("LeakyReLU", {{"alpha", 0.1}}));
  EXPECT_EQ(
      translated("math.reduce_sum", on("x", {{"axis", -1}, {"keepdims", true}})),
      expected("TandemReduction", {{"reduction", "sum"}, {"axes", {-1}}, {"keepdims", true}}));
  EXPECT_EQ(
      translated("math.reduce_mean", on("x", {{"axis", -1}})),
      expected("TandemReduction", {{"reduction", "mean"}, {"axes", {-1}}, {"keepdims", false}}));
  EXPECT_EQ(
      translated("math.reduce_min", on("x", {{"axis", 1}})),
      expected("TandemReduction", {{"reduction", "min"}, {"axes", {1}}, {"keepdims", false}}));
  EXPECT_EQ(translated("cast", on("x", {{"dtype", "float32"}})), expected("Identity", none));
  EXPECT_EQ(translated("math.l2_normalize", on("x", {{"axis", -1}})),
            expected("UnitNormalization", {{"axis", {-1}}}));
  EXPECT_EQ(translated("nn.l2_normalize", on("x", {{"axis", {1, 2}}, {"epsilon", 1e-12}})),
            expected("UnitNormalization", {{"axis", {1, 2}}}));
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
  EXPECT_EQ(translated("linalg.matmul", on("x", {{"b", ref("x")}, {"transpose_a", true}})),
            expected("Dot", {{"axes", {1, 1}}, {"normalize", false}}, {"x", "x"}));
  EXPECT_EQ(translated("linalg.matmul",
                       on("x", {{"b", ref("x")}, {"adjoint_a", true}, {"transpose_b", true}})),
            expected("Dot", {{"axes", {1, 2}}, {"normalize", false}}, {"x", "x"}));
  // tf.concat([x, x], -1): the first argument a list, each tensor carrying the arguments.
  const json args = {{"axis", -1}, {"name", nullptr}};
  EXPECT_EQ(translated("concat", json::array({{"x", 0, 0, args}, {"x", 0, 0, args}})),
            expected("Concatenate", {{"axis", -1}}, {"x", "x"}));
}

// x (2, 3) -> a = x * 0.5 -> b = a + x -> c = b - [1, 2, 3] -> d = relu(c) -> e = concat([d,
// x], -1) -> f = transpose(e, [0, 2, 1]) -> g = reduce_mean(f, 1) -> h = g / 4, against the
// arithmetic by hand; the config written back holds the layers and rebuilds the same model.
TEST(FunctionLayers, AModelOfFunctionsComputesTheirArithmetic) {
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
  ASSERT_TRUE(calls_functions(model));
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
  ASSERT_FALSE(calls_functions(written));
  EXPECT_EQ(written["config"]["layers"][1]["class_name"], "Rescaling");
  EXPECT_EQ(written["config"]["layers"][5]["class_name"], "Concatenate");
  auto again = Model::from_config(written, "model", 1);
  const Tensor& z = again->forward(Tensor::from_vector({2, 2, 3}, x), false);
  for (std::int64_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], y[i]);
}

// tf.matmul(x, x, transpose_b=True) of sequences (2, 3): each sample's Gram matrix; a function in
// a model nested as a layer is read too.
TEST(FunctionLayers, MatmulAndNestedModels) {
  json inner = model_of({2, 3}, {}, "x");
  inner["config"]["name"] = "inner";
  inner["config"]["layers"][0]["name"] = "inner_x";
  inner["config"]["layers"][0]["config"]["name"] = "inner_x";
  inner["config"]["layers"].push_back(function_entry(
      "linalg.matmul", on("inner_x", {{"b", ref("inner_x")}, {"transpose_b", true}})));
  inner["config"]["input_layers"] = json::array({ref("inner_x")});
  inner["config"]["output_layers"] = json::array({ref("tf.linalg.matmul")});
  inner.erase("keras_version");
  inner["name"] = "inner";
  inner["inbound_nodes"] = json::array({json::array({json::array({"x", 0, 0, json::object()})})});
  json outer = model_of({2, 3}, {inner}, "inner");
  outer["config"]["output_layers"] = {{"inner", 1, 0}};  // Keras numbers its calls from 1
  ASSERT_TRUE(calls_functions(outer));
  auto m = Model::from_config(outer, "model", 1);
  const Tensor& y = m->forward(Tensor::from_vector({1, 2, 3}, {1, 2, 3, 4, 5, 6}), false);
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(y[0], 14.0f);  // 1·1 + 2·2 + 3·3
  EXPECT_EQ(y[1], 32.0f);  // 1·4 + 2·5 + 3·6
  EXPECT_EQ(y[2], 32.0f);
  EXPECT_EQ(y[3], 77.0f);
  EXPECT_FALSE(calls_functions(m->config()));
}

// Keras 3: the tensor `layer`'s output of per-sample `shape`, as an argument.
json tensor3(const std::string& layer, json shape = {nullptr, 3}) {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", shape}, {"dtype", "float32"}, {"keras_history", {layer, 0, 0}}}}};
}

// Keras 3's entry of operation `cls` of `module` ("numpy", "nn") named `name`, called on `args`,
// its constructor's arguments `config`.
json operation3(const std::string& module, const std::string& cls, const std::string& name,
                json args, json config = json::object()) {
  config["name"] = name;
  return {{"module", "keras.src.ops." + module},
          {"class_name", cls},
          {"config", config},
          {"registered_name", cls},
          {"name", name},
          {"inbound_nodes", json::array({{{"args", args}, {"kwargs", json::object()}}})}};
}

// Keras 3's functional model x (batch, 3) -> entries -> output `out`.
json model3(std::vector<json> entries, const std::string& out) {
  json layers = json::array(
      {{{"module", "keras.layers"},
        {"class_name", "InputLayer"},
        {"config",
         {{"batch_shape", {nullptr, 3}}, {"dtype", "float32"}, {"sparse", false}, {"name", "x"}}},
        {"registered_name", nullptr},
        {"name", "x"},
        {"inbound_nodes", json::array()}}});
  for (json& e : entries) layers.push_back(std::move(e));
  return {{"module", "keras"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {"x", 0, 0}},
            {"output_layers", {out, 0, 0}}}},
          {"registered_name", "Functional"}};
}

// The Keras 3 layer entry an operation becomes (name, trainable and the node's kwargs checked).
json translated3(const json& operation) {
  std::vector<std::string> kinds;
  json functions, given;
  const json model = functions_as_layers(model3({operation}, operation["name"].get<std::string>()),
                                         "model", kinds, functions, given);
  EXPECT_EQ(kinds.size(), 1u);
  EXPECT_EQ(
      functions[operation["name"].get<std::string>()],
      operation["module"].get<std::string>() + "." + operation["class_name"].get<std::string>());
  json entry = model["config"]["layers"][1];
  EXPECT_EQ(entry["module"], "keras.layers");
  EXPECT_EQ(entry["config"]["name"], operation["name"]);
  EXPECT_EQ(entry["config"]["trainable"], true);
  EXPECT_EQ(entry["inbound_nodes"][0]["kwargs"], json::object());
  return json{{"class_name", entry["class_name"]},
              {"config", entry["config"]},
              {"args", entry["inbound_nodes"][0]["args"]}};
}

// {"class_name", config without name and trainable, the node's args}.
json layer3(const json& entry) {
  json config = entry["config"];
  config.erase("name");
  config.erase("trainable");
  return {{"class_name", entry["class_name"]}, {"config", config}, {"args", entry["args"]}};
}

TEST(FunctionLayers, KerasThreeOperationsBecomeTheLayersThatComputeThem) {
  const json x = tensor3("x");
  const auto as_layer = [](const json& operation) { return layer3(translated3(operation)); };
  // x + x: a merging layer, its two tensors one list argument.
  EXPECT_EQ(as_layer(operation3("numpy", "Add", "add", {x, x})),
            (json{{"class_name", "Add"}, {"config", json::object()}, {"args", {{x, x}}}}));
  // 2 * x, x / 4, 1 - x, x - 1: Rescaling, whichever side the constant is on.
  EXPECT_EQ(as_layer(operation3("numpy", "Multiply", "multiply", {2.0, x})),
            (json{{"class_name", "Rescaling"},
                  {"config", {{"scale", 2.0}, {"offset", 0.0}}},
                  {"args", json::array({x})}}));
  EXPECT_EQ(as_layer(operation3("numpy", "TrueDivide", "true_divide", {x, 4}))["config"],
            (json{{"scale", 0.25}, {"offset", 0.0}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Subtract", "subtract", {1.0, x}))["config"],
            (json{{"scale", -1.0}, {"offset", 1.0}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Subtract", "subtract_1", {x, 1.0}))["config"],
            (json{{"scale", 1.0}, {"offset", -1.0}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Negative", "negative", json::array({x})))["config"],
            (json{{"scale", -1.0}, {"offset", 0.0}}));
  // x + np.array([1, 2, 3]) (a NumPy constant): Normalization.
  const json numpy = {{"class_name", "__numpy__"},
                      {"config", {{"value", {1.0, 2.0, 3.0}}, {"dtype", "float32"}}}};
  EXPECT_EQ(as_layer(operation3("numpy", "Add", "add_1", {x, numpy}))["config"],
            (json{{"axis", -1}, {"mean", {-1.0, -2.0, -3.0}}, {"variance", 1.0}}));
  EXPECT_EQ(as_layer(operation3("nn", "Relu", "relu", json::array({x}))),
            (json{{"class_name", "Activation"},
                  {"config", {{"activation", "relu"}}},
                  {"args", json::array({x})}}));
  EXPECT_EQ(as_layer(operation3("nn", "Gelu", "gelu", json::array({x}),
                                {{"approximate", false}}))["config"],
            (json{{"activation", "gelu"}}));
  EXPECT_EQ(
      as_layer(operation3("nn", "Softmax", "softmax", json::array({x}), {{"axis", -1}}))["config"],
      (json{{"activation", "softmax"}}));
  EXPECT_EQ(as_layer(operation3("nn", "LeakyRelu", "leaky_relu", json::array({x}),
                                {{"negative_slope", 0.1}})),
            (json{{"class_name", "LeakyReLU"},
                  {"config", {{"negative_slope", 0.1}}},
                  {"args", json::array({x})}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Maximum", "maximum", {x, 0}))["class_name"], "ReLU");
  // keras.ops.sum over the last axis, max over axis 2: TandemReduction.
  EXPECT_EQ(as_layer(operation3("numpy", "Sum", "sum", json::array({x}),
                                {{"axis", -1}, {"keepdims", false}}))["class_name"],
            "TandemReduction");
  EXPECT_EQ(as_layer(operation3("numpy", "Max", "max", json::array({x}),
                                {{"axis", 2}, {"keepdims", true}}))["config"],
            (json{{"reduction", "max"}, {"axes", {2}}, {"keepdims", true}}));
  // keras.ops.cast(x, "float32"): Identity.
  EXPECT_EQ(
      as_layer(operation3("core", "Cast", "cast", json::array({x}), {{"dtype", "float32"}})),
      (json{{"class_name", "Identity"}, {"config", json::object()}, {"args", json::array({x})}}));
  // keras.ops.reshape(x, (-1, 3, 1)), concatenate([x, x], -1), transpose, mean, matmul.
  EXPECT_EQ(as_layer(operation3("numpy", "Reshape", "reshape", json::array({x}),
                                {{"newshape", {-1, 3, 1}}})),
            (json{{"class_name", "Reshape"},
                  {"config", {{"target_shape", {3, 1}}}},
                  {"args", json::array({x})}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Concatenate", "concatenate", {{x, x}}, {{"axis", -1}})),
            (json{{"class_name", "Concatenate"}, {"config", {{"axis", -1}}}, {"args", {{x, x}}}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Transpose", "transpose", json::array({x}),
                                {{"axes", {0, 2, 1}}}))["config"],
            (json{{"dims", {2, 1}}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Mean", "mean", json::array({x}),
                                {{"axis", 1}, {"keepdims", false}})),
            (json{{"class_name", "GlobalAveragePooling1D"},
                  {"config", {{"data_format", "channels_last"}, {"keepdims", false}}},
                  {"args", json::array({x})}}));
  EXPECT_EQ(as_layer(operation3("numpy", "Matmul", "matmul", {x, x})),
            (json{{"class_name", "Dot"},
                  {"config", {{"axes", {2, 1}}, {"normalize", false}}},
                  {"args", {{x, x}}}}));
}

// x -> d = Dense(3) -> s = d + x -> m = 0.5 * s -> r = relu(m) -> y = 1 - r, Keras 3's ops,
// against the arithmetic by hand from the Dense weights; the config written back rebuilds it.
TEST(FunctionLayers, AKerasThreeModelOfOperationsComputesTheirArithmetic) {
  json dense = {
      {"module", "keras.layers"},
      {"class_name", "Dense"},
      {"config", {{"name", "d"}, {"units", 3}, {"activation", "linear"}}},
      {"registered_name", nullptr},
      {"name", "d"},
      {"inbound_nodes",
       json::array({{{"args", json::array({tensor3("x")})}, {"kwargs", json::object()}}})}};
  const json model = model3({dense, operation3("numpy", "Add", "add", {tensor3("d"), tensor3("x")}),
                             operation3("numpy", "Multiply", "multiply", {0.5, tensor3("add")}),
                             operation3("nn", "Relu", "relu", json::array({tensor3("multiply")})),
                             operation3("numpy", "Subtract", "subtract", {1.0, tensor3("relu")})},
                            "subtract");
  ASSERT_TRUE(calls_functions(model));
  auto m = Model::from_config(model, "model", 1);
  const std::vector<float> x{0.5f, -1.0f, 2.0f, 3.0f, 0.25f, -2.0f};
  const Tensor& y = m->forward(Tensor::from_vector({2, 3}, x), false);
  auto params = m->parameters();
  const Tensor& kernel = params[0]->value;  // (3, 3)
  const Tensor& bias = params[1]->value;
  for (int s = 0; s < 2; ++s)
    for (int j = 0; j < 3; ++j) {
      double d = bias[j];
      for (int i = 0; i < 3; ++i) d += static_cast<double>(x[s * 3 + i]) * kernel[i * 3 + j];
      EXPECT_NEAR(y[s * 3 + j], 1.0 - std::max(0.0, 0.5 * (d + x[s * 3 + j])), 1e-6) << s << j;
    }
  const json written = m->config();
  EXPECT_FALSE(calls_functions(written));
  auto again = Model::from_config(written, "model", 1);
  again->copy_weights_from(*m);
  const Tensor& z = again->forward(Tensor::from_vector({2, 3}, x), false);
  for (std::int64_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], y[i]);
}

TEST(FunctionLayers, KerasThreeOperationsWithoutALayerAreRefused) {
  const json x = tensor3("x");
  const auto error = [](const json& operation) {
    return test::model_config_error(model3({operation}, operation["name"].get<std::string>()));
  };
  EXPECT_EQ(error(operation3("nn", "Gelu", "gelu", json::array({x}), {{"approximate", true}})),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'gelu' "
            "(keras.src.ops.nn.Gelu) approximates gelu by tanh, which Tandem has no layer for");
  EXPECT_NE(error(operation3("numpy", "TrueDivide", "true_divide", {1.0, x}))
                .find("(keras.src.ops.numpy.TrueDivide) divides a constant by a tensor"),
            std::string::npos);
  EXPECT_NE(error(operation3("numpy", "Add", "add", json::array({x})))
                .find("'model.config.layers[1].inbound_nodes[0].args': layer 'add' "
                      "(keras.src.ops.numpy.Add): expected 2 arguments"),
            std::string::npos);
  json keyword = operation3("nn", "Relu", "relu", json::array({x}));
  keyword["inbound_nodes"][0]["kwargs"] = {{"inplace", true}};
  EXPECT_NE(error(keyword).find("passes keyword arguments {\"inplace\":true}"), std::string::npos);
  // An operation nn/function_layers does not read: refused naming it.
  EXPECT_NE(
      error(operation3("numpy", "Split", "split", json::array({x}), {{"indices_or_sections", 2}}))
          .find("is Keras' operation keras.src.ops.numpy.Split called on a Keras "
                "tensor, not a layer, which Tandem does not run"),
      std::string::npos);
  EXPECT_NE(error(operation3("numpy", "Transpose", "transpose", json::array({x})))
                .find("transposes by null (the batch, axis 0, must stay first)"),
            std::string::npos);
}

std::string error_of(const json& entry, const json& shape = {3}) {
  return test::model_config_error(model_of(shape, {entry}, entry["name"].get<std::string>()));
}

TEST(FunctionLayers, WhatHasNoLayerIsRefusedNamingTheFunction) {
  EXPECT_EQ(error_of(function_entry("math.cos", on("x"))),
            "config error at 'model.config.layers[1].config.function': layer 'tf.math.cos' "
            "(tf.math.cos) is a function called on a Keras tensor that Tandem has no layer "
            "for; write it with the Keras layer that computes it (docs/config.md, functions "
            "called on Keras tensors)");
  EXPECT_EQ(error_of(function_entry("math.truediv", on("x", {{"y", ref("x")}}))),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'tf.math.truediv' "
            "(tf.math.truediv) divides a tensor by a tensor, which Tandem has no "
            "layer for");
  EXPECT_EQ(error_of(function_entry("nn.softmax", on("x", {{"axis", {1, 2}}}))),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'tf.nn.softmax' "
            "(tf.nn.softmax) takes the softmax over axis [1,2] (over one axis after the batch, "
            "Keras' Softmax layer computes it), which Tandem has no layer for");
  EXPECT_NE(error_of(function_entry("reshape", on("x", {{"shape", {4, 3}}})))
                .find("reshapes to [4,3] (the first axis, the batch, must stay -1)"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("nn.relu", on("x", {{"features_scale", 2}})))
                .find("(tf.nn.relu) passes features_scale=2, which Tandem has no "
                      "layer for"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.multiply", on("x", {{"y", {{1, 2}, {3, 4}}}})))
                .find("combines the tensor with the constant [[1,2],[3,4]]"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.truediv", on("x", {{"y", 0}}))).find("divides by 0"),
            std::string::npos);
  EXPECT_NE(error_of(function_entry("math.reduce_mean", on("x")))
                .find("(tf.math.reduce_mean) reduces over every axis, the batch's too"),
            std::string::npos);
  // 2 * x written tf.multiply(2, x): the first argument is no tensor.
  EXPECT_NE(error_of(function_entry("math.multiply", json::array({2.0})))
                .find("'model.config.layers[1].inbound_nodes[0]': layer 'tf.math.multiply' "
                      "(tf.math.multiply): its first argument is not a Keras tensor"),
            std::string::npos);
  json twice = function_entry("nn.relu", on("x"));
  twice["inbound_nodes"].push_back(on("x"));
  EXPECT_NE(error_of(twice).find("'model.config.layers[1].inbound_nodes': layer 'tf.nn.relu' "
                                 "(tf.nn.relu): expected one call"),
            std::string::npos);
  json nameless = function_entry("nn.relu", on("x"));
  nameless["config"].erase("function");
  EXPECT_NE(error_of(nameless).find("'model.config.layers[1].config.function': expected the "
                                    "TensorFlow function's name"),
            std::string::npos);
  // A mask reaching a function (Embedding's mask_zero, then x * 2) is refused, naming it.
  json masked = model_of({5}, {}, "tf.math.multiply");
  masked["config"]["layers"].push_back(
      {{"class_name", "Embedding"},
       {"config", {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 3}, {"mask_zero", true}}},
       {"name", "emb"},
       {"inbound_nodes", json::array({json::array({json::array({"x", 0, 0, json::object()})})})}});
  masked["config"]["layers"].push_back(function_entry("math.multiply", on("emb", {{"y", 2.0}})));
  EXPECT_EQ(test::model_config_error(masked),
            "config error at 'model.config.layers[2]': layer 'tf.math.multiply' "
            "(tf.math.multiply, run as Rescaling) receives a mask (the padding steps "
            "Embedding's mask_zero or a Masking layer leaves out), which Tandem does not take "
            "through a function called on a Keras tensor; write it as Keras' Rescaling layer, "
            "which takes masks as docs/config.md says");
  // Shapes the layer cannot take fail at the layer, named with its class.
  EXPECT_NE(error_of(function_entry("__operators__.add", on("x", {{"y", {1.0, 2.0}}})))
                .find("tf.__operators__.add"),
            std::string::npos);
}

// tf.keras 2's x[...] entry: a SlicingOpLambda of __operators__.getitem, its index in the node's
// slice_spec (a list for several items; a slice {"start", "stop", "step"}, the ellipsis
// {"class_name": "__ellipsis__"}, a new axis null).
json getitem_entry(const std::string& name, const std::string& on_layer, json slice_spec) {
  return {{"class_name", "SlicingOpLambda"},
          {"config",
           {{"name", name},
            {"trainable", true},
            {"dtype", "float32"},
            {"function", "__operators__.getitem"}}},
          {"name", name},
          {"inbound_nodes",
           json::array({json::array({on_layer, 0, 0, {{"slice_spec", std::move(slice_spec)}}})})}};
}

json py_slice(json start, json stop, json step = nullptr) {
  return {{"start", start}, {"stop", stop}, {"step", step}};
}

// What functions_as_layers makes of the one entry of model_of({3}, {entry}): the translated
// entry's class and config (name, trainable and dtype dropped), and the entry given back.
std::pair<json, json> indexing_of(const json& entry, const json& model) {
  std::vector<std::string> kinds;
  json functions, given;
  const json out = functions_as_layers(model, "model", kinds, functions, given);
  const std::string name = entry["name"];
  EXPECT_EQ(given, (json{{name, entry}}));
  json layer = out["config"]["layers"][1];
  EXPECT_EQ(layer["name"], name);
  json config = layer["config"];
  for (const char* key : {"name", "trainable", "dtype"}) config.erase(key);
  return {layer["class_name"], config};
}

json tf_indexing(const json& entry) {
  return indexing_of(entry, model_of({3}, {entry}, entry["name"])).second;
}

TEST(FunctionLayers, SlicesExpandDimsAndSqueezeRunAsTandemIndexing) {
  const json all = py_slice(nullptr, nullptr);
  EXPECT_EQ(tf_indexing(getitem_entry("first", "x", {all, 0})), (json{{"index", {all, 0}}}));
  EXPECT_EQ(tf_indexing(getitem_entry("one", "x", py_slice(1, nullptr))),
            (json{{"index", json::array({py_slice(1, nullptr)})}}));
  EXPECT_EQ(tf_indexing(getitem_entry("e", "x", {{{"class_name", "__ellipsis__"}}, nullptr})),
            (json{{"index", {"...", nullptr}}}));
  json expand = function_entry("expand_dims", on("x", {{"axis", -1}}));
  EXPECT_EQ(tf_indexing(expand), (json{{"expand_axes", {-1}}}));
  EXPECT_EQ(tf_indexing(function_entry("squeeze", on("x", {{"axis", 1}}))),
            (json{{"squeeze_axes", {1}}}));
  EXPECT_EQ(tf_indexing(function_entry("compat.v1.squeeze", on("x", {{"squeeze_dims", {1, 2}}}))),
            (json{{"squeeze_axes", {1, 2}}}));
  EXPECT_EQ(tf_indexing(function_entry("squeeze", on("x"))), (json{{"squeeze_axes", nullptr}}));
  // Keras 3: GetItem(x, key), ExpandDims and Squeeze with the axis in the operation's config.
  const json x = tensor3("x");
  const json all3 = {{"class_name", "__slice__"},
                     {"config", {{"start", nullptr}, {"stop", -1}, {"step", 2}}}};
  const json ellipsis3 = {{"class_name", "__ellipsis__"}, {"config", json::object()}};
  const json get = operation3("numpy", "GetItem", "get_item", {x, {all3, ellipsis3, 0}});
  EXPECT_EQ(
      indexing_of(get, model3({get}, "get_item")),
      (std::pair<json, json>{"TandemIndexing", {{"index", {py_slice(nullptr, -1, 2), "...", 0}}}}));
  const json one = operation3("numpy", "GetItem", "get_item_1", {x, 2});
  EXPECT_EQ(indexing_of(one, model3({one}, "get_item_1")).second, (json{{"index", {2}}}));
  const json e3 = operation3("numpy", "ExpandDims", "expand_dims", json::array({x}), {{"axis", 1}});
  EXPECT_EQ(indexing_of(e3, model3({e3}, "expand_dims")).second, (json{{"expand_axes", {1}}}));
  const json s3 = operation3("numpy", "Squeeze", "squeeze", json::array({x}), {{"axis", nullptr}});
  EXPECT_EQ(indexing_of(s3, model3({s3}, "squeeze")).second, (json{{"squeeze_axes", nullptr}}));
}

// x (2, 3, 4) -> d = Dense(2) -> f = d[:, 0] (2 values), l = tf.squeeze(d[:, -1:, ::-1], 1),
// e = tf.expand_dims(f, -1) -> y = tf.concat([e, tf.expand_dims(l, -1)], 1): against the Dense
// by hand; the config written back holds the functions' entries as given and rebuilds the model.
TEST(FunctionLayers, AModelThatIndexesComputesWhatNumPyWould) {
  json dense = {
      {"class_name", "Dense"},
      {"config",
       {{"name", "d"},
        {"units", 2},
        {"activation", "linear"},
        {"kernel_initializer", {{"class_name", "Ones"}, {"config", json::object()}}}}},
      {"name", "d"},
      {"inbound_nodes", json::array({json::array({json::array({"x", 0, 0, json::object()})})})}};
  const json all = py_slice(nullptr, nullptr);
  const json first = getitem_entry("first", "d", {all, 0});
  const json tail =
      getitem_entry("tail", "d", {all, py_slice(-1, nullptr), py_slice(nullptr, nullptr, -1)});
  json squeeze = function_entry("squeeze", on("tail", {{"axis", 1}}));
  json e1 = function_entry("expand_dims", on("first", {{"axis", -1}}));
  json e2 = function_entry("expand_dims", on("tf.squeeze", {{"axis", -1}}));
  e2["name"] = e2["config"]["name"] = "tf.expand_dims_1";
  const json concat = function_entry(
      "concat", json::array({{"tf.expand_dims", 0, 0, {{"axis", 1}, {"name", nullptr}}},
                             {"tf.expand_dims_1", 0, 0, {{"axis", 1}, {"name", nullptr}}}}));
  const json model = model_of({3, 4}, {dense, first, tail, squeeze, e1, e2, concat}, "tf.concat");
  auto m = Model::from_config(model, "model", 1);
  std::vector<float> x(24);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 2.0f;
  const Tensor& y = m->forward(Tensor::from_vector({2, 3, 4}, x), false);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 1}));
  for (int s = 0; s < 2; ++s) {
    // With a kernel of ones and a zero bias, both units of d[s, t] are the sum of x[s, t].
    const auto row_sum = [&](int t) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += x[s * 12 + t * 4 + k];
      return sum;
    };
    const double want[4] = {row_sum(0), row_sum(0), row_sum(2), row_sum(2)};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[s * 4 + i], want[i], 1e-5) << s << " " << i;
  }
  const json written = m->config();
  for (std::size_t i = 2; i <= 6; ++i)
    EXPECT_EQ(written["config"]["layers"][i], model["config"]["layers"][i]) << i;
  EXPECT_EQ(written["config"]["layers"][7]["class_name"], "Concatenate");
  auto again = Model::from_config(written, "model", 1);
  again->copy_weights_from(*m);
  const Tensor& z = again->forward(Tensor::from_vector({2, 3, 4}, x), false);
  for (std::int64_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], y[i]);
  // Its copy (a replica) writes them back as given too.
  EXPECT_EQ(m->clone()->config(), written);
}

// x[:, 1] inside a model nested as a layer: run, and written back as given in the nested config.
TEST(FunctionLayers, IndexingInANestedModelIsWrittenBackAsGiven) {
  json inner = model_of({2, 3}, {}, "x");
  inner["config"]["name"] = "inner";
  inner["config"]["layers"][0]["name"] = "inner_x";
  inner["config"]["layers"][0]["config"]["name"] = "inner_x";
  const json pick = getitem_entry("pick", "inner_x", {py_slice(nullptr, nullptr), 1});
  inner["config"]["layers"].push_back(pick);
  inner["config"]["input_layers"] = json::array({ref("inner_x")});
  inner["config"]["output_layers"] = json::array({ref("pick")});
  inner.erase("keras_version");
  inner["name"] = "inner";
  inner["inbound_nodes"] = json::array({json::array({json::array({"x", 0, 0, json::object()})})});
  json outer = model_of({2, 3}, {inner}, "inner");
  outer["config"]["output_layers"] = {{"inner", 1, 0}};
  auto m = Model::from_config(outer, "model", 1);
  const Tensor& y = m->forward(Tensor::from_vector({1, 2, 3}, {1, 2, 3, 4, 5, 6}), false);
  ASSERT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(std::vector<float>(y.data(), y.data() + 3), (std::vector<float>{4, 5, 6}));
  const json written = m->config();
  EXPECT_EQ(written["config"]["layers"][1]["config"]["layers"][1], pick);
}

TEST(FunctionLayers, CastsThatRoundAndNormalizationsUnlikeUnitNormalizationAreRefused) {
  const auto error = [](const json& entry) {
    return test::model_config_error(model_of({3}, {entry}, entry["name"]));
  };
  EXPECT_NE(error(function_entry("cast", on("x", {{"dtype", "int32"}})))
                .find("layer 'tf.cast' (tf.cast) casts to \"int32\" (a cast to float32 is the "
                      "Identity layer), which Tandem has no layer for"),
            std::string::npos);
  EXPECT_NE(error(function_entry("cast", on("x", {{"dtype", "float16"}}))).find("casts to"),
            std::string::npos);
  EXPECT_NE(error(function_entry("math.l2_normalize", on("x")))
                .find("normalizes over every axis, the batch's too"),
            std::string::npos);
  EXPECT_NE(error(function_entry("math.l2_normalize", on("x", {{"axis", -1}, {"epsilon", 1e-6}})))
                .find("passes epsilon=1e-06 (UnitNormalization's is 1e-12)"),
            std::string::npos);
  // The batch axis: UnitNormalization's own refusal.
  EXPECT_NE(error(function_entry("math.l2_normalize", on("x", {{"axis", 0}}))).find("batch"),
            std::string::npos);
  const json x = tensor3("x");
  EXPECT_NE(test::model_config_error(
                model3({operation3("core", "Cast", "cast", json::array({x}), {{"dtype", "int64"}})},
                       "cast"))
                .find("(keras.src.ops.core.Cast) casts to \"int64\""),
            std::string::npos);
}

// x (2, 3) -> s = tf.reduce_sum(x, -1, keepdims=True), m = tf.reduce_min(x, -1, keepdims=True)
// -> tf.concat([s, m], -1): by hand; the reductions written back as given.
TEST(FunctionLayers, AModelThatReducesComputesItsSumsAndMinima) {
  const json sum = function_entry("math.reduce_sum", on("x", {{"axis", -1}, {"keepdims", true}}));
  const json min = function_entry("math.reduce_min", on("x", {{"axis", -1}, {"keepdims", true}}));
  const json concat = function_entry(
      "concat", json::array({{"tf.math.reduce_sum", 0, 0, {{"axis", -1}, {"name", nullptr}}},
                             {"tf.math.reduce_min", 0, 0, {{"axis", -1}, {"name", nullptr}}}}));
  const json model = model_of({3}, {sum, min, concat}, "tf.concat");
  auto m = Model::from_config(model, "model", 1);
  const Tensor& y = m->forward(Tensor::from_vector({2, 3}, {1, -2, 4, -1, -5, 2}), false);
  ASSERT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(std::vector<float>(y.data(), y.data() + 4), (std::vector<float>{3, -2, -4, -5}));
  const json written = m->config();
  EXPECT_EQ(written["config"]["layers"][1], sum);
  EXPECT_EQ(written["config"]["layers"][2], min);
  EXPECT_EQ(written["config"]["layers"][3]["class_name"], "Concatenate");
}

TEST(FunctionLayers, IndexingNumPyCannotDoOrTandemDoesNotIsRefusedAtItsPlace) {
  const json all = py_slice(nullptr, nullptr);
  const auto error = [](const json& entry, const json& shape = {3}) {
    return test::model_config_error(model_of(shape, {entry}, entry["name"]));
  };
  EXPECT_EQ(error(getitem_entry("adv", "x", {all, {0, 1}})),
            "config error at 'model.config.layers[1].inbound_nodes[0]': layer 'adv' "
            "(tf.__operators__.getitem) indexes with [0,1] (integers, slices, None and one ... "
            "are NumPy's basic indexing; a tensor or a list is its advanced one), which Tandem "
            "has no layer for");
  EXPECT_NE(error(getitem_entry("f", "x", {all, py_slice(0.5, nullptr)}))
                .find("slices with the start 0.5 (an integer or None)"),
            std::string::npos);
  EXPECT_NE(error(getitem_entry("t", "x", {all, ref("x")})).find("indexes with [\"x\",0,0]"),
            std::string::npos);
  // The layer's own refusals name the entry and the index as Python writes it.
  EXPECT_NE(error(getitem_entry("far", "x", {all, 5}))
                .find("layer 'far' (x[:, 5]) on inputs "
                      "(None, 3): index 5 is out of range "
                      "for axis 1 of length 3"),
            std::string::npos);
  EXPECT_NE(error(getitem_entry("batch", "x", 0)).find("indexes the batch axis"),
            std::string::npos);
  EXPECT_NE(error(function_entry("expand_dims", on("x"))).find("(tf.expand_dims) passes axis=null"),
            std::string::npos);
  EXPECT_NE(error(function_entry("squeeze", on("x", {{"axis", "1"}})))
                .find("(tf.squeeze) passes axis=\"1\""),
            std::string::npos);
  EXPECT_NE(error(function_entry("squeeze", on("x", {{"axis", 1}})))
                .find("(squeeze(x, [1])) on inputs (None, 3): axis 1 has length 3, not 1"),
            std::string::npos);
  const json x = tensor3("x");
  const json keyed = operation3("numpy", "GetItem", "g", {x, x});
  EXPECT_NE(test::model_config_error(model3({keyed}, "g"))
                .find("layer 'g' (keras.src.ops.numpy.GetItem) indexes with {\"class_name\":"
                      "\"__keras_tensor__\""),
            std::string::npos);
  // A mask reaching x[...] is refused naming it.
  json masked = model_of({5}, {}, "m");
  masked["config"]["layers"].push_back(
      {{"class_name", "Embedding"},
       {"config", {{"name", "emb"}, {"input_dim", 9}, {"output_dim", 3}, {"mask_zero", true}}},
       {"name", "emb"},
       {"inbound_nodes", json::array({json::array({json::array({"x", 0, 0, json::object()})})})}});
  masked["config"]["layers"].push_back(getitem_entry("m", "emb", {all, 0}));
  EXPECT_EQ(test::model_config_error(masked),
            "config error at 'model.config.layers[2]': layer 'm' (tf.__operators__.getitem, run "
            "as TandemIndexing) receives a mask (the padding steps Embedding's mask_zero or a "
            "Masking layer leaves out), which Tandem does not take through a function called on "
            "a Keras tensor");
}

// tf.matmul with transposed operands, per sample of x = [[1, 2], [3, 4]]: aᵀ·a = [[10, 14],
// [14, 20]], aᵀ·aᵀ = (a·a)ᵀ = [[7, 15], [10, 22]], a·aᵀ = [[5, 11], [11, 25]].
TEST(FunctionLayers, MatmulOfTransposedOperandsIsTheProductOfTheTransposes) {
  const std::vector<std::pair<json, std::vector<float>>> cases = {
      {{{"transpose_a", true}}, {10, 14, 14, 20}},
      {{{"transpose_a", true}, {"transpose_b", true}}, {7, 15, 10, 22}},
      {{{"adjoint_b", true}}, {5, 11, 11, 25}}};
  for (const auto& [flags, want] : cases) {
    json args = flags;
    args["b"] = ref("x");
    auto m = Model::from_config(
        model_of({2, 2}, {function_entry("linalg.matmul", on("x", args))}, "tf.linalg.matmul"),
        "model", 1);
    const Tensor& y = m->forward(Tensor::from_vector({1, 2, 2}, {1, 2, 3, 4}), false);
    EXPECT_EQ(std::vector<float>(y.data(), y.data() + 4), want) << flags.dump();
  }
  EXPECT_NE(error_of(function_entry("linalg.matmul",
                                    on("x", {{"b", ref("x")},
                                             {"transpose_a", true},
                                             {"adjoint_a", true}})),
                     {2, 2})
                .find("passes both transpose_a and adjoint_a"),
            std::string::npos);
}

// Attention pooling as keras.io's Compact Convolutional Transformer writes it in tf.keras 2:
// w = tf.nn.softmax(Dense(1)(x), axis=1); p = tf.matmul(w, x, transpose_a=True);
// y = tf.squeeze(p, -2) — Softmax over the steps, Dot over axes [1, 1], TandemIndexing: each
// feature's average over the steps weighted by the softmax of the steps' scores, by hand.
TEST(FunctionLayers, AttentionPoolingOverTheStepsComputesItsWeightedAverage) {
  json dense = {{"class_name", "Dense"},
                {"config",
                 {{"name", "score"},
                  {"units", 1},
                  {"kernel_initializer", {{"class_name", "Ones"}, {"config", json::object()}}}}},
                {"name", "score"},
                {"inbound_nodes", json::array({json::array({json::array({"x", 0, 0, json::object()})})})}};
  const json softmax = function_entry("nn.softmax", on("score", {{"axis", 1}}));
  const json pool = function_entry(
      "linalg.matmul", on("tf.nn.softmax", {{"b", ref("x")}, {"transpose_a", true}}));
  const json squeeze = function_entry("squeeze", on("tf.linalg.matmul", {{"axis", -2}}));
  auto m = Model::from_config(model_of({3, 2}, {dense, softmax, pool, squeeze}, "tf.squeeze"),
                              "model", 1);
  const std::vector<float> x{0.5f, -1.0f, 2.0f, 0.25f, -0.5f, 1.5f,   // sample 0: 3 steps of 2
                             1.0f, 1.0f,  -2.0f, 0.0f, 0.75f, 0.25f};  // sample 1
  const Tensor& y = m->forward(Tensor::from_vector({2, 3, 2}, x), false);
  ASSERT_EQ(y.shape(), (Shape{2, 2}));
  for (int s = 0; s < 2; ++s) {
    double z = 0, e[3];
    for (int t = 0; t < 3; ++t) z += e[t] = std::exp(double(x[s * 6 + t * 2]) + x[s * 6 + t * 2 + 1]);
    for (int f = 0; f < 2; ++f) {
      double want = 0;
      for (int t = 0; t < 3; ++t) want += e[t] / z * x[s * 6 + t * 2 + f];
      EXPECT_NEAR(y[s * 2 + f], want, 1e-6) << s << " " << f;
    }
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem::nn
