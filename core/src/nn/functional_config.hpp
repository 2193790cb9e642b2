// Private (nn): reading the graph of a Keras functional model config ("Functional" or "Model"),
// in Keras 2's form (inbound_nodes [[["dense", 0, 0, {}]]]) and Keras 3's ({"args":
// [{"class_name": "__keras_tensor__", "config": {"keras_history": ["dense", 0, 0]}}]}), into the
// layers' calls in topological order, each with the calls whose outputs it takes (a layer
// called more than once, a shared layer, has a call per inbound node) and the arguments of each
// call (MultiHeadAttention's value, key, use_causal_mask). One level of the model: a model
// nested as a layer (a Sequential or Functional entry among the layers) is one of its layers
// here, with its calls (nn/model_graph.hpp flattens it). What Tandem cannot run is refused at
// its JSON path: a second output of a layer that has one, a call that leads to no output of the
// model, an input that leads to none, a cycle, a reference to nothing. A model may have several
// inputs and outputs. Plain functions and data.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// One call's output: the layer's name, which of its calls (counted from 0; see
/// read_functional_graph for a nested model's) and which of the call's outputs (a nested model's; a
/// layer has one). Ordered by layer and call only: the call, whatever its output.
struct CallRef {
  std::string layer;
  int call = 0;
  int tensor = 0;
  bool operator<(const CallRef& o) const {
    return layer != o.layer ? layer < o.layer : call < o.call;
  }
};

/// What one call (an inbound node) passes: the tensors of its first argument, then its other
/// tensor arguments by name, and its other keyword arguments.
struct CallSpec {
  std::vector<CallRef> inputs;
  /// Per input: "" for the first argument's tensors; else the argument's keyword ("value"), or
  /// "#i" for Keras 3's i-th positional argument (i >= 1; the layer knows its name).
  std::vector<std::string> names;
  nlohmann::json options = nlohmann::json::object();  // non-tensor keyword arguments, no nulls
  /// Keras 2's explicit `training` of the call (a BatchNormalization or a whole nested model
  /// kept in inference mode, MC dropout): the mode the call runs in, whatever the model's.
  /// Keras 3 replaces a call's recorded `training` with the model's own mode: none there.
  std::optional<bool> training;
};

/// A layer of a functional model and its calls (a shared layer is called more than once).
struct FunctionalLayer {
  const nlohmann::json* entry = nullptr;  // its entry in the config's "layers" (borrowed)
  std::string path;                       // that entry's JSON path
  std::string name;
  std::vector<CallSpec> calls;
  bool model = false;  // the entry is a whole model (Sequential, Functional, Model)
};

/// One call of a layer, in the order the model runs them.
struct FunctionalCall {
  std::size_t layer = 0;    // index into FunctionalGraph::layers
  int call = 0;             // which of the layer's calls
  std::vector<int> inputs;  // indices into FunctionalGraph::calls; -1 - i: the model's input i
  std::optional<bool> training{};  // the mode it runs in whatever the model's (nn/model_graph.hpp)
  /// Per input, which output of its call it takes (Keras' tensor index; a layer of several
  /// outputs, nn::SeveralOutputs): set in a ModelGraph's calls only, empty elsewhere (all 0).
  std::vector<int> input_parts{};
};

/// An InputLayer of the model. A Sequential config without one has an unnamed input whose
/// entry is null.
struct FunctionalInput {
  std::string name;
  const nlohmann::json* entry = nullptr;  // borrowed, as FunctionalLayer::entry
  std::string path;
};

struct FunctionalGraph {
  std::vector<FunctionalInput> inputs;  // in input_layers order
  std::vector<FunctionalLayer> layers;  // in the order of their first calls, no InputLayer
  std::vector<FunctionalCall> calls;    // topological (config order where free)
  std::vector<std::size_t> outputs;     // the calls output_layers names, in its order
  std::vector<CallRef> output_refs;     // the same as output_layers names them (with tensors)
};

/// Reads `layers`, `input_layers` and `output_layers` of `config` (the functional config's
/// "config" object; the entries stay owned by it). References to a nested model's calls are
/// counted from 0 here, wherever Keras starts them: Keras 2 numbers a Functional model's calls
/// (and a Sequential model's with an input: an InputLayer first, or a first layer with
/// batch_input_shape; one without an input as its references show) from 1 everywhere; Keras 3
/// (its inbound nodes written as {"args": ...}) only in output_layers, and only a Functional
/// model's. Throws ConfigError naming the path.
FunctionalGraph read_functional_graph(ConfigObject& config);

/// The graph of a Sequential config's `layers` (at `path`): each layer called once on the one
/// before, the first on the InputLayer (the first entry, if it is one; else an unnamed input
/// whose entry is null). Every layer needs a name, as Keras writes. Throws ConfigError naming
/// the path.
FunctionalGraph sequential_graph(const nlohmann::json& layers, const std::string& path);

/// Whether a layer entry is a whole model (class Sequential, Functional or Model).
bool is_model_entry(const nlohmann::json& entry);

/// Throws ConfigError at `path`.class_name when the layer entry is one Tandem cannot build for a
/// known reason, saying what to do instead: a Lambda (Python code); an operation called on a
/// Keras tensor that nn/function_layers.hpp does not read as a layer (Keras 3's operation
/// entries of module keras.src.ops.*, such as keras.ops.split).
void refuse_unbuildable_layer(const nlohmann::json& entry, const std::string& path);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
