#include "nn/model_graph.hpp"

#include <algorithm>
#include <map>

#include "nn/dtype_policy.hpp"
#include "nn/keras_layer_order.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

// The JSON path of call k of a layer: its inbound node; a Sequential model's layer has none,
// its entry is its call.
std::string call_path(const FunctionalLayer& layer, std::size_t k) {
  return layer.entry->contains("inbound_nodes")
             ? layer.path + ".inbound_nodes[" + std::to_string(k) + "]"
             : layer.path;
}

std::string keras_tensor_name(const CallRef& ref) {
  return ref.layer + "[" + std::to_string(ref.call) + "][" + std::to_string(ref.tensor) + "]";
}

// Reads a model and the models nested in it, then emits the calls of its layers, a nested
// model's calls replaced by those of its own layers on the values passed to it.
class Flattener {
 public:
  // Reads the model (or nested model) whose config is `cfg` as scope `scope`; returns its index.
  std::size_t read_scope(ConfigObject& cfg, bool sequential, Scope scope);
  // Emits one call of scope `s` on `args` (a value per input of the scope; `path` is the call's
  // JSON path) in the mode `training` says (none: the model's): the values of its outputs.
  std::vector<ValueRef> emit(std::size_t s, const std::vector<ValueRef>& args,
                             const std::string& path, std::optional<bool> training);
  // Every emitted call leads to an output of the model.
  void check_every_call_used() const;
  // The scopes' members with their ModelGraph indices.
  void resolve_members();
  // Emits the model (scope 0, read first) on its inputs.
  void emit_model(const std::string& path);
  ModelGraph graph;

 private:
  // One level: a scope's own graph, and per layer of it its scope when it is a nested model
  // (else -1), its members (by index into the level's layers; an input as -1 - i) and per
  // layer its first emission's output values.
  struct Level {
    FunctionalGraph graph;
    std::vector<int> child;
    std::vector<int> members;
    std::vector<std::vector<std::vector<ValueRef>>> outputs;
  };
  std::size_t read_nested(const FunctionalLayer& layer, std::size_t parent);
  void check_nested_calls(const FunctionalGraph& level, std::size_t l, std::size_t child,
                          const std::string& outputs_path) const;
  std::size_t flat_layer(const FunctionalLayer& layer, std::size_t scope);
  std::vector<Level> levels_;
  std::map<const json*, std::size_t> flat_of_entry_;
  std::map<std::string, std::string> path_of_layer_;  // every layer's name in the model
};

std::size_t Flattener::read_scope(ConfigObject& cfg, bool sequential, Scope scope) {
  const std::size_t s = graph.scopes.size();
  graph.scopes.push_back(std::move(scope));
  levels_.emplace_back();
  Level level;
  level.graph = sequential ? sequential_graph(cfg.at("layers"), cfg.path_of("layers"))
                           : read_functional_graph(cfg);
  level.child.assign(level.graph.layers.size(), -1);
  for (std::size_t l = 0; l < level.graph.layers.size(); ++l) {
    const FunctionalLayer& layer = level.graph.layers[l];
    if (layer.model) {
      const std::size_t child = read_nested(layer, s);
      level.child[l] = static_cast<int>(child);
      check_nested_calls(level.graph, l, child, cfg.path_of("output_layers"));
      continue;
    }
    const auto [it, fresh] = path_of_layer_.emplace(layer.name, layer.path);
    if (!fresh)
      throw ConfigError(layer.path + ".name",
                        "layer '" + layer.name + "' has the name of the layer at " + it->second +
                            ": Tandem's layers need names unique in the whole model, the "
                            "models nested in it included (Keras asks it only of each model's "
                            "own layers); rename one");
  }
  if (sequential) {
    for (std::size_t l = 0; l < level.graph.layers.size(); ++l)
      level.members.push_back(static_cast<int>(l));
  } else {
    level.members =
        keras_layer_order(level.graph.inputs.size(), level.graph.calls, level.graph.outputs);
  }
  level.outputs.resize(level.graph.layers.size());
  levels_[s] = std::move(level);
  return s;
}

std::size_t Flattener::read_nested(const FunctionalLayer& layer, std::size_t parent) {
  ConfigObject entry(*layer.entry, layer.path);
  const std::string cls = entry.get_string("class_name");
  entry.ignore({"module", "registered_name", "build_config", "inbound_nodes", "name"});
  ConfigObject cfg = entry.get_object("config");
  entry.finish();
  const std::string own = cfg.get_string("name", layer.name);
  if (own != layer.name)
    throw ConfigError(cfg.path_of("name"), "the entry names the model '" + layer.name +
                                               "' but its config '" + own + "'");
  Scope scope;
  scope.name = layer.name;
  scope.class_name = cls == "Sequential" ? "Sequential" : "Functional";
  scope.parent = static_cast<int>(parent);
  scope.trainable = cfg.get_bool("trainable", true) && graph.scopes[parent].trainable;
  read_dtype_policy(cfg);  // checked; each layer's own policy decides how it computes
  cfg.ignore({"build_input_shape"});
  const std::size_t s = read_scope(cfg, cls == "Sequential", std::move(scope));
  cfg.finish();
  return s;
}

// A nested model is called on a tensor per input (its first argument: one, or a list), nothing
// else; what reads it takes outputs it has.
void Flattener::check_nested_calls(const FunctionalGraph& level, std::size_t l, std::size_t child,
                                   const std::string& outputs_path) const {
  const FunctionalLayer& model = level.layers[l];
  const FunctionalGraph& inner = levels_[child].graph;
  for (std::size_t k = 0; k < model.calls.size(); ++k) {
    const CallSpec& spec = model.calls[k];
    const std::string at = call_path(model, k);
    for (const std::string& n : spec.names)
      if (!n.empty())
        throw ConfigError(at, "model '" + model.name + "' is called with the tensor argument '" +
                                  n + "': a nested model takes its inputs as its first argument");
    if (!spec.options.empty())
      throw ConfigError(at, "model '" + model.name + "' is called with the arguments " +
                                spec.options.dump() +
                                ": Tandem passes a nested model its inputs only");
    if (spec.inputs.size() != inner.inputs.size())
      throw ConfigError(at, "model '" + model.name + "' has " +
                                std::to_string(inner.inputs.size()) + " input" +
                                (inner.inputs.size() == 1 ? "" : "s") + ", but this call passes " +
                                std::to_string(spec.inputs.size()));
  }
  const auto check = [&](const CallRef& ref, const std::string& at) {
    if (ref.layer == model.name && static_cast<std::size_t>(ref.tensor) >= inner.outputs.size())
      throw ConfigError(at, "takes output " + std::to_string(ref.tensor) + " of model '" +
                                model.name + "', which has " +
                                std::to_string(inner.outputs.size()) + " output" +
                                (inner.outputs.size() == 1 ? "" : "s"));
  };
  for (const FunctionalLayer& reader : level.layers)
    for (std::size_t k = 0; k < reader.calls.size(); ++k)
      for (const CallRef& ref : reader.calls[k].inputs) check(ref, call_path(reader, k));
  for (std::size_t j = 0; j < level.output_refs.size(); ++j)
    check(level.output_refs[j], outputs_path + "[" + std::to_string(j) + "]");
}

std::size_t Flattener::flat_layer(const FunctionalLayer& layer, std::size_t scope) {
  const auto [it, fresh] = flat_of_entry_.emplace(layer.entry, graph.layers.size());
  if (fresh) {
    FlatLayer flat;
    flat.entry = layer.entry;
    flat.path = layer.path;
    flat.name = layer.name;
    flat.scope = scope;
    flat.trainable = graph.scopes[scope].trainable;
    graph.layers.push_back(std::move(flat));
  }
  return it->second;
}

std::vector<ValueRef> Flattener::emit(std::size_t s, const std::vector<ValueRef>& args,
                                      const std::string& path, std::optional<bool> training) {
  Level& level = levels_[s];
  const FunctionalGraph& g = level.graph;
  for (std::size_t i = 0; i < g.inputs.size(); ++i)
    if (g.inputs[i].entry)
      graph.input_checks.push_back({args[i].call, g.inputs[i].entry, g.inputs[i].path,
                                    graph.scopes[s].name, path, args[i].part});
  // Per call, its outputs' values: a nested model's (checked against its outputs), or a layer's
  // call whose output a reference's tensor index picks (checked by the Model, which knows how
  // many the layer gives).
  std::vector<std::vector<ValueRef>> values(g.calls.size());
  const auto value_of = [&](int src, int tensor) {
    const auto c = static_cast<std::size_t>(src);
    if (level.child[g.calls[c].layer] >= 0) return values[c][static_cast<std::size_t>(tensor)];
    return ValueRef{values[c][0].call, tensor};
  };
  for (std::size_t c = 0; c < g.calls.size(); ++c) {
    const FunctionalCall& call = g.calls[c];
    const FunctionalLayer& layer = g.layers[call.layer];
    const CallSpec& spec = layer.calls[static_cast<std::size_t>(call.call)];
    std::vector<ValueRef> in;
    for (std::size_t j = 0; j < call.inputs.size(); ++j) {
      const int src = call.inputs[j];
      in.push_back(src < 0 ? args[static_cast<std::size_t>(-1 - src)]
                           : value_of(src, spec.inputs[j].tensor));
    }
    const std::string at = call_path(layer, static_cast<std::size_t>(call.call));
    // A call's own `training` wins over its nested model's call's, as in tf.keras 2.
    const std::optional<bool> mode = spec.training ? spec.training : training;
    if (level.child[call.layer] >= 0) {
      values[c] = emit(static_cast<std::size_t>(level.child[call.layer]), in, at, mode);
    } else {
      const std::size_t flat = flat_layer(layer, s);
      FlatLayer& f = graph.layers[flat];
      FunctionalCall emitted{flat, static_cast<int>(f.calls.size()), {}, mode};
      for (const ValueRef& v : in) {
        emitted.inputs.push_back(v.call);
        emitted.input_parts.push_back(v.part);
      }
      graph.calls.push_back(std::move(emitted));
      f.calls.push_back(spec);
      f.call_paths.push_back(at);
      values[c] = {{static_cast<int>(graph.calls.size()) - 1, 0}};
    }
    auto& recorded = levels_[s].outputs[call.layer];
    if (recorded.size() == static_cast<std::size_t>(call.call)) recorded.push_back(values[c]);
  }
  std::vector<ValueRef> out;
  for (std::size_t j = 0; j < g.outputs.size(); ++j)
    out.push_back(value_of(static_cast<int>(g.outputs[j]), g.output_refs[j].tensor));
  return out;
}

void Flattener::check_every_call_used() const {
  std::vector<bool> useful(graph.calls.size(), false);
  for (std::size_t k : graph.outputs) useful[k] = true;
  for (std::size_t k = graph.calls.size(); k-- > 0;)
    if (useful[k])
      for (int in : graph.calls[k].inputs)
        if (in >= 0) useful[static_cast<std::size_t>(in)] = true;
  for (std::size_t k = 0; k < graph.calls.size(); ++k) {
    if (useful[k]) continue;
    const FlatLayer& layer = graph.layers[graph.calls[k].layer];
    const std::string& model = graph.scopes[layer.scope].name;
    throw ConfigError(layer.call_paths[static_cast<std::size_t>(graph.calls[k].call)],
                      "layer '" + layer.name + "' of the nested model '" + model +
                          "' computes an output of '" + model +
                          "' that leads to no output of this model: Tandem runs only what "
                          "does (use every output of the nested model, or leave it out of "
                          "the nested model's output_layers)");
  }
}

void Flattener::resolve_members() {
  for (std::size_t s = 0; s < levels_.size(); ++s) {
    const Level& level = levels_[s];
    for (int m : level.members) {
      ScopeMember member;
      if (m < 0) {
        member.kind = ScopeMember::Kind::input;
        member.index = static_cast<std::size_t>(-1 - m);
      } else {
        const auto l = static_cast<std::size_t>(m);
        const FunctionalLayer& layer = level.graph.layers[l];
        member.kind = layer.model ? ScopeMember::Kind::model : ScopeMember::Kind::layer;
        member.index =
            layer.model ? static_cast<std::size_t>(level.child[l]) : flat_of_entry_.at(layer.entry);
        for (const CallSpec& spec : layer.calls) {
          std::vector<std::string> names;
          for (const CallRef& ref : spec.inputs)  // a Sequential model's unnamed input: none
            if (!ref.layer.empty()) names.push_back(keras_tensor_name(ref));
          member.connected.push_back(std::move(names));
        }
        member.outputs = level.outputs[l];
      }
      graph.scopes[s].members.push_back(std::move(member));
    }
  }
}

void Flattener::emit_model(const std::string& path) {
  const FunctionalGraph& g = levels_[0].graph;
  graph.inputs = g.inputs;
  std::vector<ValueRef> args;
  for (std::size_t i = 0; i < g.inputs.size(); ++i) args.push_back({-1 - static_cast<int>(i), 0});
  // The model's own InputLayers are its inputs, not checks.
  const std::vector<ValueRef> outputs = emit(0, args, path, std::nullopt);
  graph.input_checks.erase(graph.input_checks.begin(),
                           graph.input_checks.begin() +
                               static_cast<std::ptrdiff_t>(std::count_if(
                                   g.inputs.begin(), g.inputs.end(),
                                   [](const FunctionalInput& in) { return in.entry != nullptr; })));
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (outputs[j].call < 0)
      throw ConfigError(path, "output " + std::to_string(j) + " of the model is one of its inputs");
    graph.outputs.push_back(static_cast<std::size_t>(outputs[j].call));
    graph.output_parts.push_back(outputs[j].part);
    graph.output_layers.push_back(g.output_refs[j].layer);
  }
}

}  // namespace

ModelGraph read_model_graph(ConfigObject& config, bool sequential, const std::string& name) {
  Flattener f;
  Scope root;
  root.name = name;
  root.class_name = sequential ? "Sequential" : "Functional";
  f.read_scope(config, sequential, std::move(root));
  f.emit_model(config.path());
  f.check_every_call_used();
  f.resolve_members();
  return std::move(f.graph);
}

}  // namespace tandem::nn
