#include "nn/tf_function_layers.hpp"

#include <map>
#include <optional>
#include <set>

#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

bool is_model(const json& entry) {
  const std::string cls = string_field(entry, "class_name");
  return cls == "Sequential" || cls == "Functional" || cls == "Model";
}

// ["layer", node, tensor] (Keras 2's reference to a call's output), with the first argument's
// keyword arguments as a fourth element where the node carries them.
bool is_tensor_ref(const json& v) {
  return v.is_array() && (v.size() == 3 || v.size() == 4) && v[0].is_string() &&
         v[1].is_number_integer() && v[2].is_number_integer() &&
         (v.size() == 3 || v[3].is_object());
}

json plain_ref(const json& ref) {
  return json::array({ref[0], ref[1], ref[2]});
}

// One TFOpLambda call as its entry writes it.
struct FunctionCall {
  std::string function;       // "math.multiply"
  std::vector<json> tensors;  // the first argument's tensors, ["layer", node, tensor] each
  bool list = false;          // the first argument is a list of tensors (tf.concat's values)
  json args;                  // the other arguments by name ("name" and nulls dropped)
  std::string path;           // the entry's JSON path
  std::string who;            // "layer 'tf.math.multiply' (TensorFlow's tf.math.multiply)"

  std::string node_path() const { return path + ".inbound_nodes[0]"; }
  [[noreturn]] void refuse(const std::string& why) const {
    throw ConfigError(node_path(), who + " " + why + ", which Tandem has no layer for");
  }
  /// The argument, or null when the call does not pass it.
  const json& arg(const char* key) const {
    static const json none;
    const auto it = args.find(key);
    return it == args.end() ? none : *it;
  }
  /// Refuses an argument outside `known`.
  void only(std::initializer_list<const char*> known) const {
    const std::set<std::string> names(known.begin(), known.end());
    for (const auto& [key, value] : args.items())
      if (!names.count(key)) refuse("passes " + key + "=" + value.dump());
  }
};

FunctionCall read_function_call(const json& entry, const std::string& path) {
  FunctionCall call;
  call.path = path;
  const auto config = entry.find("config");
  if (config == entry.end() || !config->is_object())
    throw ConfigError(path + ".config", "expected the TFOpLambda's config, an object");
  call.function = string_field(*config, "function");
  if (call.function.empty())
    throw ConfigError(path + ".config.function",
                      "expected the TensorFlow function's name, a string (\"math.multiply\")");
  call.who =
      "layer '" + string_field(*config, "name") + "' (TensorFlow's tf." + call.function + ")";
  const json nodes = entry.value("inbound_nodes", json::array());
  if (!nodes.is_array() || nodes.size() != 1)
    throw ConfigError(
        path + ".inbound_nodes",
        call.who + ": expected one call (Keras makes a TFOpLambda per call), got " + nodes.dump());
  const json& node = nodes[0];
  if (is_tensor_ref(node)) {  // one tensor: the node is its reference
    call.tensors.push_back(plain_ref(node));
    if (node.size() == 4) call.args = node[3];
  } else if (node.is_array() && !node.empty() &&
             std::all_of(node.begin(), node.end(),
                         [](const json& t) { return is_tensor_ref(t); })) {
    call.list = true;  // a list of tensors, each with the call's keyword arguments
    for (const json& t : node) call.tensors.push_back(plain_ref(t));
    if (node[0].size() == 4) call.args = node[0][3];
  } else {
    throw ConfigError(call.node_path(),
                      call.who +
                          ": its first argument is not a Keras tensor or a list of them "
                          "(a constant first, as in 2 * x written tf.multiply(2, x)?), "
                          "which Tandem cannot read; got " +
                          node.dump());
  }
  if (!call.args.is_object()) call.args = json::object();
  for (auto it = call.args.begin(); it != call.args.end();)
    it = it.key() == "name" || it->is_null() ? call.args.erase(it) : std::next(it);
  return call;
}

// One number per feature of the last axis ([v, ...], [[v, ...]], ...), or none.
std::optional<std::vector<double>> feature_vector(const json& v) {
  const json* at = &v;
  while (at->is_array() && at->size() == 1 && (*at)[0].is_array()) at = &(*at)[0];
  if (!at->is_array() || at->empty()) return std::nullopt;
  std::vector<double> out;
  for (const json& e : *at) {
    if (!e.is_number()) return std::nullopt;
    out.push_back(e.get<double>());
  }
  return out;
}

// The Keras layer a translation gives: its class, its own config keys and its inputs.
struct LayerCall {
  std::string cls;
  json config;
  std::vector<json> inputs;
};

const std::map<std::string, std::string>& merging_functions() {
  static const std::map<std::string, std::string> layers{
      {"__operators__.add", "Add"},  {"math.add", "Add"},         {"math.subtract", "Subtract"},
      {"math.multiply", "Multiply"}, {"math.maximum", "Maximum"}, {"math.minimum", "Minimum"},
      {"math.truediv", ""},          {"math.divide", ""}};
  return layers;
}

// x op y: two tensors (a merging layer), a number (Rescaling, ReLU) or a number per feature
// (Normalization with variance 1).
LayerCall binary(const FunctionCall& c) {
  c.only({"y"});
  if (c.list || c.tensors.size() != 1) c.refuse("is called on a list of tensors");
  const json& y = c.arg("y");
  const std::string& merge = merging_functions().at(c.function);
  const bool add = merge == "Add", subtract = merge == "Subtract", multiply = merge == "Multiply";
  if (is_tensor_ref(y)) {
    if (merge.empty()) c.refuse("divides a tensor by a tensor");
    return {merge, json::object(), {c.tensors[0], plain_ref(y)}};
  }
  if (y.is_number()) {
    const double v = y.get<double>();
    if (add) return {"Rescaling", {{"scale", 1.0}, {"offset", v}}, c.tensors};
    if (subtract) return {"Rescaling", {{"scale", 1.0}, {"offset", -v}}, c.tensors};
    if (multiply) return {"Rescaling", {{"scale", v}, {"offset", 0.0}}, c.tensors};
    if (merge.empty()) {
      if (v == 0) c.refuse("divides by 0");
      return {"Rescaling", {{"scale", 1.0 / v}, {"offset", 0.0}}, c.tensors};
    }
    if (merge == "Maximum" && v == 0) return {"ReLU", json::object(), c.tensors};
    c.refuse("takes the " + merge + " with the constant " + y.dump());
  }
  if (const auto vector = feature_vector(y); vector && (add || subtract)) {
    json mean = json::array();
    for (double v : *vector) mean.push_back(add ? -v : v);
    return {"Normalization", {{"axis", -1}, {"mean", mean}, {"variance", 1.0}}, c.tensors};
  }
  c.refuse(y.is_null() ? std::string("has no second argument y")
                       : "combines the tensor with the constant " + y.dump() +
                             " (a number, or for + and - one per feature of the last axis, has "
                             "a layer)");
}

const std::map<std::string, std::string>& activation_functions() {
  static const std::map<std::string, std::string> names{
      {"nn.relu", "relu"},         {"math.sigmoid", "sigmoid"},   {"nn.sigmoid", "sigmoid"},
      {"math.tanh", "tanh"},       {"nn.tanh", "tanh"},           {"nn.elu", "elu"},
      {"nn.selu", "selu"},         {"math.softplus", "softplus"}, {"nn.softplus", "softplus"},
      {"nn.softsign", "softsign"}, {"math.softsign", "softsign"}, {"nn.silu", "swish"},
      {"nn.swish", "swish"},       {"math.exp", "exponential"},   {"nn.gelu", "gelu"},
      {"nn.softmax", "softmax"},   {"math.softmax", "softmax"}};
  return names;
}

bool is_false(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>());
}

LayerCall activation(const FunctionCall& c) {
  const std::string name = activation_functions().at(c.function);
  if (name == "softmax") {
    c.only({"axis"});
    const json& axis = c.arg("axis");
    if (!axis.is_null() && axis != -1) c.refuse("takes the softmax over axis " + axis.dump());
  } else if (name == "gelu") {
    c.only({"approximate"});
    if (!is_false(c.arg("approximate"))) c.refuse("approximates gelu by tanh");
  } else if (name == "swish") {
    c.only({"beta"});
    const json& beta = c.arg("beta");
    if (!beta.is_null() && !(beta.is_number() && beta.get<double>() == 1.0))
      c.refuse("passes beta=" + beta.dump());
  } else {
    c.only({});
  }
  if (c.list) c.refuse("is called on a list of tensors");
  return {"Activation", {{"activation", name}}, c.tensors};
}

// The axes of a reduction: [1], [1, 2] or [1, 2, 3] (the steps, the pixels, the voxels).
int pooled_axes(const FunctionCall& c) {
  json axis = c.arg("axis");
  if (axis.is_number_integer()) axis = json::array({axis});
  for (int n = 1; n <= 3; ++n) {
    json axes = json::array();
    for (int a = 1; a <= n; ++a) axes.push_back(a);
    if (axis == axes) return n;
  }
  c.refuse("reduces over axis " + axis.dump() +
           " (over axis 1, [1, 2] or [1, 2, 3], the pooling layers compute it)");
}

LayerCall reduction(const FunctionCall& c) {
  c.only({"axis", "keepdims"});
  if (c.list) c.refuse("is called on a list of tensors");
  const json& keepdims = c.arg("keepdims");
  if (!keepdims.is_null() && !keepdims.is_boolean()) c.refuse("passes keepdims=" + keepdims.dump());
  const int n = pooled_axes(c);
  const std::string kind = c.function == "math.reduce_mean" ? "Average" : "Max";
  return {"Global" + kind + "Pooling" + std::to_string(n) + "D",
          {{"data_format", "channels_last"},
           {"keepdims", keepdims.is_boolean() && keepdims.get<bool>()}},
          c.tensors};
}

LayerCall reshape(const FunctionCall& c) {
  c.only({"shape"});
  const json& shape = c.arg("shape");
  if (!shape.is_array() || shape.empty() || !(shape[0].is_null() || shape[0] == -1))
    c.refuse("reshapes to " + shape.dump() + " (the first axis, the batch, must stay -1)");
  json target = json::array();
  for (std::size_t i = 1; i < shape.size(); ++i) {
    if (!shape[i].is_number_integer()) c.refuse("reshapes to " + shape.dump());
    target.push_back(shape[i]);
  }
  return {"Reshape", {{"target_shape", target}}, c.tensors};
}

LayerCall concatenate(const FunctionCall& c) {
  c.only({"axis"});
  const json& axis = c.arg("axis");
  if (!axis.is_number_integer() || axis == 0)
    c.refuse("joins along axis " + axis.dump() + " (an axis after the batch's joins tensors)");
  return {"Concatenate", {{"axis", axis}}, c.tensors};
}

LayerCall transpose(const FunctionCall& c) {
  c.only({"perm", "conjugate"});
  const json& perm = c.arg("perm");
  if (!perm.is_array() || perm.size() < 2 || perm[0] != 0 || !is_false(c.arg("conjugate")))
    c.refuse("transposes by " + perm.dump() + " (the batch, axis 0, must stay first)");
  return {"Permute", {{"dims", json(perm.begin() + 1, perm.end())}}, c.tensors};
}

LayerCall matmul(const FunctionCall& c) {
  c.only({"b", "transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse",
          "output_type"});
  const json& b = c.arg("b");
  if (!is_tensor_ref(b)) c.refuse("multiplies by the constant " + b.dump());
  for (const char* flag : {"transpose_a", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse"})
    if (!is_false(c.arg(flag))) c.refuse("passes " + std::string(flag) + "=true");
  if (!c.arg("output_type").is_null()) c.refuse("passes output_type");
  const bool transposed = !is_false(c.arg("transpose_b"));
  return {"Dot",
          {{"axes", json::array({2, transposed ? 2 : 1})}, {"normalize", false}},
          {c.tensors[0], plain_ref(b)}};
}

LayerCall layer_of(const FunctionCall& c) {
  if (merging_functions().count(c.function)) return binary(c);
  if (activation_functions().count(c.function)) return activation(c);
  if (c.function == "nn.relu6") {
    c.only({});
    return {"ReLU", {{"max_value", 6.0}}, c.tensors};
  }
  if (c.function == "nn.leaky_relu") {
    c.only({"alpha"});
    const json& alpha = c.arg("alpha");
    if (!alpha.is_null() && !alpha.is_number()) c.refuse("passes alpha=" + alpha.dump());
    return {"LeakyReLU", {{"alpha", alpha.is_null() ? 0.2 : alpha.get<double>()}}, c.tensors};
  }
  if (c.function == "math.negative") {
    c.only({});
    return {"Rescaling", {{"scale", -1.0}, {"offset", 0.0}}, c.tensors};
  }
  if (c.function == "math.reduce_mean" || c.function == "math.reduce_max") return reduction(c);
  if (c.function == "reshape") return reshape(c);
  if (c.function == "concat") return concatenate(c);
  if (c.function == "transpose") return transpose(c);
  if (c.function == "linalg.matmul") return matmul(c);
  throw ConfigError(c.path + ".config.function",
                    c.who +
                        " is a TensorFlow function called on a Keras tensor (TFOpLambda) that "
                        "Tandem has no layer for; write it with the Keras layer that computes it "
                        "(docs/config.md, functions called on Keras tensors)");
}

// The Keras 2 entry of `call`, named and configured (trainable, dtype) as the TFOpLambda was.
json layer_entry(const json& original, const LayerCall& call) {
  const json& from = original.at("config");
  json config = call.config;
  config["name"] = from.value("name", json());
  config["trainable"] = from.value("trainable", json(true));
  if (from.contains("dtype")) config["dtype"] = from["dtype"];
  json node = json::array();
  for (const json& input : call.inputs)
    node.push_back(json::array({input[0], input[1], input[2], json::object()}));
  return {{"class_name", call.cls},
          {"config", config},
          {"name", config["name"]},
          {"inbound_nodes", json::array({node})}};
}

void translate_layers(json& model, const std::string& path, std::vector<std::string>& translated,
                      std::set<std::string>& seen) {
  if (!model.is_object()) return;
  const auto config = model.find("config");
  if (config == model.end() || !config->is_object()) return;
  const auto layers = config->find("layers");
  if (layers == config->end() || !layers->is_array()) return;
  for (std::size_t i = 0; i < layers->size(); ++i) {
    json& entry = (*layers)[i];
    const std::string at = path + ".config.layers[" + std::to_string(i) + "]";
    if (!entry.is_object()) continue;
    if (is_model(entry)) {
      translate_layers(entry, at, translated, seen);
    } else if (string_field(entry, "class_name") == "TFOpLambda") {
      const FunctionCall call = read_function_call(entry, at);
      const LayerCall layer = layer_of(call);
      const std::string note = "tf." + call.function + " as " + layer.cls;
      if (seen.insert(note).second) translated.push_back(note);
      entry = layer_entry(entry, layer);
    }
  }
}

}  // namespace

bool calls_tf_functions(const json& model) {
  if (!model.is_object()) return false;
  const auto config = model.find("config");
  if (config == model.end() || !config->is_object()) return false;
  const auto layers = config->find("layers");
  if (layers == config->end() || !layers->is_array()) return false;
  for (const json& entry : *layers)
    if (entry.is_object() && (string_field(entry, "class_name") == "TFOpLambda" ||
                              (is_model(entry) && calls_tf_functions(entry))))
      return true;
  return false;
}

json tf_functions_as_layers(json model, const std::string& path,
                            std::vector<std::string>& translated) {
  std::set<std::string> seen;
  translate_layers(model, path, translated, seen);
  return model;
}

}  // namespace tandem::nn
