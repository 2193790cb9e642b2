#include "nn/function_layers.hpp"

#include <algorithm>
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

// tf.keras 2's ["layer", node, tensor] (the node's tensors carry the keyword arguments as a
// fourth element); Keras 3's {"class_name": "__keras_tensor__", ...}.
bool is_keras2_ref(const json& v) {
  return v.is_array() && (v.size() == 3 || v.size() == 4) && v[0].is_string() &&
         v[1].is_number_integer() && v[2].is_number_integer() &&
         (v.size() == 3 || v[3].is_object());
}
bool is_keras3_ref(const json& v) {
  return v.is_object() && string_field(v, "class_name") == "__keras_tensor__";
}
bool is_tensor(const json& v) {
  return is_keras2_ref(v) || is_keras3_ref(v);
}
json plain(const json& ref) {
  return is_keras2_ref(ref) ? json::array({ref[0], ref[1], ref[2]}) : ref;
}

// A Keras 3 constant argument: a number as it is, a NumPy array or a tensor by its value.
json constant_value(const json& v) {
  const std::string cls = v.is_object() ? string_field(v, "class_name") : "";
  if ((cls == "__numpy__" || cls == "__tensor__") && v.contains("config") &&
      v["config"].is_object() && v["config"].contains("value"))
    return v["config"]["value"];
  return v;
}

const std::map<std::string, std::string>& activation_names() {
  static const std::map<std::string, std::string> names{// tf.keras 2's functions
                                                        {"nn.relu", "relu"},
                                                        {"math.sigmoid", "sigmoid"},
                                                        {"nn.sigmoid", "sigmoid"},
                                                        {"math.tanh", "tanh"},
                                                        {"nn.tanh", "tanh"},
                                                        {"nn.elu", "elu"},
                                                        {"nn.selu", "selu"},
                                                        {"math.softplus", "softplus"},
                                                        {"nn.softplus", "softplus"},
                                                        {"nn.softsign", "softsign"},
                                                        {"math.softsign", "softsign"},
                                                        {"nn.silu", "swish"},
                                                        {"nn.swish", "swish"},
                                                        {"math.exp", "exponential"},
                                                        {"nn.gelu", "gelu"},
                                                        {"nn.softmax", "softmax"},
                                                        {"math.softmax", "softmax"},
                                                        // Keras 3's operations
                                                        {"Relu", "relu"},
                                                        {"Sigmoid", "sigmoid"},
                                                        {"Tanh", "tanh"},
                                                        {"Elu", "elu"},
                                                        {"Selu", "selu"},
                                                        {"Softplus", "softplus"},
                                                        {"Softsign", "softsign"},
                                                        {"Silu", "swish"},
                                                        {"Exp", "exponential"},
                                                        {"Gelu", "gelu"},
                                                        {"Softmax", "softmax"}};
  return names;
}

// The other functions and operations, by what they compute.
const std::map<std::string, std::string>& operation_names() {
  static const std::map<std::string, std::string> ops{{"__operators__.add", "add"},
                                                      {"math.add", "add"},
                                                      {"Add", "add"},
                                                      {"math.subtract", "subtract"},
                                                      {"Subtract", "subtract"},
                                                      {"math.multiply", "multiply"},
                                                      {"Multiply", "multiply"},
                                                      {"math.truediv", "divide"},
                                                      {"math.divide", "divide"},
                                                      {"Divide", "divide"},
                                                      {"TrueDivide", "divide"},
                                                      {"math.maximum", "maximum"},
                                                      {"Maximum", "maximum"},
                                                      {"math.minimum", "minimum"},
                                                      {"Minimum", "minimum"},
                                                      {"math.negative", "negative"},
                                                      {"Negative", "negative"},
                                                      {"nn.relu6", "relu6"},
                                                      {"Relu6", "relu6"},
                                                      {"nn.leaky_relu", "leaky_relu"},
                                                      {"LeakyRelu", "leaky_relu"},
                                                      {"math.reduce_mean", "mean"},
                                                      {"math.reduce_max", "max"},
                                                      {"math.reduce_sum", "sum"},
                                                      {"math.reduce_min", "min"},
                                                      {"Sum", "sum"},
                                                      {"Min", "min"},
                                                      {"reshape", "reshape"},
                                                      {"concat", "concat"},
                                                      {"transpose", "transpose"},
                                                      {"linalg.matmul", "matmul"},
                                                      {"Reshape", "reshape"},
                                                      {"Concatenate", "concat"},
                                                      {"Transpose", "transpose"},
                                                      {"Mean", "mean"},
                                                      {"Max", "max"},
                                                      {"Matmul", "matmul"},
                                                      {"__operators__.getitem", "getitem"},
                                                      {"GetItem", "getitem"},
                                                      {"expand_dims", "expand_dims"},
                                                      {"ExpandDims", "expand_dims"},
                                                      {"squeeze", "squeeze"},
                                                      {"compat.v1.squeeze", "squeeze"},
                                                      {"Squeeze", "squeeze"},
                                                      {"cast", "cast"},
                                                      {"Cast", "cast"},
                                                      {"math.l2_normalize", "l2_normalize"},
                                                      {"nn.l2_normalize", "l2_normalize"},
                                                      {"linalg.l2_normalize", "l2_normalize"}};
  return ops;
}

bool binary_op(const std::string& op) {
  return op == "add" || op == "subtract" || op == "multiply" || op == "divide" || op == "maximum" ||
         op == "minimum";
}

// One call of a function on Keras tensors, as its entry writes it.
struct FunctionCall {
  std::string op;               // what it computes: "add", "activation", "reshape", ...
  std::string activation;       // op "activation": Tandem's name of it
  std::string shown;            // "tf.math.multiply", "keras.src.ops.numpy.Multiply"
  bool keras3 = false;          // a Keras 3 operation (its entry's form)
  std::vector<json> tensors;    // the first argument's tensors ("x"; tf.concat's values)
  bool list = false;            // the first argument is a list of tensors
  json y;                       // a binary operation's other operand (null: none)
  bool constant_first = false;  // Keras 3's c - x: the constant is the first operand
  json args;                    // the other arguments by name (names and nulls dropped)
  std::string path;             // the entry's JSON path
  std::string who;              // "layer 'tf.math.multiply' (tf.math.multiply)"

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
  /// A call on one tensor.
  void one_tensor() const {
    if (list || tensors.size() != 1) refuse("is called on a list of tensors");
  }
};

json without_names_and_nulls(json args) {
  if (!args.is_object()) return json::object();
  for (auto it = args.begin(); it != args.end();)
    it = it.key() == "name" || it->is_null() ? args.erase(it) : std::next(it);
  return args;
}

void name_the_op(FunctionCall& call, const std::string& key, const std::string& config_path) {
  if (const auto a = activation_names().find(key); a != activation_names().end()) {
    call.op = "activation";
    call.activation = a->second;
  } else if (const auto o = operation_names().find(key); o != operation_names().end()) {
    call.op = o->second;
  } else {
    throw ConfigError(config_path,
                      call.who +
                          " is a function called on a Keras tensor that Tandem has no layer for; "
                          "write it with the Keras layer that computes it (docs/config.md, "
                          "functions called on Keras tensors)");
  }
}

// tf.keras 2's TFOpLambda entry: the function in its config, one node holding the first argument
// (a tensor, or a list of them for tf.concat) and the keyword arguments.
FunctionCall read_tf_function(const json& entry, const std::string& path) {
  FunctionCall call;
  call.path = path;
  const auto config = entry.find("config");
  if (config == entry.end() || !config->is_object())
    throw ConfigError(path + ".config", "expected the TFOpLambda's config, an object");
  const std::string function = string_field(*config, "function");
  if (function.empty())
    throw ConfigError(path + ".config.function",
                      "expected the TensorFlow function's name, a string (\"math.multiply\")");
  call.shown = "tf." + function;
  call.who = "layer '" + string_field(*config, "name") + "' (" + call.shown + ")";
  name_the_op(call, function, path + ".config.function");
  const json nodes = entry.value("inbound_nodes", json::array());
  if (!nodes.is_array() || nodes.size() != 1)
    throw ConfigError(
        path + ".inbound_nodes",
        call.who + ": expected one call (Keras makes a TFOpLambda per call), got " + nodes.dump());
  const json& node = nodes[0];
  if (is_keras2_ref(node)) {  // one tensor: the node is its reference
    call.tensors.push_back(plain(node));
    if (node.size() == 4) call.args = node[3];
  } else if (node.is_array() && !node.empty() &&
             std::all_of(node.begin(), node.end(),
                         [](const json& t) { return is_keras2_ref(t); })) {
    call.list = true;  // a list of tensors, each with the call's keyword arguments
    for (const json& t : node) call.tensors.push_back(plain(t));
    if (node[0].size() == 4) call.args = node[0][3];
  } else {
    throw ConfigError(call.node_path(),
                      call.who +
                          ": its first argument is not a Keras tensor or a list of them "
                          "(a constant first, as in 2 * x written tf.multiply(2, x)?), "
                          "which Tandem cannot read; got " +
                          node.dump());
  }
  call.args = without_names_and_nulls(call.args);
  if (binary_op(call.op)) {
    call.y = call.arg("y");
    call.args.erase("y");
  }
  return call;
}

// Keras 3's operation entry: the operation's class and its constructor's arguments in the
// config, one node {"args": [x] or [x, y], "kwargs": {}}.
FunctionCall read_keras_operation(const json& entry, const std::string& path) {
  FunctionCall call;
  call.path = path;
  call.keras3 = true;
  const std::string cls = string_field(entry, "class_name");
  call.shown = string_field(entry, "module") + "." + cls;
  const json config = entry.value("config", json::object());
  if (!config.is_object())
    throw ConfigError(path + ".config",
                      "expected the operation's config, an object, got " + config.dump());
  const std::string name = string_field(entry, "name");
  call.who =
      "layer '" + (name.empty() ? string_field(config, "name") : name) + "' (" + call.shown + ")";
  name_the_op(call, cls, path + ".class_name");
  const json nodes = entry.value("inbound_nodes", json::array());
  if (!nodes.is_array() || nodes.size() != 1 || !nodes[0].is_object())
    throw ConfigError(path + ".inbound_nodes",
                      call.who +
                          ": expected one call {\"args\": [...], \"kwargs\": {...}} (Keras "
                          "makes an operation per call), got " +
                          nodes.dump());
  const json& node = nodes[0];
  const json args = node.value("args", json::array());
  if (!without_names_and_nulls(node.value("kwargs", json::object())).empty())
    call.refuse("passes keyword arguments " + node["kwargs"].dump());
  const std::size_t wanted =
      binary_op(call.op) || call.op == "matmul" || call.op == "getitem" ? 2 : 1;
  if (!args.is_array() || args.size() != wanted)
    throw ConfigError(
        call.node_path() + ".args",
        call.who + ": expected " + std::to_string(wanted) + " arguments, got " + args.dump());
  const auto all_tensors = [](const json& list) {
    return list.is_array() && !list.empty() && std::all_of(list.begin(), list.end(), is_tensor);
  };
  if (call.op == "concat" && all_tensors(args[0])) {  // keras.ops.concatenate([a, b], axis)
    call.list = true;
    for (const json& t : args[0]) call.tensors.push_back(t);
  } else if (is_tensor(args[0])) {
    call.tensors.push_back(args[0]);
    if (wanted == 2) call.y = is_tensor(args[1]) ? args[1] : constant_value(args[1]);
  } else if (binary_op(call.op) && is_tensor(args[1])) {  // 2 * x: the constant first
    call.tensors.push_back(args[1]);
    call.y = constant_value(args[0]);
    call.constant_first = true;
  } else {
    call.refuse("is called on no Keras tensor (" + args.dump() + ")");
  }
  // The operation's own arguments, under the names tf.keras 2's functions give them.
  call.args = without_names_and_nulls(config);
  if (call.op != "cast") call.args.erase("dtype");  // the operation's own (Cast's is its argument)
  for (const auto& [from, to] : {std::pair<const char*, const char*>{"negative_slope", "alpha"},
                                 {"newshape", "shape"},
                                 {"axes", "perm"}})
    if (call.args.contains(from)) {
      call.args[to] = call.args[from];
      call.args.erase(from);
    }
  if (call.op == "matmul") call.args["b"] = call.y;
  if (call.op == "getitem") {
    call.args["key"] = args[1];  // as given: null (a new axis) is an item, not a left-out key
    call.y = json();
  }
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

// The Keras layer a call runs as: its class, its own config keys and its inputs (`joined`: given
// as one list, as the merging layers take them).
struct LayerCall {
  std::string cls;
  json config;
  std::vector<json> inputs;
  bool joined = false;
};

LayerCall rescaling(double scale, double offset, const FunctionCall& c) {
  return {"Rescaling", {{"scale", scale}, {"offset", offset}}, c.tensors};
}

// x op y: two tensors (a merging layer), a number (Rescaling, ReLU) or a number per feature
// (Normalization with variance 1).
LayerCall binary(const FunctionCall& c) {
  c.only({});
  c.one_tensor();
  static const std::map<std::string, std::string> merging{{"add", "Add"},
                                                          {"subtract", "Subtract"},
                                                          {"multiply", "Multiply"},
                                                          {"maximum", "Maximum"},
                                                          {"minimum", "Minimum"}};
  const json& y = c.y;
  if (is_tensor(y)) {
    if (c.op == "divide") c.refuse("divides a tensor by a tensor");
    return {merging.at(c.op), json::object(), {c.tensors[0], plain(y)}, true};
  }
  if (y.is_number()) {
    const double v = y.get<double>();
    if (c.op == "add") return rescaling(1.0, v, c);
    if (c.op == "subtract") return c.constant_first ? rescaling(-1.0, v, c) : rescaling(1.0, -v, c);
    if (c.op == "multiply") return rescaling(v, 0.0, c);
    if (c.op == "divide") {
      if (c.constant_first) c.refuse("divides a constant by a tensor");
      if (v == 0) c.refuse("divides by 0");
      return rescaling(1.0 / v, 0.0, c);
    }
    if (c.op == "maximum" && v == 0) return {"ReLU", json::object(), c.tensors};
    c.refuse("takes the " + c.op + " with the constant " + y.dump());
  }
  const auto vector = feature_vector(y);
  if (vector && (c.op == "add" || (c.op == "subtract" && !c.constant_first))) {
    json mean = json::array();
    for (double v : *vector) mean.push_back(c.op == "add" ? -v : v);
    return {"Normalization", {{"axis", -1}, {"mean", mean}, {"variance", 1.0}}, c.tensors};
  }
  c.refuse(y.is_null() ? std::string("has no second operand")
                       : "combines the tensor with the constant " + y.dump() +
                             " (a number, or for x + v and x - v one per feature of the last "
                             "axis, has a layer)");
}

bool is_false(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>());
}

LayerCall activation(const FunctionCall& c) {
  const std::string& name = c.activation;
  if (name == "softmax") {
    c.only({"axis"});
    const json& axis = c.arg("axis");
    if (!axis.is_null() && axis != -1 && axis != json::array({-1})) {
      const json one = axis.is_array() && axis.size() == 1 ? axis[0] : axis;
      if (!one.is_number_integer() || one == 0)
        c.refuse("takes the softmax over axis " + axis.dump() +
                 " (over one axis after the batch, Keras' Softmax layer computes it)");
      c.one_tensor();
      return {"Softmax", {{"axis", one}}, c.tensors};  // over another axis than the last
    }
  } else if (name == "gelu") {
    c.only({"approximate"});
    if (!is_false(c.arg("approximate"))) c.refuse("approximates gelu by tanh");
  } else if (name == "swish") {
    c.only({"beta"});
    const json& beta = c.arg("beta");
    if (!beta.is_null() && !(beta.is_number() && beta.get<double>() == 1.0))
      c.refuse("passes beta=" + beta.dump());
  } else if (name == "elu") {
    c.only({"alpha"});
    const json& alpha = c.arg("alpha");
    if (!alpha.is_null() && !(alpha.is_number() && alpha.get<double>() == 1.0))
      c.refuse("passes alpha=" + alpha.dump());
  } else {
    c.only({});
  }
  c.one_tensor();
  return {"Activation", {{"activation", name}}, c.tensors};
}

LayerCall leaky_relu(const FunctionCall& c) {
  c.only({"alpha"});
  c.one_tensor();
  const json& alpha = c.arg("alpha");
  if (!alpha.is_null() && !alpha.is_number()) c.refuse("passes alpha=" + alpha.dump());
  const double slope = alpha.is_null() ? 0.2 : alpha.get<double>();  // both Kerases' default
  return {"LeakyReLU", {{c.keras3 ? "negative_slope" : "alpha", slope}}, c.tensors};
}

// An axis argument: one integer or a list of them (none: `allow_none`).
json axis_list(const FunctionCall& c, const json& axis, bool allow_none) {
  if (axis.is_null() && allow_none) return json();
  const json list = axis.is_array() ? axis : json::array({axis});
  const bool integers = !list.empty() && std::all_of(list.begin(), list.end(), [](const json& a) {
    return a.is_number_integer();
  });
  if (!integers) c.refuse("passes axis=" + axis.dump());
  return list;
}

// The global pooling layer's count of pooled axes for a reduction over [1], [1, 2] or [1, 2, 3]
// (the steps, the pixels, the voxels), else 0.
int pooled_axes(const json& axes) {
  for (int n = 1; n <= 3; ++n) {
    json leading = json::array();
    for (int a = 1; a <= n; ++a) leading.push_back(a);
    if (axes == leading) return n;
  }
  return 0;
}

// A mean or maximum over the leading axes is a global pooling layer; every other sum, mean,
// maximum or minimum over axes after the batch is TandemReduction (nn/reduction_layer.hpp).
LayerCall reduction(const FunctionCall& c) {
  c.only({"axis", "keepdims"});
  c.one_tensor();
  const json& keepdims = c.arg("keepdims");
  if (!keepdims.is_null() && !keepdims.is_boolean()) c.refuse("passes keepdims=" + keepdims.dump());
  const bool keep = keepdims.is_boolean() && keepdims.get<bool>();
  if (c.arg("axis").is_null()) c.refuse("reduces over every axis, the batch's too");
  const json axes = axis_list(c, c.arg("axis"), false);
  if (const int n = pooled_axes(axes); n > 0 && (c.op == "mean" || c.op == "max"))
    return {std::string("Global") + (c.op == "mean" ? "Average" : "Max") + "Pooling" +
                std::to_string(n) + "D",
            {{"data_format", "channels_last"}, {"keepdims", keep}},
            c.tensors};
  return {"TandemReduction", {{"reduction", c.op}, {"axes", axes}, {"keepdims", keep}}, c.tensors};
}

LayerCall reshape(const FunctionCall& c) {
  c.only({"shape"});
  c.one_tensor();
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
  return {"Concatenate", {{"axis", axis}}, c.tensors, true};
}

LayerCall transpose(const FunctionCall& c) {
  c.only({"perm", "conjugate"});
  c.one_tensor();
  const json& perm = c.arg("perm");
  if (!perm.is_array() || perm.size() < 2 || perm[0] != 0 || !is_false(c.arg("conjugate")))
    c.refuse("transposes by " + perm.dump() + " (the batch, axis 0, must stay first)");
  return {"Permute", {{"dims", json(perm.begin() + 1, perm.end())}}, c.tensors};
}

LayerCall matmul(const FunctionCall& c) {
  c.only({"b", "transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse",
          "output_type"});
  c.one_tensor();
  const json& b = c.arg("b");
  if (!is_tensor(b)) c.refuse("multiplies by the constant " + b.dump());
  for (const char* flag : {"a_is_sparse", "b_is_sparse"})
    if (!is_false(c.arg(flag))) c.refuse("passes " + std::string(flag) + "=true");
  if (!c.arg("output_type").is_null()) c.refuse("passes output_type");
  // The adjoint of a real matrix is its transpose. aᵀ·b contracts axis 1 of both (Dot's
  // axes [1, 1]), a·bᵀ axis 2 of both, aᵀ·bᵀ = (b·a)ᵀ a's axis 1 with b's axis 2: Keras' Dot
  // gives a's remaining axis first, then b's, which is the product's (rows, columns).
  const auto transposed = [&](const char* t, const char* adjoint) {
    const bool both = !is_false(c.arg(t)) && !is_false(c.arg(adjoint));
    if (both) c.refuse("passes both " + std::string(t) + " and " + adjoint);
    return !is_false(c.arg(t)) || !is_false(c.arg(adjoint));
  };
  const bool a_t = transposed("transpose_a", "adjoint_a");
  const bool b_t = transposed("transpose_b", "adjoint_b");
  return {"Dot",
          {{"axes", json::array({a_t ? 1 : 2, b_t ? 2 : 1})}, {"normalize", false}},
          {c.tensors[0], plain(b)},
          true};
}

// One item of x[...] in TandemIndexing's form (nn/indexing_layer.hpp): an integer, null (a new
// axis), "..." or a slice {"start", "stop", "step"}. tf.keras 2 writes a slice {"start", "stop",
// "step"} and the ellipsis {"class_name": "__ellipsis__"}; Keras 3 {"class_name": "__slice__",
// "config": {...}} and {"class_name": "__ellipsis__", "config": {}}.
json index_item(const json& e, const FunctionCall& c) {
  if (e.is_null() || e.is_number_integer()) return e;
  const std::string cls = e.is_object() ? string_field(e, "class_name") : "";
  if (cls == "__ellipsis__") return "...";
  const json* slice = nullptr;
  if (cls == "__slice__" && e.contains("config") && e["config"].is_object()) slice = &e["config"];
  if (cls.empty() && e.is_object() && e.contains("start") && e.contains("stop")) slice = &e;
  if (!slice)
    c.refuse("indexes with " + e.dump() +
             " (integers, slices, None and one ... are NumPy's basic indexing; a tensor or a "
             "list is its advanced one)");
  json out = json::object();
  for (const char* key : {"start", "stop", "step"}) {
    const json bound = slice->value(key, json());
    if (!bound.is_null() && !bound.is_number_integer())
      c.refuse("slices with the " + std::string(key) + " " + bound.dump() +
               " (an integer or None)");
    out[key] = bound;
  }
  return out;
}

LayerCall indexing(const FunctionCall& c) {
  const char* key = c.keras3 ? "key" : "slice_spec";
  c.only({key});
  c.one_tensor();
  const json& spec = c.arg(key);  // tf.keras 2 leaves out a null one: x[None]
  const json list = spec.is_array() ? spec : json::array({spec});
  json items = json::array();
  for (const json& e : list) items.push_back(index_item(e, c));
  return {"TandemIndexing", {{"index", items}}, c.tensors};
}

LayerCall expand_dims(const FunctionCall& c) {
  c.only({"axis"});
  c.one_tensor();
  return {"TandemIndexing", {{"expand_axes", axis_list(c, c.arg("axis"), false)}}, c.tensors};
}

LayerCall squeeze(const FunctionCall& c) {
  c.only({"axis", "squeeze_dims"});  // tf.compat.v1.squeeze's old name for axis
  c.one_tensor();
  const json& axis = c.arg("axis").is_null() ? c.arg("squeeze_dims") : c.arg("axis");
  return {"TandemIndexing", {{"squeeze_axes", axis_list(c, axis, true)}}, c.tensors};
}

// A cast to float32 (or float64, of which float32 computes the same) is the identity; to
// another type it rounds or truncates, which no layer does.
LayerCall cast(const FunctionCall& c) {
  c.only({"dtype"});
  c.one_tensor();
  const json& dtype = c.arg("dtype");
  if (dtype != "float32" && dtype != "float64")
    c.refuse("casts to " + dtype.dump() + " (a cast to float32 is the Identity layer)");
  return {"Identity", json::object(), c.tensors};
}

// tf.math.l2_normalize(x, axis, epsilon=1e-12): x · rsqrt(max(Σ x², 1e-12)) over the axis,
// which is Keras' UnitNormalization.
LayerCall l2_normalize(const FunctionCall& c) {
  c.only({"axis", "epsilon", "dim"});
  c.one_tensor();
  const json& axis = c.arg("axis").is_null() ? c.arg("dim") : c.arg("axis");
  if (axis.is_null()) c.refuse("normalizes over every axis, the batch's too");
  const json& epsilon = c.arg("epsilon");
  if (!epsilon.is_null() && !(epsilon.is_number() && epsilon.get<double>() == 1e-12))
    c.refuse("passes epsilon=" + epsilon.dump() + " (UnitNormalization's is 1e-12)");
  return {"UnitNormalization", {{"axis", axis_list(c, axis, false)}}, c.tensors};
}

LayerCall layer_of(const FunctionCall& c) {
  if (binary_op(c.op)) return binary(c);
  if (c.op == "activation") return activation(c);
  if (c.op == "leaky_relu") return leaky_relu(c);
  if (c.op == "relu6" || c.op == "negative") {
    c.only({});
    c.one_tensor();
    return c.op == "relu6" ? LayerCall{"ReLU", {{"max_value", 6.0}}, c.tensors}
                           : rescaling(-1.0, 0.0, c);
  }
  if (c.op == "mean" || c.op == "max" || c.op == "sum" || c.op == "min") return reduction(c);
  if (c.op == "reshape") return reshape(c);
  if (c.op == "concat") return concatenate(c);
  if (c.op == "transpose") return transpose(c);
  if (c.op == "getitem") return indexing(c);
  if (c.op == "expand_dims") return expand_dims(c);
  if (c.op == "squeeze") return squeeze(c);
  if (c.op == "cast") return cast(c);
  if (c.op == "l2_normalize") return l2_normalize(c);
  return matmul(c);
}

// The entry of `call` in the call's own Keras form, named and configured (trainable, dtype) as
// the function's entry was.
json layer_entry(const json& original, const FunctionCall& from, const LayerCall& call) {
  const json own = original.value("config", json::object());  // an object: the readers check
  const json name = original.contains("name") ? original["name"] : own.value("name", json());
  json config = call.config;
  config["name"] = name;
  config["trainable"] = own.value("trainable", json(true));
  // Keras 3's Cast keeps its target type there, not the layer's.
  const bool layer_dtype = !(from.keras3 && from.op == "cast");
  if (layer_dtype && own.contains("dtype") && !own["dtype"].is_null())
    config["dtype"] = own["dtype"];
  if (!from.keras3) {
    json node = json::array();
    for (const json& input : call.inputs)
      node.push_back(json::array({input[0], input[1], input[2], json::object()}));
    return {{"class_name", call.cls},
            {"config", config},
            {"name", name},
            {"inbound_nodes", json::array({node})}};
  }
  const json first = call.joined ? json(call.inputs) : call.inputs.front();
  return {{"module", "keras.layers"},
          {"class_name", call.cls},
          {"config", config},
          {"registered_name", nullptr},
          {"name", name},
          {"inbound_nodes",
           json::array({{{"args", json::array({first})}, {"kwargs", json::object()}}})}};
}

}  // namespace

bool is_tandem_layer(const std::string& cls) {
  return cls == "TandemIndexing" || cls == "TandemReduction";
}

namespace {

bool is_tf_function(const json& entry) {
  const std::string cls = string_field(entry, "class_name");
  return cls == "TFOpLambda" || cls == "SlicingOpLambda";
}

// A Keras 3 operation entry of a class function_layers reads (others stay, for
// refuse_unbuildable_layer to name).
bool is_read_operation(const json& entry) {
  const std::string module = string_field(entry, "module");
  if (module.rfind("keras.src.ops", 0) != 0 && module.rfind("keras.ops", 0) != 0) return false;
  const std::string cls = string_field(entry, "class_name");
  return activation_names().count(cls) || operation_names().count(cls);
}

void translate_layers(json& model, const std::string& path, std::vector<std::string>& translated,
                      std::set<std::string>& seen, json& functions, json& given) {
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
      translate_layers(entry, at, translated, seen, functions, given);
      continue;
    }
    const bool tf = is_tf_function(entry);
    if (!tf && !is_read_operation(entry)) continue;
    const FunctionCall call = tf ? read_tf_function(entry, at) : read_keras_operation(entry, at);
    const LayerCall layer = layer_of(call);
    const std::string note = call.shown + " as " + layer.cls;
    if (seen.insert(note).second) translated.push_back(note);
    json original = std::move(entry);
    entry = layer_entry(original, call, layer);
    if (!entry["name"].is_string()) continue;
    const std::string name = entry["name"].get<std::string>();
    functions[name] = call.shown;
    if (is_tandem_layer(layer.cls)) given[name] = std::move(original);
  }
}

}  // namespace

bool calls_functions(const json& model) {
  if (!model.is_object()) return false;
  const auto config = model.find("config");
  if (config == model.end() || !config->is_object()) return false;
  const auto layers = config->find("layers");
  if (layers == config->end() || !layers->is_array()) return false;
  return std::any_of(layers->begin(), layers->end(), [](const json& entry) {
    return entry.is_object() && (is_tf_function(entry) || is_read_operation(entry) ||
                                 (is_model(entry) && calls_functions(entry)));
  });
}

json functions_as_layers(json model, const std::string& path, std::vector<std::string>& translated,
                         json& functions, json& given) {
  std::set<std::string> seen;
  translate_layers(model, path, translated, seen, functions, given);
  return model;
}

}  // namespace tandem::nn
