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
// Keras 3's input_layers/output_layers), whose node and tensor must be 0 (each layer is called
// once and has one output).
std::string read_history(const json& ref, const std::string& path) {
  if (!ref.is_array() || ref.size() < 3 || !ref[0].is_string() || !ref[1].is_number_integer() ||
      !ref[2].is_number_integer())
    throw ConfigError(path,
                      "expected [\"layer name\", node index, tensor index], got " + ref.dump());
  if (ref[1].get<std::int64_t>() != 0)
    throw ConfigError(path,
                      "layer '" + ref[0].get<std::string>() +
                          "' is called more than once "
                          "(a shared layer): Tandem runs each layer of a functional model once");
  if (ref[2].get<std::int64_t>() != 0)
    throw ConfigError(path, "layer '" + ref[0].get<std::string>() + "' has one output, not " +
                                std::to_string(ref[2].get<std::int64_t>() + 1));
  if (ref.size() > 3 && !(ref[3].is_object() && ref[3].empty()) && !ref[3].is_null())
    throw ConfigError(at_index(path, 3), "call arguments are not supported, got " + ref[3].dump());
  return ref[0].get<std::string>();
}

// A Keras 3 tensor argument: {"class_name": "__keras_tensor__", "config": {"keras_history": ...}}.
std::string read_keras_tensor(const json& arg, const std::string& path) {
  if (!arg.is_object() || arg.value("class_name", "") != "__keras_tensor__" ||
      !arg.contains("config") || !arg["config"].is_object() ||
      !arg["config"].contains("keras_history"))
    throw ConfigError(path, "expected a __keras_tensor__ with a keras_history, got " + arg.dump());
  return read_history(arg["config"]["keras_history"], path + ".config.keras_history");
}

// The names one call (an inbound node) takes, in either form.
std::vector<std::string> read_call(const json& node, const std::string& path) {
  std::vector<std::string> names;
  if (node.is_array()) {  // Keras 2: a list of references
    for (std::size_t i = 0; i < node.size(); ++i)
      names.push_back(read_history(node[i], at_index(path, i)));
  } else if (node.is_object() && node.contains("args")) {  // Keras 3
    const json& args = node["args"];
    if (!args.is_array() || args.size() != 1)
      throw ConfigError(path + ".args",
                        "expected one argument (a tensor, or a list of tensors "
                        "for a merging layer), got " +
                            args.dump());
    const json& arg = args[0];
    if (arg.is_array()) {
      for (std::size_t i = 0; i < arg.size(); ++i)
        names.push_back(read_keras_tensor(arg[i], at_index(path + ".args[0]", i)));
    } else {
      names.push_back(read_keras_tensor(arg, path + ".args[0]"));
    }
    if (node.contains("kwargs") && !(node["kwargs"].is_object() && node["kwargs"].empty()))
      throw ConfigError(path + ".kwargs",
                        "call arguments are not supported, got " + node["kwargs"].dump());
  } else {
    throw ConfigError(path,
                      "expected a Keras inbound node (a list of [name, 0, 0, {}], or "
                      "{\"args\": [...]}), got " +
                          node.dump());
  }
  if (names.empty()) throw ConfigError(path, "the call takes no tensor");
  return names;
}

// input_layers / output_layers: one reference, as [[name, 0, 0]] or Keras 3's [name, 0, 0].
std::string read_endpoint(ConfigObject& config, const char* key, const char* what) {
  const json& v = config.at(key);
  const std::string path = config.path_of(key);
  if (v.is_array() && v.size() == 3 && v[0].is_string()) return read_history(v, path);
  if (!v.is_array() || v.empty())
    throw ConfigError(path, std::string("expected a list of the model's ") + what);
  if (v.size() != 1)
    throw ConfigError(path, "the model has " + std::to_string(v.size()) + " " + what +
                                "; Tandem runs functional models with one input and one output");
  return read_history(v[0], at_index(path, 0));
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

// Kahn's order, taking the first layer of the config whose inputs are ready each time.
std::vector<FunctionalLayer> topological(std::vector<FunctionalLayer> layers,
                                         const std::string& input_name) {
  std::vector<FunctionalLayer> order;
  std::set<std::string> ready{input_name};
  std::vector<bool> placed(layers.size(), false);
  while (order.size() < layers.size()) {
    bool progress = false;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (placed[i]) continue;
      bool inputs_ready = true;
      for (const auto& n : layers[i].inbound) inputs_ready = inputs_ready && ready.count(n);
      if (!inputs_ready) continue;
      placed[i] = true;
      ready.insert(layers[i].name);
      order.push_back(layers[i]);
      progress = true;
      break;
    }
    if (!progress)
      for (std::size_t i = 0; i < layers.size(); ++i)
        if (!placed[i])
          throw ConfigError(layers[i].path + ".inbound_nodes",
                            "layer '" + layers[i].name + "' depends on itself (a cycle)");
  }
  return order;
}

}  // namespace

FunctionalGraph read_functional_graph(ConfigObject& config) {
  const json& layers = config.at("layers");
  const std::string layers_path = config.path_of("layers");
  if (!layers.is_array() || layers.empty())
    throw ConfigError(layers_path, "expected a non-empty list of layers");
  FunctionalGraph graph;
  std::map<std::string, std::string> path_of_name;
  std::vector<FunctionalLayer> called;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string path = at_index(layers_path, i);
    const json& entry = layers[i];
    if (!entry.is_object()) throw ConfigError(path, "expected a layer object");
    const std::string name = entry_name(entry, path);
    if (!path_of_name.emplace(name, path).second)
      throw ConfigError(path,
                        "duplicate layer name '" + name + "' (also " + path_of_name[name] + ")");
    const json nodes = entry.value("inbound_nodes", json::array());
    if (entry.value("class_name", "") == "InputLayer") {
      if (!graph.input_name.empty())
        throw ConfigError(path,
                          "a second InputLayer: Tandem runs functional models with one "
                          "input");
      graph.input_name = name, graph.input_entry = &entry, graph.input_path = path;
      continue;
    }
    if (!nodes.is_array() || nodes.empty())
      throw ConfigError(path + ".inbound_nodes", "layer '" + name + "' is not called on anything");
    if (nodes.size() > 1)
      throw ConfigError(path + ".inbound_nodes",
                        "layer '" + name + "' is called " + std::to_string(nodes.size()) +
                            " times (a shared layer): Tandem runs each layer once");
    called.push_back({&entry, path, name, read_call(nodes[0], path + ".inbound_nodes[0]")});
  }
  if (graph.input_name.empty()) throw ConfigError(layers_path, "the model has no InputLayer");
  for (const auto& layer : called)
    for (std::size_t j = 0; j < layer.inbound.size(); ++j)
      if (!path_of_name.count(layer.inbound[j]))
        throw ConfigError(layer.path + ".inbound_nodes[0]",
                          "layer '" + layer.name + "' takes the output of '" + layer.inbound[j] +
                              "', which is not a layer of the model");
  const std::string input = read_endpoint(config, "input_layers", "inputs");
  if (input != graph.input_name)
    throw ConfigError(config.path_of("input_layers"),
                      "names '" + input + "', but the InputLayer is '" + graph.input_name + "'");
  const std::string output = read_endpoint(config, "output_layers", "outputs");
  if (output == graph.input_name)
    throw ConfigError(config.path_of("output_layers"), "the output is the input: no layer runs");
  graph.layers = topological(std::move(called), graph.input_name);
  // Every layer must lead to the output: the output is then the one layer nobody reads.
  std::set<std::string> useful{output};
  for (std::size_t i = graph.layers.size(); i-- > 0;)
    if (useful.count(graph.layers[i].name))
      useful.insert(graph.layers[i].inbound.begin(), graph.layers[i].inbound.end());
  for (const auto& layer : graph.layers)
    if (!useful.count(layer.name))
      throw ConfigError(layer.path, "layer '" + layer.name +
                                        "' does not lead to the model's "
                                        "output '" +
                                        output + "' (output_layers)");
  if (!useful.count(graph.input_name))
    throw ConfigError(graph.input_path, "the InputLayer does not lead to the output");
  // Every other layer leads to the output, so the output comes last in topological order.
  return graph;
}

}  // namespace tandem::nn
