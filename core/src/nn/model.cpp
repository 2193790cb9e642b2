#include "tandem/model.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "nn/dtype_policy.hpp"
#include "nn/function_layers.hpp"
#include "nn/functional_config.hpp"
#include "nn/input_lengths.hpp"
#include "nn/keras3_weight_paths.hpp"
#include "nn/keras_generation.hpp"
#include "nn/keras_layer_order.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/layer_registry.hpp"
#include "nn/model_graph.hpp"
#include "nn/regularizer.hpp"
#include "nn/sequence_masks.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "util/config_object.hpp"
#include "util/precision.hpp"
#include "util/warn_once.hpp"

namespace tandem {

namespace {

using nlohmann::json;
using nn::policy_name_of;
using nn::read_dtype_policy;

std::string indexed(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// A layer's name is an HDF5 group of its checkpoints (Keras' layout): refused before training
// when no file could hold it, not when the final checkpoint is written.
constexpr std::size_t kMaxLayerNameBytes = 1024;
void require_storable_layer_name(const std::string& name, const std::string& path) {
  if (name.empty() || name == "." || name == ".." ||
      name.find_first_of(std::string("/\0", 2)) != std::string::npos)
    throw ConfigError(path,
                      "layer names must be non-empty, not '.' or '..', and contain no '/' "
                      "and no NUL character");
  if (name.size() > kMaxLayerNameBytes)
    throw ConfigError(path, "a layer name of " + std::to_string(name.size()) + " bytes; at most " +
                                std::to_string(kMaxLayerNameBytes) +
                                " (it names the layer's group in checkpoints)");
}

// A weight read from a file holds no NaN or Inf: such weights come from a run that diverged, and
// training from them stops at once with a NaN loss that says nothing of the file.
void require_finite_weight(const Tensor& w, const std::string& what) {
  const float* v = w.data();
  for (std::int64_t k = 0; k < w.size(); ++k)
    if (!std::isfinite(v[k]))
      throw DataError(what + " holds " + (std::isnan(v[k]) ? "NaN" : "Inf") + " (at value " +
                      std::to_string(k) + " of " + std::to_string(w.size()) +
                      "): the weights of a run that diverged" +
                      std::string(std::isnan(v[k]) ? "" : ", or a value beyond float32's range") +
                      "; load a checkpoint from before");
}

// The per-sample shape at `key`: a list of positive dimensions or nulls (kAnyLength: the data's
// length, nn/input_lengths.hpp), after a batch axis (any value, null) when `has_batch`.
Shape shape_at(ConfigObject& c, const std::string& key, bool has_batch) {
  auto dims = c.get_int_list(key, true);
  if (has_batch) {
    if (dims.empty()) throw ConfigError(c.path_of(key), "expected [batch, dims...]");
    dims.erase(dims.begin());
  }
  Shape s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i]) {
      s.push_back(kAnyLength);
      continue;
    }
    if (*dims[i] <= 0 || *dims[i] > kMaxConfigSize)
      throw ConfigError(indexed(c.path_of(key), i + (has_batch ? 1 : 0)),
                        "expected a positive dimension up to " + std::to_string(kMaxConfigSize) +
                            ", or null for the data's length");
    s.push_back(*dims[i]);
  }
  return s;
}

// A per-sample shape from input_shape (no batch) or batch_input_shape/batch_shape (with batch).
std::optional<Shape> read_input_shape(ConfigObject& c) {
  const auto to_shape = [&](const std::string& key, bool has_batch) {
    return shape_at(c, key, has_batch);
  };
  // Keras 2 writes batch_input_shape, Keras 3 batch_shape, a user input_shape or shape: given
  // more than one, they must agree (the last one read would win unseen).
  std::optional<Shape> shape;
  std::string given_by;
  const auto take = [&](const char* key, bool has_batch) {
    if (!c.has(key)) return c.ignore({key});
    const Shape s = to_shape(key, has_batch);
    if (shape && *shape != s)
      throw ConfigError(c.path_of(key), "gives the input shape " + shape_to_string(s) + ", but " +
                                            given_by + " gives " + shape_to_string(*shape));
    shape = s;
    given_by = key;
  };
  take("batch_input_shape", true);
  take("batch_shape", true);
  take("input_shape", false);
  take("shape", false);
  c.ignore({"batch_size"});
  return shape;
}

// A shape a layer's config declares: input_shape and the batch forms, or Keras 2's legacy
// `input_dim` of a layer that reads vectors (Embedding's input_dim is its vocabulary).
struct DeclaredShape {
  std::optional<Shape> shape;
  bool by_input_dim = false;  // only input_dim declared it
  // The layer's activity_regularizer (config null: none).
  struct {
    float l1 = 0, l2 = 0;
    json config;
  } activity;
  json dtype_policy;  // a mixed dtype policy as the config gave it (null: float32)
};

// Makes one (non-input) layer from its config entry: the registry's factory, a name (the
// entry's, or the class's default numbered as Keras numbers them), `trainable`, the dtype check.
// `declared` receives a shape the entry's config declares, if any.
// `keras2`: the model config names Keras 2, whose definitions the layer then follows
// (nn/keras_generation.hpp).
std::unique_ptr<Layer> make_layer(const json& entry_json, const std::string& path,
                                  std::map<std::string, int>& name_counts,
                                  std::set<std::string>& used_names, DeclaredShape& declared,
                                  bool keras2) {
  nn::refuse_unbuildable_layer(entry_json, path);
  ConfigObject entry(entry_json, path);
  const std::string cls = entry.get_string("class_name");
  entry.ignore({"module", "registered_name", "build_config", "inbound_nodes", "name"});
  json empty = json::object();
  const json* cfg_json = entry.find("config");
  ConfigObject lc(cfg_json ? *cfg_json : empty, entry.path_of("config"));
  entry.finish();
  const auto& registry = nn::layer_registry();
  auto it = registry.find(cls);
  if (it == registry.end()) {
    std::string known;
    for (const auto& [k, _] : registry) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError(entry.path_of("class_name"),
                      "unknown layer class '" + cls + "' (known: InputLayer, " + known + ")");
  }
  std::string name;
  if (lc.has("name")) {
    name = lc.get_string("name");
  } else {
    const int n = name_counts[it->second.default_name]++;
    name = it->second.default_name;
    if (n > 0) name.append("_").append(std::to_string(n));  // (GCC 12 misjudges "_" + s)
  }
  require_storable_layer_name(name, lc.path_of("name"));
  if (!used_names.insert(name).second)
    throw ConfigError(lc.path_of("name"), "duplicate layer name '" + name + "'");
  const bool trainable = lc.get_bool("trainable", true);
  declared.dtype_policy = read_dtype_policy(lc);
  declared.shape = read_input_shape(lc);
  declared.by_input_dim = false;
  if (cls != "Embedding" && lc.has("input_dim")) {
    const std::int64_t dim = lc.positive_int("input_dim");
    if (!declared.shape) {
      declared.shape = Shape{dim};
      declared.by_input_dim = true;
    }
  } else if (cls != "Embedding") {
    lc.ignore({"input_dim"});
  }
  const json* activity = lc.find("activity_regularizer");
  if (const auto r = nn::parse_regularizer(activity ? *activity : json(),
                                           lc.path_of("activity_regularizer")))
    declared.activity = {static_cast<float>(r->l1), static_cast<float>(r->l2), r->config()};
  auto layer = it->second.make(lc, name);
  lc.finish();
  if (const auto* own = nn::own_activity_penalty_of(*layer)) {  // ActivityRegularization
    const auto [l1, l2] = own->activity_penalty();
    nn::Regularizer r{l1, l2};
    declared.activity = {static_cast<float>(l1), static_cast<float>(l2), r.config()};
  }
  if (keras2)
    if (auto* definitions = nn::keras_two_definitions_of(*layer))
      definitions->use_keras2_definitions();
  layer->set_trainable(trainable);
  return layer;
}

// Whether an InputLayer's `dtype` names an integer type, as Keras writes for token ids fed to an
// Embedding ("int32"). Tandem reads every input as float32, which holds integers up to 2^24
// exactly (an Embedding refuses an index outside its input_dim).
bool is_integer_input_dtype(ConfigObject& c) {
  const json* d = c.find("dtype");
  if (!d || !d->is_string()) return false;
  static const std::set<std::string> integers = {"int8",   "int16",  "int32",  "int64", "uint8",
                                                 "uint16", "uint32", "uint64", "bool"};
  return integers.count(d->get<std::string>()) > 0;
}

// An InputLayer's config: its per-sample shape (required), checked keys.
Shape read_input_layer(const json& config_json, const std::string& path) {
  ConfigObject lc(config_json, path);
  auto shape = read_input_shape(lc);
  if (!shape)
    throw ConfigError(lc.path(), "InputLayer needs batch_input_shape, batch_shape or shape");
  if (!is_integer_input_dtype(lc) && !read_dtype_policy(lc).is_null())
    throw ConfigError(lc.path_of("dtype"), "an InputLayer's dtype is its data's: float32");
  for (const char* kind : {"sparse", "ragged"})
    if (lc.get_bool(kind, false))
      throw ConfigError(lc.path_of(kind), std::string("Tandem feeds every input as a dense "
                                                      "tensor; a ") +
                                              kind + " input is not supported");
  lc.ignore({"name", "input_tensor", "optional"});
  lc.finish();
  return *shape;
}

const json& config_of(const json& entry) {
  static const json empty = json::object();
  return entry.contains("config") && entry["config"].is_object() ? entry["config"] : empty;
}

// Whether a Sequential config lists a whole model among its layers (a backbone, a head).
bool has_nested_model(ConfigObject& cfg) {
  const json* layers = cfg.find("layers");
  if (!layers || !layers->is_array()) return false;
  return std::any_of(layers->begin(), layers->end(),
                     [](const json& entry) { return nn::is_model_entry(entry); });
}

}  // namespace

std::unique_ptr<Model> Model::from_config(const json& given, const std::string& path,
                                          std::uint64_t seed, const DataInputShapes& data_shapes) {
  // Functions called on Keras tensors (tf.keras 2's TFOpLambda, Keras 3's operations) run as
  // the Keras layers that compute them (nn/function_layers.hpp).
  json translated, model_functions = json::object(), given_entries = json::object();
  if (nn::calls_functions(given)) {
    std::vector<std::string> kinds;
    translated = nn::functions_as_layers(given, path, kinds, model_functions, given_entries);
    std::string list;
    for (const std::string& kind : kinds) list += (list.empty() ? "" : ", ") + kind;
    warn_once(path +
              ": the functions called on Keras tensors run as the Keras layers that "
              "compute them: " +
              list + "; the model's config is written back with those layers" +
              (given_entries.empty() ? ""
                                     : " (Tandem's own, which no Keras layer computes, as "
                                       "the functions' entries were given)"));
  }
  const json& config = translated.is_null() ? given : translated;
  ConfigObject top(config, path);
  const std::string cls = top.get_string("class_name");
  if (cls != "Sequential" && cls != "Functional" && cls != "Model")
    throw ConfigError(top.path_of("class_name"),
                      "expected \"Sequential\", \"Functional\" or \"Model\", got \"" + cls + "\"");
  // What Keras' to_json() writes beside the model itself.
  top.ignore(
      {"module", "registered_name", "build_config", "compile_config", "keras_version", "backend"});
  ConfigObject cfg = top.get_object("config");
  top.finish();
  // Each layer costs kilobytes to build: a config of millions (100 MB of text, in a file's
  // model_config) would take gigabytes and minutes before an error in its last layer showed.
  constexpr std::size_t kMaxLayers = 100000;
  if (const json* layers = cfg.find("layers"); layers && layers->size() > kMaxLayers)
    throw ConfigError(cfg.path_of("layers"),
                      std::to_string(layers->size()) + " layers; a model has at most " +
                          std::to_string(kMaxLayers) +
                          " (the largest Keras applications have about a thousand)");

  std::unique_ptr<Model> model(new Model());
  model->seed_ = seed;
  model->source_config_ = config;  // functions as layers: what the model runs
  model->function_layers_ = std::move(model_functions);
  model->given_function_entries_ = std::move(given_entries);
  model->functional_ = cls != "Sequential";
  model->keras2_ = nn::uses_keras2_definitions(config);
  model->name_ = cfg.get_string("name", model->functional_ ? "model" : "sequential");
  cfg.ignore({"trainable"});
  read_dtype_policy(cfg);  // checked; each layer's own policy decides how it computes
  std::vector<std::string> layer_paths;
  nn::ModelGraph graph;
  if (model->functional_ || has_nested_model(cfg)) {
    graph = nn::read_model_graph(cfg, !model->functional_, model->name_);
    model->read_graph(graph, layer_paths);
  } else {
    model->read_sequential(cfg.at("layers"), cfg.path_of("layers"), layer_paths);
  }
  // tf.keras 2's Sequential built by build(shape), without an Input, keeps its shape only here.
  if (model->inputs_.empty()) {
    if (!cfg.has("build_input_shape"))
      throw ConfigError(cfg.path_of("layers"),
                        "the input shape is unknown: start with an InputLayer or give the "
                        "first layer \"input_shape\" (or the model \"build_input_shape\")");
    model->inputs_ = {
        {"", json(), shape_at(cfg, "build_input_shape", true), cfg.path_of("build_input_shape")}};
  }
  cfg.ignore({"build_input_shape"});
  cfg.finish();
  model->take_lengths_from_data(data_shapes);
  model->build_layers(seed, layer_paths);
  model->check_nested_inputs(graph.input_checks);
  return model;
}

void Model::read_sequential(const json& layers, const std::string& layers_path,
                            std::vector<std::string>& layer_paths) {
  if (!layers.is_array()) throw ConfigError(layers_path, "expected a list of layers");
  std::map<std::string, int> name_counts;
  std::set<std::string> used_names;
  std::optional<Shape> input_shape;
  json input_config;
  std::string input_path;  // where the input shape is declared
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string lpath = indexed(layers_path, i);
    if (string_field(layers[i], "class_name") == "InputLayer") {
      if (i != 0 || input_shape)
        throw ConfigError(lpath + ".class_name", "an InputLayer must be the first layer");
      ConfigObject entry(layers[i], lpath);
      entry.get_string("class_name");
      entry.ignore(
          {"module", "registered_name", "build_config", "inbound_nodes", "name", "config"});
      entry.finish();
      const json& lc = config_of(layers[i]);
      input_path = entry.path_of("config");
      input_shape = read_input_layer(lc, input_path);
      input_config = lc;
      continue;
    }
    DeclaredShape declared;
    auto layer = make_layer(layers[i], lpath, name_counts, used_names, declared, keras2_);
    if (layer->takes_several_inputs())
      throw ConfigError(lpath, "layer '" + layer->name() + "' (" + layer->class_name() +
                                   ") merges several inputs: it belongs in a functional model, "
                                   "where its inbound_nodes name them, not in a Sequential stack");
    if (declared.shape && !layers_.empty()) {
      warn_once(lpath +
                (declared.by_input_dim ? ".config.input_dim: ignored"
                                       : ".config: its input shape is ignored") +
                ", as Keras ignores one on any layer but the first (the input shape is the "
                "InputLayer's or the first layer's)");
    } else if (declared.shape) {
      if (!input_shape) {
        input_shape = declared.shape;
        input_path = lpath + ".config";
      } else if (*declared.shape != *input_shape)
        throw ConfigError(lpath + ".config",
                          "gives the input shape " + shape_to_string(*declared.shape) +
                              ", but the InputLayer gives " + shape_to_string(*input_shape));
    }
    const int previous = layers_.empty() ? kModelInput : static_cast<int>(layers_.size()) - 1;
    calls_.push_back(
        {layers_.size(), layer.get(), {previous}, 0, {}, json::object(), std::nullopt});
    calls_of_layer_.push_back({layers_.size()});
    layers_.push_back(std::move(layer));
    activity_.push_back({declared.activity.l1, declared.activity.l2, declared.activity.config});
    dtype_policies_.push_back(declared.dtype_policy);
    layer_paths.push_back(lpath);
  }
  if (layers_.empty()) throw ConfigError(layers_path, "the model has no layers");
  if (input_shape) inputs_ = {{"", input_config, *input_shape, input_path}};
  output_calls_ = {calls_.size() - 1};
  output_parts_ = {0};
  output_layers_ = {layers_.back()->name()};
  nn::Scope root;
  root.name = name_;
  root.class_name = "Sequential";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    nn::ScopeMember member;
    member.index = i;
    member.outputs = {{{static_cast<int>(i), 0}}};
    root.members.push_back(std::move(member));
  }
  scopes_ = std::make_shared<const std::vector<nn::Scope>>(std::vector<nn::Scope>{std::move(root)});
}

namespace {

// Tells a layer that takes call arguments (nn::CallArguments) which named tensors follow its
// first argument and the call's options; refuses them for any other layer. Returns the names
// (Keras 3's positional ones named) and the options, as the call keeps them.
std::pair<std::vector<std::string>, json> pass_call_arguments(Layer& runner,
                                                              const nn::CallSpec& spec,
                                                              const std::string& path) {
  std::vector<std::string> names;
  for (const std::string& n : spec.names)
    if (!n.empty()) names.push_back(n);
  nn::CallArguments* takes = nn::call_arguments_of(runner);
  if (!takes) {
    if (!names.empty() || !spec.options.empty())
      throw ConfigError(path, "layer '" + runner.name() + "' (" + runner.class_name() +
                                  ") takes no call arguments, got " +
                                  (names.empty() ? spec.options.dump() : "the tensor '" + names[0] + "'"));
    return {{}, json::object()};
  }
  if (!takes->first_argument_is_a_list() && spec.names.size() - names.size() != 1)
    throw ConfigError(path, "layer '" + runner.name() + "' (" + runner.class_name() +
                                ") takes one tensor as its first argument, got " +
                                std::to_string(spec.names.size() - names.size()));
  const std::vector<std::string> positional = takes->positional_arguments();
  for (std::string& n : names)
    if (n[0] == '#') {  // Keras 3's positional argument i: the layer's i-th after the first
      const std::size_t i = std::stoul(n.substr(1));
      if (i > positional.size())
        throw ConfigError(path, "layer '" + runner.name() + "' (" + runner.class_name() +
                                    ") takes at most " + std::to_string(positional.size() + 1) +
                                    " positional arguments");
      n = positional[i - 1];
    }
  takes->set_call_arguments(names, spec.options, path);
  return {names, spec.options};
}

}  // namespace

void Model::read_graph(const nn::ModelGraph& graph, std::vector<std::string>& call_paths) {
  std::set<std::string> used_names;
  for (const nn::FunctionalInput& input : graph.inputs) {
    if (!input.entry) continue;  // a Sequential model's first layer's input: its shape below
    const json& lc = config_of(*input.entry);
    require_storable_layer_name(input.name, input.path + ".name");
    inputs_.push_back({functional_ ? input.name : "", lc,
                       read_input_layer(lc, input.path + ".config"), input.path + ".config"});
    used_names.insert(input.name);
  }
  output_calls_ = graph.outputs;
  output_parts_ = graph.output_parts;
  output_layers_ = graph.output_layers;
  std::map<std::string, int> name_counts;
  std::optional<Shape> first_declared;  // a Sequential model's input shape, on its first layer
  for (const nn::FlatLayer& entry : graph.layers) {
    DeclaredShape declared;  // Keras ignores a shape on a layer of a functional model
    auto layer = make_layer(*entry.entry, entry.path, name_counts, used_names, declared, keras2_);
    if (layer->name() != entry.name)
      throw ConfigError(entry.path + ".name", "the entry names the layer '" + entry.name +
                                                  "' but its config '" + layer->name() + "'");
    if (!entry.trainable) layer->set_trainable(false);  // a model holding it is frozen
    if (layers_.empty()) first_declared = declared.shape;
    layers_.push_back(std::move(layer));
    activity_.push_back({declared.activity.l1, declared.activity.l2, declared.activity.config});
    dtype_policies_.push_back(declared.dtype_policy);
    calls_of_layer_.emplace_back();
  }
  if (!graph.inputs.empty() && !graph.inputs[0].entry) {
    // A Sequential model without an InputLayer: the InputLayer of the model nested first, or the
    // shape its first layer declares (else build_input_shape: from_config).
    for (const nn::InputCheck& check : graph.input_checks)
      if (check.value == kModelInput && inputs_.empty())
        inputs_.push_back({"", json(),
                           read_input_layer(config_of(*check.entry), check.input_path + ".config"),
                           check.input_path + ".config"});
    if (inputs_.empty() && first_declared && !graph.calls.empty() &&
        graph.calls[0].inputs == std::vector<int>{kModelInput})
      inputs_.push_back({"", json(), *first_declared, graph.layers[0].path + ".config"});
  }
  for (const auto& call : graph.calls) {
    const nn::FlatLayer& entry = graph.layers[call.layer];
    const std::string& at = entry.call_paths[static_cast<std::size_t>(call.call)];
    Layer* runner = layers_[call.layer].get();
    if (call.call > 0) {  // a shared layer's later call: a twin of the layer
      std::map<std::string, int> counts;
      std::set<std::string> names;
      DeclaredShape declared;
      twins_.push_back(make_layer(*entry.entry, entry.path, counts, names, declared, keras2_));
      runner = twins_.back().get();
    }
    auto [names, options] =
        pass_call_arguments(*runner, entry.calls[static_cast<std::size_t>(call.call)], at);
    if (call.inputs.size() > 1 && !runner->takes_several_inputs())
      throw ConfigError(at, "layer '" + entry.name + "' (" + runner->class_name() +
                                ") takes one input, but is called on " +
                                std::to_string(call.inputs.size()));
    Call made{call.layer,         runner,        call.inputs,     call.call, std::move(names),
              std::move(options), call.training, call.input_parts};
    calls_of_layer_[call.layer].push_back(calls_.size());
    calls_.push_back(std::move(made));
    call_paths.push_back(entry.calls.size() == 1 ? entry.path : at);
  }
  scopes_ = std::make_shared<const std::vector<nn::Scope>>(graph.scopes);
}

const Shape& Model::value_shape(int value, int part, const std::string& reader,
                                const std::string& path) const {
  if (value < 0) return inputs_[static_cast<std::size_t>(-1 - value)].shape;
  const auto& parts = call_parts_[static_cast<std::size_t>(value)];
  if (part < 0 || static_cast<std::size_t>(part) >= parts.size()) {
    const Layer& layer = *calls_[static_cast<std::size_t>(value)].runner;
    throw ConfigError(path, reader + " takes output " + std::to_string(part) + " of '" +
                                layer.name() + "' (" + layer.class_name() + "), which has " +
                                (parts.size() == 1 ? std::string("one output (tensor index 0)")
                                                   : std::to_string(parts.size()) + " outputs"));
  }
  return parts[static_cast<std::size_t>(part)];
}

std::int64_t Model::part_offset(std::size_t k, int part) const {
  std::int64_t offset = 0;
  for (int j = 0; j < part; ++j) offset += shape_size(call_parts_[k][static_cast<std::size_t>(j)]);
  return offset;
}

const Tensor& Model::take_part(const Tensor& packed, std::size_t k, int part, Tensor& into,
                               backend::Backend& ops) const {
  const Shape& shape = call_parts_[k][static_cast<std::size_t>(part)];
  const std::int64_t width = shape_size(shape);
  ops.place(into, nn::with_batch(packed.rank() > 0 ? packed.dim(0) : 0, shape));
  ops.copy_columns(packed, shape_size(call_shapes_[k]), part_offset(k, part), into, width, 0,
                   width);
  return into;
}

void Model::take_lengths_from_data(const DataInputShapes& data_shapes) {
  std::optional<std::vector<Shape>> data;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    Input& input = inputs_[i];
    input.declared = input.shape;
    if (!nn::has_any_length(input.shape)) continue;
    const std::string who = functional_ ? "input '" + input.name + "' of model '" + name_ + "'"
                                        : "model '" + name_ + "'";
    if (!data_shapes)
      throw ConfigError(input.path, who + " takes samples " +
                                        nn::declared_shape_text(input.shape, true) +
                                        ", a length left null (any length, in Keras): Tandem "
                                        "builds a model for the lengths of its data, and "
                                        "no data gives them here");
    if (!data) {
      std::vector<Shape> declared;
      for (const Input& each : inputs_) declared.push_back(each.shape);
      data = data_shapes(declared);
    }
    if (data->size() != inputs_.size())
      throw ShapeError("the data gives " + std::to_string(data->size()) + " input array" +
                       (data->size() == 1 ? "" : "s") + " for the " +
                       std::to_string(inputs_.size()) + " inputs of model '" + name_ +
                       "', so the lengths " + who + " leaves null (" + input.path +
                       ") cannot be taken from it; give one array per input");
    input.shape = nn::with_data_lengths(input.shape, (*data)[i], who, input.path);
  }
}

bool Model::has_lengths_from_data() const {
  return std::any_of(inputs_.begin(), inputs_.end(),
                     [](const Input& input) { return nn::has_any_length(input.declared); });
}

void Model::check_nested_inputs(const std::vector<nn::InputCheck>& checks) const {
  for (const nn::InputCheck& check : checks) {
    const Shape& given =
        value_shape(check.value, check.part, "model '" + check.model + "'", check.call_path);
    const Shape expected = read_input_layer(config_of(*check.entry), check.input_path + ".config");
    if (!nn::fits_declared(given, expected))
      throw ConfigError(check.call_path, "passes model '" + check.model + "' a tensor of shape " +
                                             shape_to_string(given) + " where its InputLayer (" +
                                             check.input_path + ") takes " +
                                             nn::declared_shape_text(expected, false));
  }
}

void Model::build_layers(std::uint64_t seed, const std::vector<std::string>& call_paths) {
  Rng init(seed);
  Rng twins_init(0);  // a twin's own initial weights are never used: keep `init`'s sequence
  output_shapes_ = {inputs_[0].shape};
  call_shapes_.clear();
  call_parts_.clear();
  for (std::size_t k = 0; k < calls_.size(); ++k) {
    const Call& call = calls_[k];
    const std::string reader = "layer '" + call.runner->name() + "'";
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < call.inputs.size(); ++i)
      shapes.push_back(value_shape(call.inputs[i], call_input_part(k, i), reader, call_paths[k]));
    try {
      call_shapes_.push_back(
          call.runner->build_inputs(shapes, call.number == 0 ? init : twins_init));
    } catch (const ShapeError& e) {
      throw ConfigError(call_paths[k], e.what());
    }
    const nn::SeveralOutputs* several = nn::several_outputs_of(*call.runner);
    call_parts_.push_back(several ? several->output_parts()
                                  : std::vector<Shape>{call_shapes_.back()});
    if (!functional_ && call_parts_.back().size() > 1)
      throw ConfigError(call_paths[k], reader + " (" + call.runner->class_name() + ") gives " +
                                           std::to_string(call_parts_.back().size()) +
                                           " outputs: a Sequential model's layers give one, as "
                                           "Keras requires; take them apart in a functional model");
    if (call.number == 0) {
      output_shapes_.push_back(call_shapes_.back());
      continue;
    }
    const auto own = layers_[call.layer]->parameters(), twin = call.runner->parameters();
    for (std::size_t j = 0; j < own.size(); ++j)
      if (twin[j]->value.shape() != own[j]->value.shape())
        throw ConfigError(call_paths[k], "call " + std::to_string(call.number) + " of layer '" +
                                             layers_[call.layer]->name() +
                                             "' needs weights of shape " +
                                             shape_to_string(twin[j]->value.shape()) + " for '" +
                                             own[j]->name + "', but its first call made them " +
                                             shape_to_string(own[j]->value.shape()));
    if (!layers_[call.layer]->random_state().empty())
      throw ConfigError(call_paths[k], "layer '" + layers_[call.layer]->name() + "' (" +
                                           layers_[call.layer]->class_name() +
                                           ") draws random numbers: Tandem does not call such a "
                                           "layer more than once");
  }
  for (std::size_t j = 0; j < output_calls_.size(); ++j)
    value_shape(static_cast<int>(output_calls_[j]), output_parts_[j],
                "output " + std::to_string(j) + " of model '" + name_ + "'",
                call_paths[output_calls_[j]]);
  grad_sums_.resize(calls_.size());
  input_part_values_.assign(calls_.size(), {});
  for (std::size_t k = 0; k < calls_.size(); ++k)
    input_part_values_[k].resize(calls_[k].inputs.size());
  output_part_values_.resize(output_calls_.size());
  all_calls_.resize(calls_.size());
  std::iota(all_calls_.begin(), all_calls_.end(), std::size_t{0});
  packed_input_shape_ = inputs_[0].shape;
  if (inputs_.size() > 1) {
    std::int64_t total = 0;
    for (const Input& in : inputs_) total += shape_size(in.shape);
    packed_input_shape_ = {total};
  }
  // Outputs are named after their layers; a layer's later outputs (a shared layer's calls) as
  // tf.keras names them (Functional._set_output_names): name_1, name_2, ...
  output_names_.clear();
  std::map<std::string, int> next_suffix;
  for (const std::string& layer : output_layers_) {
    std::string name = layer;
    while (std::find(output_names_.begin(), output_names_.end(), name) != output_names_.end()) {
      int& suffix = next_suffix.try_emplace(layer, 1).first->second;
      name = layer + "_" + std::to_string(suffix++);
    }
    output_names_.push_back(name);
  }
  // A layer's later outputs (a recurrent layer's states) carry no mask, as in Keras: their
  // readers see them as the model's inputs are seen, unmasked.
  std::vector<nn::MaskedCall> masked;
  for (std::size_t k = 0; k < calls_.size(); ++k) {
    std::vector<int> sources = calls_[k].inputs;
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (call_input_part(k, i) > 0) sources[i] = kModelInput;
    const std::string& name = calls_[k].runner->name();
    masked.push_back({calls_[k].runner, sources,
                      function_layers_.contains(name) ? function_layers_[name].get<std::string>()
                                                      : std::string()});
  }
  masks_ = nn::SequenceMasks::plan(masked, keras2_, call_paths);
  check_output_masks(call_paths);
  packed_output_shape_ = output_shape(0);
  if (output_calls_.size() > 1) {
    std::int64_t total = 0;
    for (std::size_t j = 0; j < output_calls_.size(); ++j) total += shape_size(output_shape(j));
    packed_output_shape_ = {total};
  }
  // A relu moves into the layer that computes its input where that layer can apply it in its own
  // passes (BatchNormalization -> Activation relu), or into the layer that reads it where that
  // layer applies it on a smaller tensor (Conv2D relu -> MaxPooling2D): the same values and
  // gradients, two passes over a tensor fewer. Only where one call of each layer is the other's
  // only reader.
  std::vector<int> readers(calls_.size(), 0), reader_of(calls_.size(), -1);
  for (std::size_t k = 0; k < calls_.size(); ++k)
    for (int in : calls_[k].inputs)
      if (in >= 0) {
        ++readers[static_cast<std::size_t>(in)];
        reader_of[static_cast<std::size_t>(in)] = static_cast<int>(k);
      }
  for (std::size_t k : output_calls_) readers[k] = -1;  // an output keeps its own relu
  for (std::size_t k = 0; k < calls_.size(); ++k) {
    if (readers[k] != 1) continue;
    const Call& reader = calls_[static_cast<std::size_t>(reader_of[k])];
    if (reader.inputs.size() != 1 || calls_of_layer_[calls_[k].layer].size() != 1 ||
        calls_of_layer_[reader.layer].size() != 1)
      continue;
    const bool regularized = !activity_[calls_[k].layer].config.is_null();  // sees its output
    if (regularized) continue;
    nn::ReluAbsorber* absorber = nn::relu_absorber_of(*calls_[k].runner);
    nn::PlainRelu* relu = nn::plain_relu_of(*reader.runner);
    if (absorber && relu && relu->is_plain_relu()) {
      relu->set_relu_absorbed(true);
      absorber->set_absorb_output_relu(true);
      continue;
    }
    nn::ReluProducer* layer = nn::relu_producer_of(*calls_[k].runner);
    nn::ReluConsumer* next = nn::relu_consumer_of(*reader.runner);
    if (layer && next && layer->has_output_relu() && next->can_apply_input_relu()) {
      layer->set_output_relu_external(true);
      next->set_apply_input_relu(true);
    }
  }
}

std::unique_ptr<Model> Model::clone() const {
  std::vector<Shape> shapes;
  for (const Input& input : inputs_) shapes.push_back(input.shape);
  auto copy = from_config(source_config_, "model", seed_,
                          [&](const std::vector<Shape>&) { return shapes; });
  copy->copy_weights_from(*this);
  // Read from the translated config, the copy would not know its functions' entries.
  copy->function_layers_ = function_layers_;
  copy->given_function_entries_ = given_function_entries_;
  return copy;
}

const std::string& Model::output_name(std::size_t j) const { return output_names_[j]; }

void Model::run_calls(const Tensor& x, bool training, std::int64_t sample_offset) {
  start_forward(x);
  forward_calls(all_calls_, training, sample_offset);
}

void Model::start_forward(const Tensor& x) {
  nn::require_batch_of(x, packed_input_shape_, "model '" + name_ + "'");
  backend::Backend& ops = layers_.front()->ops();
  const std::int64_t rows = x.dim(0), total = shape_size(packed_input_shape_);
  input_parts_.resize(inputs_.size());
  for (std::size_t i = 0, offset = 0; i < inputs_.size() && inputs_.size() > 1; ++i) {
    Shape shape{rows};
    shape.insert(shape.end(), inputs_[i].shape.begin(), inputs_[i].shape.end());
    ops.place(input_parts_[i], shape);
    const std::int64_t width = shape_size(inputs_[i].shape);
    ops.copy_columns(x, total, static_cast<std::int64_t>(offset), input_parts_[i], width, 0, width);
    offset += static_cast<std::size_t>(width);
  }
  forward_input_ = x;
  outputs_.assign(calls_.size(), nullptr);
}

void Model::forward_calls(const std::vector<std::size_t>& calls, bool training,
                          std::int64_t sample_offset) {
  for (std::size_t k : calls) {
    const Call& call = calls_[k];
    if (call.number > 0) sync_twin(call);
    call_inputs_.clear();
    for (std::size_t i = 0; i < call.inputs.size(); ++i) {
      const int in = call.inputs[i];
      if (in >= 0 && call_parts_[static_cast<std::size_t>(in)].size() > 1) {
        call_inputs_.push_back(&take_part(*outputs_[static_cast<std::size_t>(in)],
                                          static_cast<std::size_t>(in), call_input_part(k, i),
                                          input_part_values_[k][i], call.runner->ops()));
        continue;
      }
      call_inputs_.push_back(in >= 0                ? outputs_[static_cast<std::size_t>(in)]
                             : inputs_.size() == 1 ? &forward_input_
                                                   : &input_parts_[static_cast<std::size_t>(-1 - in)]);
    }
    call.runner->set_sample_offset(sample_offset);
    if (masks_) masks_->before(k);
    outputs_[k] = &call.runner->forward_inputs(call_inputs_, call.training.value_or(training));
    if (masks_) masks_->after(k);
  }
}

const std::vector<const Tensor*>& Model::forward_results() {
  model_outputs_.clear();
  for (std::size_t j = 0; j < output_calls_.size(); ++j) {
    const std::size_t k = output_calls_[j];
    model_outputs_.push_back(call_parts_[k].size() == 1
                                 ? outputs_[k]
                                 : &take_part(*outputs_[k], k, output_parts_[j],
                                              output_part_values_[j], calls_[k].runner->ops()));
  }
  return model_outputs_;
}

const std::vector<const Tensor*>& Model::forward_outputs(const Tensor& x, bool training,
                                                         std::int64_t sample_offset) {
  run_calls(x, training, sample_offset);
  return forward_results();
}

const Tensor& Model::forward(const Tensor& x, bool training, std::int64_t sample_offset) {
  forward_outputs(x, training, sample_offset);
  if (model_outputs_.size() == 1) return *model_outputs_[0];
  backend::Backend& ops = layers_.front()->ops();
  const std::int64_t rows = x.dim(0), total = shape_size(packed_output_shape_);
  ops.place(packed_output_, {rows, total});
  std::int64_t offset = 0;
  for (std::size_t j = 0; j < model_outputs_.size(); ++j) {
    const std::int64_t width = shape_size(output_shape(j));  // per sample, even of no samples
    ops.copy_columns(*model_outputs_[j], width, 0, packed_output_, total, offset, width);
    offset += width;
  }
  return packed_output_;
}

bool Model::output_masked(std::size_t j) const {
  return masks_ && output_parts_[j] == 0 && masks_->output_masked(output_calls_[j]);
}

bool Model::any_output_masked() const {
  for (std::size_t j = 0; j < output_calls_.size(); ++j)
    if (output_masked(j)) return true;
  return false;
}

const Tensor* Model::output_mask(std::size_t j) const {
  return output_masked(j) ? masks_->output_mask(output_calls_[j]) : nullptr;
}

// A mask weighs an output's positions (nn/objective.hpp): one per step of a sequence
// (batch, steps, features). Keras cannot weigh the positions of an output with more axes by a
// mask of its steps either (its losses' values and the mask do not broadcast).
void Model::check_output_masks(const std::vector<std::string>& call_paths) const {
  for (std::size_t j = 0; j < output_calls_.size(); ++j)
    if (output_masked(j) && output_shape(j).size() != 2)
      throw ConfigError(call_paths[output_calls_[j]],
                        "the model's output '" + output_names_[j] + "' carries a mask of its " +
                            "steps (Embedding's mask_zero or a Masking layer), which weighs the " +
                            "loss per step, but its values per sample have the shape " +
                            shape_to_string(output_shape(j), true) +
                            ": a mask can weigh an output of (steps, features) only; end the " +
                            "mask before it (Flatten, Reshape or a recurrent layer without " +
                            "return_sequences)");
}

bool Model::call_input_masked(std::size_t k) const {
  return masks_ && masks_->input_masked(k);
}

void Model::sync_twin(const Call& call) {
  Layer& layer = *layers_[call.layer];
  const auto own = layer.parameters(), twin = call.runner->parameters();
  for (std::size_t j = 0; j < own.size(); ++j) {
    twin[j]->value = own[j]->value;  // shares the storage, wherever it lives
    twin[j]->trainable = own[j]->trainable;
  }
  call.runner->set_trainable(layer.trainable());
  call.runner->set_backend(layer.ops());
}

void Model::backward(const Tensor& grad_output) {
  backward(grad_output, [](std::size_t) {});
}

void Model::backward(const Tensor& grad_output,
                     const std::function<void(std::size_t layer)>& after_layer) {
  if (output_calls_.size() == 1) {
    backward_outputs({&grad_output}, after_layer);
    return;
  }
  // The packed gradient apart, per output.
  backend::Backend& ops = layers_.front()->ops();
  const std::int64_t rows = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  const std::int64_t total = shape_size(packed_output_shape_);
  if (grad_output.size() != rows * total)
    throw ShapeError("model '" + name_ + "': a gradient of shape " +
                     shape_to_string(grad_output.shape()) + " for outputs of " +
                     std::to_string(total) + " values per sample");
  output_grad_parts_.resize(output_calls_.size());
  std::vector<const Tensor*> parts;
  std::int64_t offset = 0;
  for (std::size_t j = 0; j < output_calls_.size(); ++j) {
    Shape shape{rows};
    for (auto d : output_shape(j)) shape.push_back(d);
    ops.place(output_grad_parts_[j], shape);
    const std::int64_t width = shape_size(output_shape(j));
    ops.copy_columns(grad_output, total, offset, output_grad_parts_[j], width, 0, width);
    offset += width;
    parts.push_back(&output_grad_parts_[j]);
  }
  backward_outputs(parts, after_layer);
}

void Model::backward_outputs(const std::vector<const Tensor*>& grad_outputs,
                             const std::function<void(std::size_t layer)>& after_layer) {
  start_backward(grad_outputs);
  backward_calls(all_calls_, after_layer);
}

bool Model::leads_to_training(int input) const {
  return input >= 0 && (backward_trainable_[static_cast<std::size_t>(input)] ||
                        backward_needs_input_grad_[static_cast<std::size_t>(input)]);
}

void Model::start_backward(const std::vector<const Tensor*>& grad_outputs) {
  if (grad_outputs.size() != output_calls_.size())
    throw ShapeError("model '" + name_ + "': " + std::to_string(grad_outputs.size()) +
                     " output gradients for " + std::to_string(output_calls_.size()) +
                     " outputs");
  // A call runs its backward when its layer has trainable parameters or something before it
  // has (needs_input_grad): the calls before the first trainable one need no gradient at all.
  const std::size_t n = calls_.size();
  backward_trainable_.assign(n, false);
  backward_needs_input_grad_.assign(n, false);
  backward_ran_.assign(n, false);
  for (std::size_t k = 0; k < n; ++k) {
    Layer& layer = *layers_[calls_[k].layer];
    if (layer.trainable())
      for (Parameter* p : layer.parameters())
        backward_trainable_[k] = backward_trainable_[k] || p->trainable;
    for (int in : calls_[k].inputs)
      backward_needs_input_grad_[k] = backward_needs_input_grad_[k] || leads_to_training(in);
  }
  output_grads_.assign(n, nullptr);
  for (std::size_t j = 0; j < output_calls_.size(); ++j)
    add_output_grad(output_calls_[j], grad_outputs[j], calls_[output_calls_[j]].runner->ops(),
                    output_parts_[j]);
  // An activity regularizer reads its call's output: one more gradient into it.
  if (activity_grads_pending_)
    for (std::size_t k = 0; k < n; ++k)
      if (!activity_[calls_[k].layer].config.is_null())
        add_output_grad(k, &activity_grads_[k], calls_[k].runner->ops());
  activity_grads_pending_ = false;
}

void Model::backward_calls(const std::vector<std::size_t>& calls,
                           const std::function<void(std::size_t layer)>& after_layer) {
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
    const std::size_t k = *it;
    const Call& call = calls_[k];
    const bool needs_input_grad = backward_needs_input_grad_[k];
    if (output_grads_[k] && (backward_trainable_[k] || needs_input_grad)) {
      if (call.number > 0)  // a twin sets its own gradients, summed into the layer's below
        for (Parameter* p : call.runner->parameters())
          if (p->trainable) call.runner->ops().place(p->grad, p->value.shape());
      const auto grads = call.runner->backward_inputs(*output_grads_[k], needs_input_grad);
      backward_ran_[k] = true;
      for (std::size_t j = 0; j < grads.size() && j < call.inputs.size(); ++j)
        if (leads_to_training(call.inputs[j]))
          add_output_grad(static_cast<std::size_t>(call.inputs[j]), grads[j], call.runner->ops(),
                          call_input_part(k, j));
    }
    // The layer's first call is its last in this pass: its gradient is complete now.
    if (call.number == 0) {
      sum_twin_gradients(call.layer, backward_ran_);
      after_layer(call.layer);
    }
  }
}

void Model::sum_twin_gradients(std::size_t layer, const std::vector<bool>& ran) {
  const auto& calls = calls_of_layer_[layer];
  if (calls.size() < 2 || !layers_[layer]->trainable() || !ran[calls[0]]) return;
  // Every call of a trainable layer ran (each leads to the output, so a gradient reaches it);
  // their gradients are added in call order, whatever order they ran backward in.
  const auto own = layers_[layer]->parameters();
  backend::Backend& ops = layers_[layer]->ops();
  for (std::size_t c = 1; c < calls.size(); ++c) {
    if (!ran[calls[c]]) continue;
    const auto twin = calls_[calls[c]].runner->parameters();
    for (std::size_t j = 0; j < own.size(); ++j)
      if (own[j]->trainable) ops.add(own[j]->grad, twin[j]->grad, own[j]->grad);
  }
}

void Model::add_output_grad(std::size_t k, const Tensor* grad, backend::Backend& ops, int part) {
  Tensor& sum = grad_sums_[k];
  if (part >= 0 && call_parts_[k].size() > 1) {
    // Into the part's columns of the packed gradient, which starts at zero (or at a gradient
    // handed over whole, a pipeline's).
    const Shape packed = nn::with_batch(grad->rank() > 0 ? grad->dim(0) : 0, call_shapes_[k]);
    if (output_grads_[k] != &sum) {
      ops.place(sum, packed);
      if (output_grads_[k])
        ops.copy(*output_grads_[k], sum);
      else
        ops.fill(sum, 0.0f);
      output_grads_[k] = &sum;
    }
    const std::int64_t total = shape_size(call_shapes_[k]), offset = part_offset(k, part),
                       width = shape_size(call_parts_[k][static_cast<std::size_t>(part)]);
    ops.place(part_gradient_, grad->shape());
    ops.copy_columns(sum, total, offset, part_gradient_, width, 0, width);
    ops.add(part_gradient_, *grad, part_gradient_);
    ops.copy_columns(part_gradient_, width, 0, sum, total, offset, width);
    return;
  }
  // The first reader's gradient is used as it is; a second one sums into grad_sums_[k], in the
  // order the readers ran backward (last call first), the same on every replica.
  if (!output_grads_[k]) {
    output_grads_[k] = grad;
    return;
  }
  if (output_grads_[k] != &sum) ops.place(sum, output_grads_[k]->shape());
  ops.add(*output_grads_[k], *grad, sum);
  output_grads_[k] = &sum;
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& layer : layers_)
    for (Parameter* p : layer->parameters()) out.push_back(p);
  return out;
}

std::vector<Parameter*> Model::trainable_parameters() {
  std::vector<Parameter*> out;
  for (auto& layer : layers_)
    if (layer->trainable())
      for (Parameter* p : layer->parameters())
        if (p->trainable) out.push_back(p);
  return out;
}

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> out;
  for (const auto& layer : layers_)
    for (Parameter* p : layer->parameters()) out.push_back(layer->name() + "/" + p->name);
  return out;
}

std::int64_t Model::count_params() const {
  std::int64_t n = 0;
  for (const auto& layer : layers_)
    for (Parameter* p : layer->parameters()) n += p->value.size();
  return n;
}

std::int64_t Model::count_trainable_params() const {
  std::int64_t n = 0;
  for (const auto& layer : layers_)
    if (layer->trainable())
      for (Parameter* p : layer->parameters())
        if (p->trainable) n += p->value.size();
  return n;
}

json Model::layer_config(std::size_t i) const {
  json c = layers_[i]->config();
  if (!activity_[i].config.is_null() && !nn::own_activity_penalty_of(*layers_[i]))
    c["activity_regularizer"] = activity_[i].config;
  if (!dtype_policies_[i].is_null()) c["dtype"] = dtype_policies_[i];
  return c;
}

std::string Model::layer_dtype_policy(std::size_t i) const {
  return policy_name_of(dtype_policies_[i]);
}

bool Model::has_activity_regularizers() const {
  for (const ActivityRegularizer& a : activity_)
    if (!a.config.is_null()) return true;
  return false;
}

void Model::enqueue_activity_penalties(backend::Sums& sums, float loss_scale) {
  std::size_t count = 0;
  for (const Call& call : calls_) count += activity_[call.layer].config.is_null() ? 0 : 1;
  activity_grads_pending_ = false;
  if (count == 0) return;  // nothing queued: the caller's sums stay as they were
  sums.reset(count);
  activity_grads_.resize(calls_.size());
  // Keras 3 adds the penalty to the batch's mean loss undivided: B times its share of a sum
  // the trainer divides by B.
  const float times = keras2_ ? 1.0f : static_cast<float>(penalty_batch_size_);
  std::size_t slot = 0;
  for (std::size_t k = 0; k < calls_.size(); ++k) {
    const ActivityRegularizer& a = activity_[calls_[k].layer];
    if (a.config.is_null()) continue;
    backend::Backend& ops = calls_[k].runner->ops();
    ops.penalty_sum(*outputs_[k], a.l1 * times, a.l2 * times, sums, slot++);
    if (loss_scale <= 0) continue;
    // loss_scale · (l1·sign(y) + 2·l2·y): the penalty's gradient with scaled coefficients.
    Tensor& grad = activity_grads_[k];
    ops.place(grad, outputs_[k]->shape());
    ops.fill(grad, 0.0f);
    ops.add_penalty_gradient(*outputs_[k], a.l1 * times * loss_scale, a.l2 * times * loss_scale,
                             grad);
  }
  activity_grads_pending_ = loss_scale > 0 && count > 0;
}

json Model::config() const {
  json out = scopes_->size() > 1 ? nested_config()
             : functional_       ? functional_config()
                                 : sequential_config();
  // The Keras whose definitions the model follows (nn/keras_generation.hpp), as to_json() writes.
  if (const auto it = source_config_.find(nn::kKerasVersionKey); it != source_config_.end())
    out[nn::kKerasVersionKey] = *it;
  return out;
}

json Model::sequential_config() const {
  json layers = json::array();
  const Input& input = inputs_[0];
  if (!input.config.is_null()) {
    layers.push_back({{"class_name", "InputLayer"}, {"config", input.config}});
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    json c = layer_config(i);
    if (i == 0 && input.config.is_null()) {
      json shape = json::array({nullptr});
      for (auto d : input.declared) shape.push_back(d == kAnyLength ? json() : json(d));
      c["batch_input_shape"] = shape;
    }
    layers.push_back({{"class_name", layers_[i]->class_name()}, {"config", c}});
  }
  return {{"class_name", "Sequential"}, {"config", {{"name", name_}, {"layers", layers}}}};
}

json Model::nested_config() const {
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < layers_.size(); ++i) index_of[layers_[i]->name()] = i;
  json out = {{"class_name", source_config_.at("class_name")},
              {"config", source_config_.at("config")}};
  const auto replace = [&](json& layers, const auto& self) -> void {
    for (json& entry : layers) {
      if (nn::is_model_entry(entry)) {
        self(entry["config"]["layers"], self);
        continue;
      }
      const json& c = config_of(entry);
      const std::string name = c.contains("name") && c["name"].is_string()
                                   ? c["name"].get<std::string>()
                                   : entry.value("name", std::string());
      const auto it = index_of.find(name);
      if (string_field(entry, "class_name") == "InputLayer" || it == index_of.end()) continue;
      if (given_function_entries_.contains(name)) {
        entry = given_function_entries_.at(name);
        continue;
      }
      const json own = layer_config(it->second);
      for (const auto& [key, value] : own.items()) entry["config"][key] = value;
    }
  };
  replace(out["config"]["layers"], replace);
  return out;
}

json Model::functional_config() const {
  // Keras 2's form, which Keras 2 and Keras 3 both read.
  json layers = json::array(), input_layers = json::array(), output_layers = json::array();
  for (const Input& input : inputs_) {
    layers.push_back({{"class_name", "InputLayer"},
                      {"name", input.name},
                      {"config", input.config},
                      {"inbound_nodes", json::array()}});
    input_layers.push_back(json::array({input.name, 0, 0}));
  }
  for (std::size_t j = 0; j < output_calls_.size(); ++j) {
    const Call& c = calls_[output_calls_[j]];
    output_layers.push_back(json::array({layers_[c.layer]->name(), c.number, output_parts_[j]}));
  }
  const auto reference = [&](int in, int part) {
    if (in < 0)
      return json::array({inputs_[static_cast<std::size_t>(-1 - in)].name, 0, 0, json::object()});
    const Call& c = calls_[static_cast<std::size_t>(in)];
    return json::array({layers_[c.layer]->name(), c.number, part, json::object()});
  };
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    json nodes = json::array();
    for (std::size_t k : calls_of_layer_[i]) {
      const Call& call = calls_[k];
      // The first argument's tensors, then the named ones in the first reference's kwargs.
      const std::size_t first = call.inputs.size() - call.argument_names.size();
      json kwargs = call.options;
      if (call.training) kwargs["training"] = *call.training;
      // A name given to several tensors (a recurrent layer's initial_state) names their list.
      std::map<std::string, int> named;
      for (const std::string& n : call.argument_names) ++named[n];
      for (std::size_t j = first; j < call.inputs.size(); ++j) {
        json ref = reference(call.inputs[j], call_input_part(k, j));
        ref.erase(3);
        const std::string& name = call.argument_names[j - first];
        if (named[name] == 1)
          kwargs[name] = ref;
        else
          kwargs[name].push_back(ref);
      }
      json node = json::array();
      for (std::size_t j = 0; j < first; ++j) {
        json ref = reference(call.inputs[j], call_input_part(k, j));
        ref[3] = kwargs;
        node.push_back(ref);
      }
      nodes.push_back(node);
    }
    if (given_function_entries_.contains(layers_[i]->name())) {
      layers.push_back(given_function_entries_.at(layers_[i]->name()));
      continue;
    }
    layers.push_back({{"class_name", layers_[i]->class_name()},
                      {"name", layers_[i]->name()},
                      {"config", layer_config(i)},
                      {"inbound_nodes", nodes}});
  }
  return {{"class_name", "Functional"},
          {"config",
           {{"name", name_},
            {"layers", layers},
            {"input_layers", input_layers},
            {"output_layers", output_layers}}}};
}

namespace {

std::string with_commas(std::int64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

// How many characters a terminal shows for UTF-8 text (one per code point: a layer named
// "entrée" is 6 wide, not 7).
std::size_t shown_width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(std::string s, std::size_t width) {
  const std::size_t shown = shown_width(s);
  if (shown < width) s.append(width - shown, ' ');
  return s;
}

}  // namespace

const nn::Scope& Model::root_scope() const {
  return (*scopes_)[0];
}

std::string Model::summary() const {
  return summary(false);
}

std::string Model::summary(bool expand_nested) const {
  std::ostringstream out;
  // A row per member: a layer, an InputLayer, a nested model (its class "Functional" or
  // "Sequential", its weights all counted) and, expanded, the nested model's own layers after
  // it, each named after a "└ " per level of nesting.
  struct Row {
    std::string name, cls, shape;
    std::int64_t params = 0;
    std::vector<std::string> connected;  // every call's inputs, as Keras lists a shared layer's
  };
  // A value's shape as Keras prints it; with `whole`, a layer's several outputs as the list they
  // are (a nested model's output is the one part it names).
  const auto shape_of = [&](const nn::ValueRef& value, bool whole) {
    if (value.call < 0)
      return shape_to_string(inputs_[static_cast<std::size_t>(-1 - value.call)].shape, true);
    const auto& parts = call_parts_[static_cast<std::size_t>(value.call)];
    if (!whole) return shape_to_string(parts[static_cast<std::size_t>(value.part)], true);
    if (parts.size() == 1) return shape_to_string(parts[0], true);
    std::string shown;
    for (const Shape& part : parts)
      shown += (shown.empty() ? "" : ", ") + shape_to_string(part, true);
    return "[" + shown + "]";
  };
  std::vector<Row> rows;
  const auto add_rows = [&](std::size_t scope, int depth, const auto& self) -> void {
    const std::string indent =
        depth == 0 ? "" : std::string(static_cast<std::size_t>(2 * (depth - 1)), ' ') + "└ ";
    const auto& members = (*scopes_)[scope].members;
    for (std::size_t m = 0; m < members.size(); ++m) {
      const nn::ScopeMember& member = members[m];
      if (member.kind == nn::ScopeMember::Kind::input) {
        if (depth > 0) continue;  // a nested model's InputLayers stand for what its call passes
        const Input& input = inputs_[member.index];
        // Keras 2 shows an InputLayer's output as the list it is there: [(None, 4)].
        const std::string shown = shape_to_string(input.shape, true);
        rows.push_back({input.name, "InputLayer", keras2_ ? "[" + shown + "]" : shown, 0, {}});
        continue;
      }
      Row row{indent + member_name(member), member_class(member), "", 0, {}};
      for (const MemberWeight& w : member_weights(scope, m))
        row.params += w.parameter->value.size();
      for (const auto& call : member.connected)
        row.connected.insert(row.connected.end(), call.begin(), call.end());
      // Keras prints "multiple" for a shared layer whose calls give different shapes, and a
      // list for a nested model's several outputs.
      std::vector<std::string> shapes;
      for (const auto& call : member.outputs) {
        std::string shown;
        for (std::size_t t = 0; t < call.size(); ++t)
          shown += (t ? ", " : "") + shape_of(call[t], member.kind == nn::ScopeMember::Kind::layer);
        shapes.push_back(call.size() > 1 ? "[" + shown + "]" : shown);
      }
      row.shape = std::all_of(shapes.begin(), shapes.end(),
                              [&](const std::string& x) { return x == shapes[0]; })
                      ? shapes[0]
                      : "multiple";
      rows.push_back(std::move(row));
      if (expand_nested && member.kind == nn::ScopeMember::Kind::model)
        self(member.index, depth + 1, self);
    }
  };
  add_rows(0, 0, add_rows);
  // Keras' columns: a 29-character name column, widened when a "name (Class)" would run into
  // the next one; a functional model's rows also say what each layer reads ("Connected to").
  std::size_t name_width = 29;
  for (const Row& row : rows)
    name_width = std::max(name_width, shown_width(row.name) + row.cls.size() + 5);
  const std::size_t shape_width = 26, params_width = functional_ ? 10 : 0;
  const std::size_t width = functional_ ? name_width + shape_width + params_width + 30 : 65;
  const std::string rule(width, '_'), double_rule(width, '=');
  out << "Model: \"" << name_ << "\"\n" << rule << "\n";
  out << pad(" Layer (type)", name_width) << pad("Output Shape", shape_width)
      << (functional_ ? pad("Param #", params_width) + "Connected to" : "Param #") << "\n"
      << double_rule << "\n";
  for (const Row& row : rows) {
    const std::string head =
        pad(" " + row.name + " (" + row.cls + ")", name_width) + pad(row.shape + " ", shape_width);
    if (!functional_) {
      out << head << with_commas(row.params) << "\n\n";
      continue;
    }
    out << head << pad(with_commas(row.params), params_width);
    if (row.connected.empty()) out << "[]\n";
    for (std::size_t c = 0; c < row.connected.size(); ++c)
      out << (c == 0 ? "['" : std::string(name_width + shape_width + params_width, ' ') + " '")
          << row.connected[c] << (c + 1 == row.connected.size() ? "']" : "',") << "\n";
    out << "\n";
  }
  const std::int64_t total = count_params(), trainable = count_trainable_params();
  out << double_rule << "\n";
  out << "Total params: " << with_commas(total) << "\n";
  out << "Trainable params: " << with_commas(trainable) << "\n";
  out << "Non-trainable params: " << with_commas(total - trainable) << "\n";
  out << rule << "\n";
  return out.str();
}

void Model::copy_weights_from(const Model& other) {
  if (other.layers_.size() != layers_.size())
    throw ShapeError("copy_weights_from: models have different layer counts");
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    auto dst = layers_[i]->parameters();
    auto src = other.layers_[i]->parameters();
    if (dst.size() != src.size())
      throw ShapeError("copy_weights_from: layer '" + layers_[i]->name() + "' differs");
    for (std::size_t j = 0; j < dst.size(); ++j) dst[j]->value.copy_from(src[j]->value);
  }
}

void Model::save_weights(CheckpointData& out) const {
  save_weights(out, Snapshot::copy);
}

std::string Model::member_name(const nn::ScopeMember& member) const {
  switch (member.kind) {
    case nn::ScopeMember::Kind::input:
      return inputs_[member.index].name;
    case nn::ScopeMember::Kind::model:
      return (*scopes_)[member.index].name;
    case nn::ScopeMember::Kind::layer:
      break;
  }
  return layers_[member.index]->name();
}

std::string Model::member_class(const nn::ScopeMember& member) const {
  switch (member.kind) {
    case nn::ScopeMember::Kind::input:
      return "InputLayer";
    case nn::ScopeMember::Kind::model:
      return (*scopes_)[member.index].class_name;
    case nn::ScopeMember::Kind::layer:
      break;
  }
  return layers_[member.index]->class_name();
}

std::vector<Model::MemberWeight> Model::member_weights(std::size_t scope, std::size_t m) const {
  const nn::ScopeMember& member = (*scopes_)[scope].members[m];
  std::vector<MemberWeight> out;
  if (member.kind == nn::ScopeMember::Kind::input) return out;
  if (member.kind == nn::ScopeMember::Kind::layer) {
    Layer* layer = layers_[member.index].get();
    for (Parameter* p : layer->parameters()) out.push_back({layer, p});
    return out;
  }
  // A nested model's: its layers' and its nested models' layers', in Keras' order, the trainable
  // ones first (Keras' trainable_weights + non_trainable_weights of a model).
  std::vector<Layer*> layers;
  const auto collect = [&](std::size_t s, const auto& self) -> void {
    for (const nn::ScopeMember& inner : (*scopes_)[s].members)
      if (inner.kind == nn::ScopeMember::Kind::layer)
        layers.push_back(layers_[inner.index].get());
      else if (inner.kind == nn::ScopeMember::Kind::model)
        self(inner.index, self);
  };
  collect(member.index, collect);
  for (const bool trainable : {true, false})
    for (Layer* layer : layers)
      for (Parameter* p : layer->parameters())
        if ((layer->trainable() && p->trainable) == trainable) out.push_back({layer, p});
  return out;
}

void Model::save_weights(CheckpointData& out, Snapshot snapshot) const {
  out.model_config = config();
  out.layers.clear();
  // Keras lists a functional model's InputLayers among its layers (with no weights), and a
  // nested model as one layer whose weights are named "<layer>/<weight>".
  const nn::Scope& root = root_scope();
  for (std::size_t m = 0; m < root.members.size(); ++m) {
    const bool model = root.members[m].kind == nn::ScopeMember::Kind::model;
    LayerWeights lw;
    lw.layer = member_name(root.members[m]);
    for (const MemberWeight& w : member_weights(0, m))
      lw.weights.push_back(
          {model ? w.layer->name() + "/" + w.parameter->name : w.parameter->name,
           snapshot == Snapshot::copy ? w.parameter->value.clone() : w.parameter->value});
    out.layers.push_back(std::move(lw));
  }
}

namespace {

// A member of the model with weights, as a weights file keeps it: a layer, or a nested model
// (one group of its layers' weights).
struct WeightGroup {
  std::string name;
  std::string what;  // for messages: "layer 'dense' (Dense)", "model 'encoder' (Functional)"
  std::vector<Parameter*> params;
  std::vector<std::string> param_names;  // "kernel"; a nested model's "dense/kernel"
};

// The file's layers that hold weights, each paired with a group of the model:
//   by name, when the two sets of names are the same (Keras' by_name; a functional model's
//     layers may be listed in another order);
//   unwrapped, when the file holds one layer whose weights are named "<inner layer>/<weight>"
//     for exactly the model's layers: a model saved from Keras' multi_gpu_model, the template
//     nested as one layer of the wrapper (the regrouped layers are kept in `regrouped`);
//   else by order, as Keras' load_weights pairs them, when the counts agree.
struct WeightPairing {
  std::vector<LayerWeights> regrouped;
  std::vector<const LayerWeights*> file_layer;  // per group
  std::string unwrapped_from;                   // the wrapper's layer, when unwrapped
};

std::vector<const LayerWeights*> by_name(const std::vector<const LayerWeights*>& file,
                                         const std::vector<WeightGroup>& model) {
  std::map<std::string, const LayerWeights*> named;
  for (const LayerWeights* lw : file) named[lw->layer] = lw;
  if (named.size() != file.size() || file.size() != model.size()) return {};
  std::vector<const LayerWeights*> paired;
  for (const WeightGroup& group : model) {
    auto it = named.find(group.name);
    if (it == named.end()) return {};
    paired.push_back(it->second);
  }
  return paired;
}

// The nested template's weights regrouped by their inner layer, or nothing when the file is
// not such a wrapper.
std::vector<LayerWeights> unwrap_nested(const std::vector<const LayerWeights*>& file) {
  if (file.size() != 1) return {};
  std::vector<LayerWeights> inner;
  for (const NamedTensor& w : file[0]->weights) {
    const std::size_t slash = w.name.find('/');
    if (slash == std::string::npos || slash == 0) return {};
    const std::string layer = w.name.substr(0, slash);
    if (inner.empty() || inner.back().layer != layer) inner.push_back({layer, {}});
    inner.back().weights.push_back({w.name.substr(slash + 1), w.value});
  }
  return inner;
}

WeightPairing pair_weights(const CheckpointData& in, const std::vector<WeightGroup>& model) {
  WeightPairing p;
  std::vector<const LayerWeights*> file;
  for (const auto& lw : in.layers)
    if (!lw.weights.empty()) file.push_back(&lw);
  p.file_layer = by_name(file, model);
  if (!p.file_layer.empty()) return p;
  p.regrouped = unwrap_nested(file);
  std::vector<const LayerWeights*> inner;
  for (const LayerWeights& lw : p.regrouped) inner.push_back(&lw);
  p.file_layer = by_name(inner, model);
  if (!p.file_layer.empty()) {
    p.unwrapped_from = file[0]->layer;
    return p;
  }
  p.regrouped.clear();
  if (file.size() == model.size()) p.file_layer = file;
  return p;
}

// A weight's place in a Keras 3 file, for messages: "query_dense/0" → "query_dense/vars/0".
std::string keras3_file_path(const std::string& weight) {
  const std::size_t slash = weight.rfind('/');
  if (slash == std::string::npos) return "vars/" + weight;
  return weight.substr(0, slash) + "/vars/" + weight.substr(slash + 1);
}

// A member of the model in a Keras 3 file: its group under /layers, and each of its layers with
// where that layer's weights are inside the group ("" for the member itself; a nested model's
// "layers/dense/", "layers/functional/layers/dense/", ...).
struct Keras3Member {
  std::string group;
  std::vector<std::pair<Layer*, std::string>> layers;
};

// The weights of the file's group `file` for the model's `group` (Keras 3's `member`), in the
// group's order.
LayerWeights keras3_group_weights(const LayerWeights& file, const Keras3Member& member,
                                  const WeightGroup& group, const std::string& source) {
  std::map<std::string, const Tensor*> held;
  for (const NamedTensor& w : file.weights) held[w.name] = &w.value;
  const std::string where = source + ": /layers/" + file.layer;
  std::map<const Parameter*, NamedTensor> found;
  for (const auto& [layer, prefix] : member.layers) {
    std::vector<std::string> keras2_names;
    const auto params = layer->parameters();
    for (Parameter* p : params) keras2_names.push_back(p->name);
    const auto names = nn::keras3_weight_names(*layer, keras2_names);
    for (std::size_t j = 0; j < names.size(); ++j) {
      auto it = held.find(prefix + names[j]);
      if (it == held.end()) it = held.find(prefix + nn::keras3_private_spelling(names[j]));
      if (it == held.end())
        throw DataError(where + " has no " + keras3_file_path(prefix + names[j]) +
                        ", which layer '" + layer->name() + "' (" + layer->class_name() + ", " +
                        std::to_string(keras2_names.size()) + " weights) needs");
      found[params[j]] = {keras3_file_path(prefix + names[j]), *it->second};
    }
  }
  if (file.weights.size() != found.size())
    throw DataError(where + " holds " + std::to_string(file.weights.size()) + " weights, but " +
                    group.what + " has " + std::to_string(found.size()));
  LayerWeights out{"/layers/" + file.layer, {}};
  for (Parameter* p : group.params) out.weights.push_back(found.at(p));
  return out;
}

// Keras 3's pairing (nn/keras3_weight_paths.hpp): each of the model's members with weights, in
// Keras' order with its group, takes that group; every group holding weights must be taken.
WeightPairing pair_keras3_weights(const CheckpointData& in,
                                  const std::vector<Keras3Member>& members,
                                  const std::vector<WeightGroup>& groups,
                                  const std::vector<std::string>& all_groups,
                                  const std::string& source, const std::string& model) {
  std::map<std::string, const LayerWeights*> file;
  for (const LayerWeights& lw : in.layers) file[lw.layer] = &lw;
  WeightPairing p;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const auto it = file.find(members[k].group);
    if (it == file.end())
      throw DataError(source + ": has no weights for " + groups[k].what +
                      ", which Keras 3 keeps in /layers/" + members[k].group +
                      " (a group named after the layer's class and its place among the "
                      "model's layers of that class)");
    p.regrouped.push_back(keras3_group_weights(*it->second, members[k], groups[k], source));
  }
  for (const LayerWeights& lw : in.layers)
    if (!lw.weights.empty() &&
        std::find(all_groups.begin(), all_groups.end(), lw.layer) == all_groups.end())
      throw DataError(source + ": /layers/" + lw.layer + " holds weights, but model '" + model +
                      "' has no layer Keras 3 would keep there (its " +
                      std::to_string(all_groups.size()) +
                      " layers' groups are named after their classes and places among the "
                      "model's layers of that class: " +
                      all_groups.front() + (all_groups.size() > 1 ? ", " + all_groups[1] : "") +
                      (all_groups.size() > 2 ? ", ..." : "") + ")");
  for (const LayerWeights& lw : p.regrouped) p.file_layer.push_back(&lw);
  return p;
}

// "" for a pairing by name; else what the caller warns about: the wrapper unwrapped, or the
// layers paired by order (the first few pairs named).
std::string how_paired(const WeightPairing& p, const std::vector<WeightGroup>& model) {
  if (!p.unwrapped_from.empty())
    return "a multi_gpu_model file: loaded the weights of the template model nested as its "
           "layer '" +
           p.unwrapped_from + "'";
  std::string pairs;
  std::size_t named = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (p.file_layer[i]->layer == model[i].name) continue;
    if (named++ == 4) {
      pairs += ", ...";
      break;
    }
    pairs += (pairs.empty() ? "" : ", ") + ("'" + p.file_layer[i]->layer + "' to '") +
             model[i].name + "'";
  }
  if (named == 0) return "";
  return "its layers are named otherwise than the model's: their weights were paired by order, "
         "as Keras' load_weights pairs them (" +
         pairs + ")";
}

}  // namespace

std::vector<Model::Keras3Group> Model::keras3_groups() const {
  std::vector<Keras3Group> out;
  std::vector<std::string> classes;
  for (const nn::ScopeMember& member : root_scope().members) {
    out.push_back({"", member_name(member), member_class(member)});
    classes.push_back(out.back().class_name);
  }
  const std::vector<std::string> groups = nn::keras3_layer_groups(classes);
  for (std::size_t k = 0; k < out.size(); ++k) out[k].group = groups[k];
  return out;
}

std::vector<std::pair<Layer*, std::string>> Model::keras3_layers_of(
    std::size_t scope, const std::string& prefix) const {
  std::vector<std::pair<Layer*, std::string>> out;
  std::vector<std::string> classes;
  const auto& members = (*scopes_)[scope].members;
  for (const nn::ScopeMember& member : members) classes.push_back(member_class(member));
  const std::vector<std::string> groups = nn::keras3_layer_groups(classes);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::string at = prefix + "layers/" + groups[k] + "/";
    if (members[k].kind == nn::ScopeMember::Kind::layer) {
      out.emplace_back(layers_[members[k].index].get(), at);
    } else if (members[k].kind == nn::ScopeMember::Kind::model) {
      const auto inner = keras3_layers_of(members[k].index, at);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

std::string Model::load_weights(const CheckpointData& in, const std::string& source) {
  // The members with weights, in Keras' order (a pairing by order), and where Keras 3 keeps them.
  std::vector<WeightGroup> groups;
  std::vector<Keras3Member> keras3;
  const std::vector<Keras3Group> keras3_names = keras3_groups();
  const nn::Scope& root = root_scope();
  for (std::size_t m = 0; m < root.members.size(); ++m) {
    const std::vector<MemberWeight> weights = member_weights(0, m);
    if (weights.empty()) continue;
    const nn::ScopeMember& member = root.members[m];
    const bool model = member.kind == nn::ScopeMember::Kind::model;
    WeightGroup group{member_name(member),
                      std::string(model ? "model '" : "layer '") + member_name(member) + "' (" +
                          member_class(member) + ")",
                      {},
                      {}};
    for (const MemberWeight& w : weights) {
      group.params.push_back(w.parameter);
      group.param_names.push_back(model ? w.layer->name() + "/" + w.parameter->name
                                        : w.parameter->name);
    }
    groups.push_back(std::move(group));
    Keras3Member k3{keras3_names[m].group, {}};
    if (model)
      k3.layers = keras3_layers_of(member.index, "");
    else
      k3.layers = {{layers_[member.index].get(), ""}};
    keras3.push_back(std::move(k3));
  }
  std::vector<std::string> all_groups;
  for (const Keras3Group& g : keras3_names) all_groups.push_back(g.group);
  const WeightPairing pairing =
      in.layout == WeightsLayout::keras3
          ? pair_keras3_weights(in, keras3, groups, all_groups, source, name_)
          : pair_weights(in, groups);
  if (pairing.file_layer.size() != groups.size()) {
    std::size_t file_layers = 0;
    for (const auto& lw : in.layers) file_layers += lw.weights.empty() ? 0 : 1;
    throw DataError(source + ": holds weights for " + std::to_string(file_layers) +
                    " layers, but model '" + name_ + "' has " + std::to_string(groups.size()) +
                    " layers with weights (and their names do not pair them either)");
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const WeightGroup& group = groups[i];
    const auto& lw = *pairing.file_layer[i];
    if (lw.weights.size() != group.params.size())
      throw DataError(source + ": layer '" + lw.layer + "' has " +
                      std::to_string(lw.weights.size()) + " weights, model layer '" + group.name +
                      "' has " + std::to_string(group.params.size()));
    for (std::size_t j = 0; j < group.params.size(); ++j) {
      if (lw.weights[j].value.shape() != group.params[j]->value.shape())
        throw DataError(source + ": weight '" + lw.layer + "/" + lw.weights[j].name +
                        "' has shape " + shape_to_string(lw.weights[j].value.shape()) +
                        ", model expects " + shape_to_string(group.params[j]->value.shape()) +
                        " for '" + group.name + "/" + group.param_names[j] + "'");
      require_finite_weight(lw.weights[j].value, source + ": weight '" + lw.layer + "/" +
                                                     lw.weights[j].name + "'");
    }
  }
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (std::size_t j = 0; j < groups[i].params.size(); ++j)
      groups[i].params[j]->value.copy_from(pairing.file_layer[i]->weights[j].value);
  return in.layout == WeightsLayout::keras3 ? "" : how_paired(pairing, groups);
}

}  // namespace tandem
