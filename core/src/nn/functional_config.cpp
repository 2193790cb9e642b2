#include "nn/functional_config.hpp"

#include <map>
#include <set>

#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

std::string at_index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// A reference to a layer's output: [name, node_index, tensor_index(, kwargs)] (Keras 2, and
// Keras 3's input_layers/output_layers): the node is the call (as Keras numbers it, counted from
// 0 later: count_calls_from_zero), the tensor which of its outputs. The kwargs are read_call's.
CallRef read_history(const json& ref, const std::string& path) {
  const auto index = [&](std::size_t i) {
    return ref[i].is_number_integer() && ref[i].get<std::int64_t>() >= 0 &&
           ref[i].get<std::int64_t>() <= 1000000;
  };
  if (!ref.is_array() || ref.size() < 3 || ref.size() > 4 || !ref[0].is_string() || !index(1) ||
      !index(2))
    throw ConfigError(path,
                      "expected [\"layer name\", node index, tensor index], got " + ref.dump());
  return {ref[0].get<std::string>(), static_cast<int>(ref[1].get<std::int64_t>()),
          static_cast<int>(ref[2].get<std::int64_t>())};
}

bool is_history(const json& v) {
  return v.is_array() && (v.size() == 3 || v.size() == 4) && v[0].is_string() &&
         v[1].is_number_integer() && v[2].is_number_integer();
}

bool is_keras_tensor(const json& v) {
  return string_field(v, "class_name") == "__keras_tensor__";
}

// A Keras 3 tensor argument: {"class_name": "__keras_tensor__", "config": {"keras_history": ...}}.
CallRef read_keras_tensor(const json& arg, const std::string& path) {
  if (!is_keras_tensor(arg) || !arg.contains("config") || !arg["config"].is_object() ||
      !arg["config"].contains("keras_history"))
    throw ConfigError(path, "expected a __keras_tensor__ with a keras_history, got " + arg.dump());
  return read_history(arg["config"]["keras_history"], path + ".config.keras_history");
}

// Keyword arguments: tensors (as `is_tensor` tells) become named inputs — a list of tensors
// (a recurrent layer's initial_state) one input per tensor, each under the keyword's name —,
// nulls are left out, anything else is an option.
template <class IsTensor, class ReadTensor>
void read_keywords(const json& kwargs, const std::string& path, CallSpec& spec,
                   IsTensor is_tensor, ReadTensor read_tensor) {
  if (kwargs.is_null()) return;
  if (!kwargs.is_object())
    throw ConfigError(path, "expected the call's keyword arguments (an object), got " +
                                kwargs.dump());
  for (const auto& [key, value] : kwargs.items()) {
    if (value.is_null()) continue;
    const bool tensors =
        value.is_array() && !value.empty() && std::all_of(value.begin(), value.end(), is_tensor);
    if (is_tensor(value)) {
      spec.inputs.push_back(read_tensor(value, path + "." + key));
      spec.names.push_back(key);
    } else if (tensors) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        spec.inputs.push_back(read_tensor(value[i], at_index(path + "." + key, i)));
        spec.names.push_back(key);
      }
    } else {
      spec.options[key] = value;
    }
  }
}

// Keras 2: a list of references, the first argument's tensors, each carrying the call's
// keyword arguments (the same object on each; the first one's is read).
CallSpec read_keras2_call(const json& node, const std::string& path) {
  CallSpec spec;
  for (std::size_t i = 0; i < node.size(); ++i) {
    spec.inputs.push_back(read_history(node[i], at_index(path, i)));
    spec.names.emplace_back();
  }
  if (!node.empty() && node[0].is_array() && node[0].size() == 4)
    read_keywords(node[0][3], at_index(at_index(path, 0), 3), spec, is_history, read_history);
  // Keras 2 writes the call's keyword arguments beside each of its tensors, the same ones; it
  // reads them from the last. Read from the first, they must be the same everywhere.
  const auto keywords = [&](std::size_t i) {
    return node[i].is_array() && node[i].size() == 4 ? node[i][3] : json::object();
  };
  for (std::size_t i = 1; i < node.size(); ++i)
    if (keywords(i) != keywords(0))
      throw ConfigError(at_index(path, i),
                        "the call's keyword arguments " + keywords(i).dump() +
                            " differ from those beside its first tensor, " + keywords(0).dump() +
                            " (Keras 2 writes the same ones beside each tensor of a call)");
  // tf.keras 2 runs a call given `training` explicitly in that mode, whatever the model's.
  if (spec.options.contains("training") && spec.options["training"].is_boolean()) {
    spec.training = spec.options["training"].get<bool>();
    spec.options.erase("training");
  }
  return spec;
}

// Keras 3: {"args": [first, second, ...], "kwargs": {...}}; the first argument is a tensor or a
// list of tensors (a merging layer's), later positional tensors are named "#1", "#2", ...
CallSpec read_keras3_call(const json& node, const std::string& path) {
  CallSpec spec;
  json args = node["args"];
  json kwargs = node.value("kwargs", json::object());
  std::string first_path = path + ".args[0]";
  // A call made with keywords only (mha(query=x, value=x)): the first argument is the one Keras
  // names `inputs` (most layers) or `query` (attention).
  if (args.is_array() && args.empty() && kwargs.is_object())
    for (const char* key : {"inputs", "query"})
      if (kwargs.contains(key) && !kwargs[key].is_null()) {
        args.push_back(kwargs[key]);
        kwargs.erase(key);
        first_path = path + ".kwargs." + key;
        break;
      }
  // Keras 3 records a layer's `training` default in each call it writes (Dropout's false, the
  // augmentation layers' true); its fit, evaluate and predict replace it with their own mode, as
  // Tandem's do, so it never takes effect there.
  if (kwargs.is_object() && kwargs.contains("training") && kwargs["training"].is_boolean())
    kwargs.erase("training");
  if (!args.is_array() || args.empty())
    throw ConfigError(path + ".args", "expected the call's arguments (a non-empty list), got " +
                                          node["args"].dump());
  const json& first = args[0];
  if (first.is_array()) {
    for (std::size_t i = 0; i < first.size(); ++i)
      spec.inputs.push_back(read_keras_tensor(first[i], at_index(first_path, i)));
  } else {
    spec.inputs.push_back(read_keras_tensor(first, first_path));
  }
  spec.names.assign(spec.inputs.size(), "");
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].is_null()) continue;
    if (!is_keras_tensor(args[i]))
      throw ConfigError(at_index(path + ".args", i),
                        "a positional argument that is not a tensor is not supported, got " +
                            args[i].dump() + " (pass it by keyword)");
    spec.inputs.push_back(read_keras_tensor(args[i], at_index(path + ".args", i)));
    std::string name = "#";  // (GCC 12 misjudges "#" + s as an overlapping copy)
    name += std::to_string(i);
    spec.names.push_back(std::move(name));
  }
  read_keywords(kwargs, path + ".kwargs", spec, is_keras_tensor, read_keras_tensor);
  return spec;
}

// The arguments of one call (an inbound node), in either form.
CallSpec read_call(const json& node, const std::string& path) {
  CallSpec spec;
  if (node.is_array())
    spec = read_keras2_call(node, path);
  else if (node.is_object() && node.contains("args"))
    spec = read_keras3_call(node, path);
  else
    throw ConfigError(path,
                      "expected a Keras inbound node (a list of [name, 0, 0, {}], or "
                      "{\"args\": [...]}), got " +
                          node.dump());
  if (spec.inputs.empty()) throw ConfigError(path, "the call takes no tensor");
  return spec;
}

// input_layers / output_layers: a list of references [[name, 0, 0], ...], Keras 3's single
// [name, 0, 0], or Keras 3's dict {key: [name, 0, 0], ...} (a model built on dicts), whose
// tensors Keras orders by key, as nlohmann's objects are. Tandem names inputs and outputs by
// their layers, so a key must be its layer's name.
std::vector<CallRef> read_endpoints(ConfigObject& config, const char* key, const char* what) {
  const json& v = config.at(key);
  const std::string path = config.path_of(key);
  if (v.is_array() && v.size() == 3 && v[0].is_string()) return {read_history(v, path)};
  if (v.is_object() && !v.empty()) {
    std::vector<CallRef> refs;
    for (const auto& [name, ref] : v.items()) {
      const std::string at = json_path_join(path, name);
      refs.push_back(read_history(ref, at));
      if (refs.back().layer != name)
        throw ConfigError(at, "the key '" + name + "' names the layer '" + refs.back().layer +
                                  "': Tandem names a model's " + what +
                                  " by their layers, so rename the key '" + refs.back().layer +
                                  "' (and the loss, metrics and data keyed by it)");
    }
    return refs;
  }
  if (!v.is_array() || v.empty())
    throw ConfigError(path, std::string("expected a list of the model's ") + what);
  std::vector<CallRef> refs;
  for (std::size_t i = 0; i < v.size(); ++i) {
    refs.push_back(read_history(v[i], at_index(path, i)));
    for (std::size_t j = 0; j < i; ++j)
      if (refs[j].layer == refs[i].layer && refs[j].call == refs[i].call &&
          refs[j].tensor == refs[i].tensor)
        throw ConfigError(at_index(path, i), "names '" + refs[i].layer + "' a second time (also [" +
                                                 std::to_string(j) + "])");
  }
  return refs;
}

std::string entry_name(const json& entry, const std::string& path) {
  if (entry.contains("name") && entry["name"].is_string()) return entry["name"].get<std::string>();
  if (entry.contains("config") && entry["config"].is_object() && entry["config"].contains("name") &&
      entry["config"]["name"].is_string())
    return entry["config"]["name"].get<std::string>();
  throw ConfigError(path,
                    "a layer of a functional model needs a name (its inbound_nodes refer "
                    "to layers by name)");
}

// Kahn's order over the calls, taking the first ready call in config order each time.
std::vector<FunctionalCall> topological(const std::vector<FunctionalLayer>& layers,
                                        const std::vector<FunctionalInput>& inputs) {
  std::vector<FunctionalCall> order;
  std::map<CallRef, int> index_of;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    index_of[{inputs[i].name, 0}] = -1 - static_cast<int>(i);
  std::vector<std::vector<bool>> placed;
  std::size_t total = 0;
  for (const auto& l : layers) {
    placed.emplace_back(l.calls.size(), false);
    total += l.calls.size();
  }
  while (order.size() < total) {
    bool progress = false;
    for (std::size_t i = 0; i < layers.size() && !progress; ++i)
      for (std::size_t k = 0; k < layers[i].calls.size() && !progress; ++k) {
        if (placed[i][k]) continue;
        std::vector<int> inputs;
        for (const auto& ref : layers[i].calls[k].inputs) {
          auto it = index_of.find(ref);
          if (it == index_of.end()) break;
          inputs.push_back(it->second);
        }
        if (inputs.size() != layers[i].calls[k].inputs.size()) continue;
        placed[i][k] = true;
        index_of[{layers[i].name, static_cast<int>(k)}] = static_cast<int>(order.size());
        order.push_back({i, static_cast<int>(k), std::move(inputs)});
        progress = true;
      }
    if (!progress)
      for (std::size_t i = 0; i < layers.size(); ++i)
        for (std::size_t k = 0; k < layers[i].calls.size(); ++k)
          if (!placed[i][k])
            throw ConfigError(layers[i].path + ".inbound_nodes[" + std::to_string(k) + "]",
                              "layer '" + layers[i].name + "' depends on itself (a cycle)");
  }
  return order;
}

// The calls ordered by first call: layers renumbered in the order their first calls run.
void order_layers_by_first_call(FunctionalGraph& graph) {
  std::vector<int> new_index(graph.layers.size(), -1);
  std::vector<FunctionalLayer> ordered;
  for (auto& call : graph.calls) {
    if (new_index[call.layer] < 0) {
      new_index[call.layer] = static_cast<int>(ordered.size());
      ordered.push_back(graph.layers[call.layer]);
    }
    call.layer = static_cast<std::size_t>(new_index[call.layer]);
  }
  graph.layers = std::move(ordered);
}

// Keras 2's node index of the first call of a model nested as `entry`: a Functional model's own
// node is node 0 (tf.keras 2's _should_skip_first_node), and so is a Sequential model's that
// has an input (tf.keras 2 writes its InputLayer first among its layers; Keras 2.2 gave the first
// layer its batch_input_shape, and counted every nested model's own node). A Sequential model
// without an input is built by its first call, which is node 0 in tf.keras 2 (its own node 0 in
// Keras 2.2): where the references tell (a call numbered as many as the calls, or node 0), they
// decide.
int keras2_first_node(const FunctionalLayer& layer, const std::vector<FunctionalLayer>& called,
                      const std::vector<CallRef>& outputs) {
  const json& entry = *layer.entry;
  if (string_field(entry, "class_name") != "Sequential") return 1;
  const json& layers = entry["config"]["layers"];  // require_model_layers checked it
  const json& first = layers[0];
  const auto first_config = first.find("config");
  const bool declares_input =
      string_field(first, "class_name") == "InputLayer" ||
      (first_config != first.end() && first_config->is_object() &&
       (first_config->contains("batch_input_shape") || first_config->contains("input_shape")));
  if (declares_input) return 1;
  bool zero = false, past = false;
  const auto see = [&](const CallRef& ref) {
    if (ref.layer != layer.name) return;
    zero = zero || ref.call == 0;
    past = past || ref.call == static_cast<int>(layer.calls.size());
  };
  for (const auto& reader : called)
    for (const auto& call : reader.calls)
      for (const auto& ref : call.inputs) see(ref);
  for (const auto& ref : outputs) see(ref);
  return past && !zero ? 1 : 0;
}

// A nested model's entry holds a model: a config with a non-empty list of layers.
void require_model_layers(const json& entry, const std::string& path) {
  const auto config = entry.find("config");
  const bool has_layers = config != entry.end() && config->is_object() &&
                          config->contains("layers") && (*config)["layers"].is_array() &&
                          !(*config)["layers"].empty();
  if (!has_layers)
    throw ConfigError(path + ".config.layers",
                      "expected the list of layers of the model nested here (a " +
                          string_field(entry, "class_name") + " entry is a whole model)");
}

// Whether the layers' calls are written in Keras 3's form ({"args": ...}).
bool keras3_calls(const json& layers) {
  for (const json& entry : layers)
    if (entry.is_object() && entry.contains("inbound_nodes") && entry["inbound_nodes"].is_array())
      for (const json& node : entry["inbound_nodes"])
        if (node.is_object()) return true;
  return false;
}

// Where Keras starts numbering the calls of each nested model (read_functional_graph): the
// first node of its calls in inbound nodes and in output_layers.
struct FirstNodes {
  std::map<std::string, int> in_calls, in_outputs;
};

FirstNodes first_nodes(const std::vector<FunctionalLayer>& called,
                       const std::vector<CallRef>& outputs, bool keras3) {
  FirstNodes first;
  for (const auto& layer : called) {
    if (!layer.model) continue;
    const bool sequential = string_field(*layer.entry, "class_name") == "Sequential";
    const int keras2 = keras3 ? 0 : keras2_first_node(layer, called, outputs);
    first.in_calls[layer.name] = keras3 ? 0 : keras2;
    first.in_outputs[layer.name] = keras3 ? (sequential ? 0 : 1) : keras2;
  }
  return first;
}

// Every reference to a nested model's call, by a call or by output_layers, made to count from 0.
void count_calls_from_zero(std::vector<FunctionalLayer>& called, std::vector<CallRef>& outputs,
                           const std::string& outputs_path, const FirstNodes& first) {
  const auto renumber = [&](CallRef& ref, const std::map<std::string, int>& first_node,
                            const std::string& at) {
    const auto it = first_node.find(ref.layer);
    if (it == first_node.end() || it->second == 0) return;
    if (ref.call < it->second)
      throw ConfigError(at, "names node " + std::to_string(ref.call) + " of '" + ref.layer +
                                "', a nested model whose calls Keras numbers from " +
                                std::to_string(it->second) +
                                " here (node 0 is its own, from its "
                                "inputs to its outputs)");
    ref.call -= it->second;
  };
  for (auto& layer : called)
    for (std::size_t k = 0; k < layer.calls.size(); ++k)
      for (CallRef& ref : layer.calls[k].inputs)
        renumber(ref, first.in_calls, layer.path + ".inbound_nodes[" + std::to_string(k) + "]");
  for (std::size_t j = 0; j < outputs.size(); ++j)
    renumber(outputs[j], first.in_outputs, at_index(outputs_path, j));
}

// Every reference of every call names a layer of the model and one of its calls; an InputLayer's
// one output (the outputs of a nested model are model_graph.cpp's to check, a layer's the
// Model's, once it knows how many the layer gives).
void check_references(const std::vector<FunctionalLayer>& called,
                      const std::map<std::string, std::size_t>& calls_of_name,
                      const std::vector<FunctionalInput>& input_layers) {
  for (const auto& layer : called)
    for (std::size_t k = 0; k < layer.calls.size(); ++k)
      for (const auto& ref : layer.calls[k].inputs) {
        const std::string at = layer.path + ".inbound_nodes[" + std::to_string(k) + "]";
        auto it = calls_of_name.find(ref.layer);
        if (it == calls_of_name.end())
          throw ConfigError(at, "layer '" + layer.name + "' takes the output of '" + ref.layer +
                                    "', which is not a layer of the model");
        if (static_cast<std::size_t>(ref.call) >= it->second)
          throw ConfigError(at, "layer '" + layer.name + "' takes call " +
                                    std::to_string(ref.call) + " of '" + ref.layer +
                                    "', which is called " + std::to_string(it->second) +
                                    " time" + (it->second == 1 ? "" : "s"));
        const bool input =
            std::any_of(input_layers.begin(), input_layers.end(),
                        [&](const FunctionalInput& i) { return i.name == ref.layer; });
        if (ref.tensor < 0 || (ref.tensor != 0 && input))
          throw ConfigError(at, "layer '" + layer.name + "' takes output " +
                                    std::to_string(ref.tensor) + " of '" + ref.layer +
                                    "', which has one output (tensor index 0)");
      }
}

// The InputLayers in input_layers' order; each InputLayer of the config must be named there.
std::vector<FunctionalInput> read_inputs(ConfigObject& config,
                                         const std::vector<FunctionalInput>& input_layers) {
  const std::vector<CallRef> refs = read_endpoints(config, "input_layers", "inputs");
  std::vector<FunctionalInput> inputs;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const FunctionalInput* found = nullptr;
    for (const auto& input : input_layers)
      if (input.name == refs[i].layer) found = &input;
    if (!found)
      throw ConfigError(at_index(config.path_of("input_layers"), i),
                        "names '" + refs[i].layer + "', which is no InputLayer of the model");
    if (refs[i].call != 0)
      throw ConfigError(at_index(config.path_of("input_layers"), i),
                        "names node " + std::to_string(refs[i].call) + " of the InputLayer '" +
                            refs[i].layer + "', which has one node (node index 0)");
    if (refs[i].tensor != 0)
      throw ConfigError(at_index(config.path_of("input_layers"), i),
                        "names tensor " + std::to_string(refs[i].tensor) + " of the InputLayer '" +
                            refs[i].layer + "', which has one (tensor index 0)");
    inputs.push_back(*found);
  }
  for (const auto& input : input_layers) {
    bool named = false;
    for (const auto& ref : refs) named = named || ref.layer == input.name;
    if (!named)
      throw ConfigError(input.path, "InputLayer '" + input.name +
                                        "' is not among the model's input_layers");
  }
  return inputs;
}

// Every call leads to an output, and every input is read on the way to one.
void check_everything_used(const FunctionalGraph& graph,
                           const std::vector<FunctionalLayer>& called,
                           const std::string& outputs_path) {
  std::vector<bool> useful(graph.calls.size(), false), input_used(graph.inputs.size(), false);
  for (std::size_t out : graph.outputs) useful[out] = true;
  for (std::size_t c = graph.calls.size(); c-- > 0;) {
    if (!useful[c]) continue;
    for (int in : graph.calls[c].inputs)
      if (in < 0)
        input_used[static_cast<std::size_t>(-1 - in)] = true;
      else
        useful[static_cast<std::size_t>(in)] = true;
  }
  for (std::size_t c = 0; c < graph.calls.size(); ++c)
    if (!useful[c]) {
      const auto& layer = called[graph.calls[c].layer];
      const bool several = layer.calls.size() > 1;
      throw ConfigError(several ? layer.path + ".inbound_nodes[" +
                                      std::to_string(graph.calls[c].call) + "]"
                                : layer.path,
                        (several ? "call " + std::to_string(graph.calls[c].call) + " of layer '" +
                                       layer.name + "'"
                                 : "layer '" + layer.name + "'") +
                            " does not lead to an output of the model (" + outputs_path + ")");
    }
  for (std::size_t i = 0; i < graph.inputs.size(); ++i)
    if (!input_used[i])
      throw ConfigError(graph.inputs[i].path,
                        "InputLayer '" + graph.inputs[i].name + "' does not lead to an output");
}

}  // namespace

bool is_model_entry(const json& entry) {
  const std::string cls = string_field(entry, "class_name");
  return cls == "Sequential" || cls == "Functional" || cls == "Model";
}

void refuse_unbuildable_layer(const json& entry, const std::string& path) {
  if (!entry.is_object()) return;  // the caller says what is wrong
  const std::string cls = string_field(entry, "class_name");
  const auto config = entry.find("config");
  const std::string name = config == entry.end() ? "" : string_field(*config, "name");
  const std::string layer = name.empty() ? "this layer" : "layer '" + name + "'";
  if (cls == "Lambda")
    throw ConfigError(path + ".class_name",
                      layer +
                          " is a Lambda: Python code, which Tandem does not run; write it "
                          "with Tandem's layers (docs/config.md lists them). A Keras "
                          "multi_gpu_model file's wrapper slices the batch with Lambdas: give "
                          "its nested template's config as the model, and --weights FILE loads "
                          "the template's weights from the wrapper's file");
  // Keras 3: an operation of keras.ops called on a Keras tensor is an entry of its module,
  // keras.src.ops.numpy or .nn, ..., not keras.layers (nn/function_layers.hpp reads `x + y`,
  // `x * c`, the activations, x[...]; these are the others).
  const std::string module = string_field(entry, "module");
  if (module.rfind("keras.src.ops", 0) == 0 || module.rfind("keras.ops", 0) == 0)
    throw ConfigError(path + ".class_name",
                      layer + " is Keras' operation " + module + "." + cls +
                          " called on a Keras tensor, not a layer, which Tandem does not run; "
                          "write it with the Keras layer that computes it (docs/config.md lists "
                          "Tandem's layers and the operations it reads)");
}

FunctionalGraph read_functional_graph(ConfigObject& config) {
  const json& layers = config.at("layers");
  const std::string layers_path = config.path_of("layers");
  if (!layers.is_array() || layers.empty())
    throw ConfigError(layers_path, "expected a non-empty list of layers");
  FunctionalGraph graph;
  std::map<std::string, std::string> path_of_name;
  std::map<std::string, std::size_t> calls_of_name;
  std::vector<FunctionalLayer> called;
  std::vector<FunctionalInput> input_layers;  // in config order
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string path = at_index(layers_path, i);
    const json& entry = layers[i];
    if (!entry.is_object()) throw ConfigError(path, "expected a layer object");
    refuse_unbuildable_layer(entry, path);
    const std::string name = entry_name(entry, path);
    if (!path_of_name.emplace(name, path).second)
      throw ConfigError(path,
                        "duplicate layer name '" + name + "' (also " + path_of_name[name] + ")");
    const json nodes = entry.value("inbound_nodes", json::array());
    if (string_field(entry, "class_name") == "InputLayer") {
      if (!nodes.is_array() || !nodes.empty())
        throw ConfigError(path + ".inbound_nodes",
                          "InputLayer '" + name + "' is called on nothing (Keras writes []), got " +
                              nodes.dump());
      input_layers.push_back({name, &entry, path});
      calls_of_name[name] = 1;
      continue;
    }
    if (!nodes.is_array() || nodes.empty())
      throw ConfigError(path + ".inbound_nodes", "layer '" + name + "' is not called on anything");
    FunctionalLayer layer{&entry, path, name, {}, is_model_entry(entry)};
    if (layer.model) require_model_layers(entry, path);
    for (std::size_t k = 0; k < nodes.size(); ++k)
      layer.calls.push_back(read_call(nodes[k], path + ".inbound_nodes[" + std::to_string(k) + "]"));
    calls_of_name[name] = nodes.size();
    called.push_back(std::move(layer));
  }
  if (input_layers.empty()) throw ConfigError(layers_path, "the model has no InputLayer");
  std::vector<CallRef> outputs = read_endpoints(config, "output_layers", "outputs");
  count_calls_from_zero(called, outputs, config.path_of("output_layers"),
                        first_nodes(called, outputs, keras3_calls(layers)));
  check_references(called, calls_of_name, input_layers);
  graph.inputs = read_inputs(config, input_layers);
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const std::string at = at_index(config.path_of("output_layers"), j);
    for (const auto& input : input_layers)
      if (outputs[j].layer == input.name)
        throw ConfigError(at, "output '" + input.name + "' is an input: no layer computes it");
    if (!calls_of_name.count(outputs[j].layer) ||
        static_cast<std::size_t>(outputs[j].call) >= calls_of_name[outputs[j].layer])
      throw ConfigError(at, "names call " + std::to_string(outputs[j].call) + " of '" +
                                outputs[j].layer + "', which the model does not have");
    if (outputs[j].tensor < 0)
      throw ConfigError(at, "names output " + std::to_string(outputs[j].tensor) + " of '" +
                                outputs[j].layer + "': tensor indices count from 0");
  }
  graph.calls = topological(called, graph.inputs);
  for (const CallRef& out : outputs)
    for (std::size_t c = 0; c < graph.calls.size(); ++c)
      if (called[graph.calls[c].layer].name == out.layer && graph.calls[c].call == out.call)
        graph.outputs.push_back(c);
  graph.output_refs = std::move(outputs);
  check_everything_used(graph, called, config.path_of("output_layers"));
  graph.layers = std::move(called);
  order_layers_by_first_call(graph);
  return graph;
}

FunctionalGraph sequential_graph(const json& layers, const std::string& path) {
  if (!layers.is_array() || layers.empty())
    throw ConfigError(path, "expected a non-empty list of layers");
  FunctionalGraph graph;
  std::map<std::string, std::string> path_of_name;
  CallRef previous;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string at = at_index(path, i);
    const json& entry = layers[i];
    if (!entry.is_object()) throw ConfigError(at, "expected a layer object");
    const bool input = string_field(entry, "class_name") == "InputLayer";
    if (input && i != 0)
      throw ConfigError(at + ".class_name", "an InputLayer must be the first layer");
    if (i == 0 && !input) graph.inputs.push_back({"", nullptr, path});
    refuse_unbuildable_layer(entry, at);
    if (is_model_entry(entry)) require_model_layers(entry, at);
    const json& config = entry.contains("config") ? entry["config"] : entry;
    if (!entry.contains("name") && !(config.is_object() && config.contains("name")))
      throw ConfigError(at + ".config.name",
                        "a layer of a Sequential model that holds whole models (or is one of "
                        "them) needs a name, as Keras writes one for every layer");
    const std::string name = entry_name(entry, at);
    if (!path_of_name.emplace(name, at).second)
      throw ConfigError(at,
                        "duplicate layer name '" + name + "' (also " + path_of_name[name] + ")");
    if (input) {
      graph.inputs.push_back({name, &entry, at});
      previous = {name, 0, 0};
      continue;
    }
    FunctionalLayer layer{&entry, at, name, {}, is_model_entry(entry)};
    CallSpec spec;
    spec.inputs = {previous};
    spec.names = {""};
    layer.calls.push_back(std::move(spec));
    const int reads = graph.calls.empty() ? -1 : static_cast<int>(graph.calls.size()) - 1;
    graph.calls.push_back({graph.layers.size(), 0, {reads}});
    graph.layers.push_back(std::move(layer));
    previous = {name, 0, 0};
  }
  if (graph.layers.empty()) throw ConfigError(path, "the model has no layers");
  graph.outputs = {graph.calls.size() - 1};
  graph.output_refs = {previous};
  return graph;
}

}  // namespace tandem::nn
