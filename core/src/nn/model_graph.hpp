// Private (nn): the graph a Model runs, read from its config, with Keras' nested models
// flattened into it. A Keras model may use a whole model as a layer (a Sequential or Functional
// entry among its layers: a backbone, a classifier head, the encoder of a siamese network,
// called once or more). Tandem runs the layers of every nested model as layers of the one
// graph — a nested model called twice calls each of its layers twice, sharing their weights as
// a shared layer does — so replicas, pipelines, checkpoints of the template and the ONNX export
// see plain layers. The nesting is kept beside the graph (the scopes) for what Keras sees of
// it: the summary's rows, the groups of its weights files, the config written back.
//
// A layer's name must be unique in the whole model, nested models included (Keras only asks it
// of each model's own layers): Tandem's layers are one namespace (checkpoints, placement, the
// ONNX graph). Plain functions and data.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/functional_config.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// A tensor of the flattened graph: output `part` of call `call` (a ModelGraph::calls index;
/// part 0 unless the call's layer gives several outputs), or the model's input -1 - call.
struct ValueRef {
  int call = 0;
  int part = 0;
};

/// A member of a model or of a model nested in it, as Keras lists its model.layers.
struct ScopeMember {
  enum class Kind { input, layer, model };
  Kind kind = Kind::layer;
  /// input: the scope's InputLayer i; layer: a layer of ModelGraph::layers; model: a scope.
  std::size_t index = 0;
  /// Per call in this scope, Keras' names of the tensors it takes ("dense[0][0]").
  std::vector<std::vector<std::string>> connected;
  /// Per call in this scope, the value of each of its outputs.
  std::vector<std::vector<ValueRef>> outputs;
};

/// The model itself (scopes[0]) or a model nested in it.
struct Scope {
  std::string name;
  std::string class_name;  // "Sequential" or "Functional" (Keras 2's "Model" is Functional)
  int parent = -1;         // the scope holding it; -1 for the model itself
  bool trainable = true;   // false when its config or a model holding it says false
  std::vector<ScopeMember> members;  // Keras' order: a Functional model's InputLayers among them
};

/// A layer (not a model) of the model or of a nested one: its config entry, calls and scope.
struct FlatLayer {
  const nlohmann::json* entry = nullptr;  // borrowed from the config
  std::string path;                       // the entry's JSON path
  std::string name;
  std::vector<CallSpec> calls;          // per call of ModelGraph::calls it runs, in order
  std::vector<std::string> call_paths;  // per call, its inbound node's JSON path (a Sequential
                                        // model's layer: its entry's)
  std::size_t scope = 0;                // the scope that lists it
  bool trainable = true;                // false when a model holding it is frozen
};

/// An InputLayer of a nested model: the value a call passes it must have its shape.
struct InputCheck {
  int value = 0;  // a ModelGraph::calls index, or -1 - i for the model's input i
  const nlohmann::json* entry = nullptr;  // the InputLayer's entry
  std::string input_path;                 // its JSON path
  std::string model;                      // the nested model's name
  std::string call_path;                  // the JSON path of the call that passes the value
  int part = 0;                           // which output of that call
};

struct ModelGraph {
  std::vector<FunctionalInput> inputs;     // the model's inputs, in input_layers order
  std::vector<FlatLayer> layers;           // in the order of their first calls
  std::vector<FunctionalCall> calls;       // topological; a layer and its call number
  std::vector<std::size_t> outputs;        // the calls giving the model's outputs, in order
  std::vector<int> output_parts;           // per output, which of its call's outputs it is
  std::vector<std::string> output_layers;  // the layer (or nested model) output_layers names
  std::vector<Scope> scopes;               // [0]: the model; more when models are nested
  std::vector<InputCheck> input_checks;
  bool nested() const { return scopes.size() > 1; }
};

/// The graph of the model whose "config" object is `config` (read by the caller, which checks
/// the model's other keys), a Sequential one when `sequential`. Nested models are read whole
/// (their configs' keys checked here). Throws ConfigError naming the JSON path.
ModelGraph read_model_graph(ConfigObject& config, bool sequential, const std::string& name);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
