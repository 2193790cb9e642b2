// Private (nn): reading the graph of a Keras functional model config ("Functional" or "Model"),
// in Keras 2's form (inbound_nodes [[["dense", 0, 0, {}]]]) and Keras 3's ({"args":
// [{"class_name": "__keras_tensor__", "config": {"keras_history": ["dense", 0, 0]}}]}), into the
// layers' entries in topological order with the names of the layers each one takes. What Tandem
// cannot run yet is refused at its JSON path: several inputs or outputs, a layer called more
// than once (shared layers), a layer that does not lead to the output. Plain functions and data.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/config_object.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// A layer of a functional model and what it is called on.
struct FunctionalLayer {
  const nlohmann::json* entry = nullptr;  // its entry in the config's "layers" (borrowed)
  std::string path;                       // that entry's JSON path
  std::string name;
  std::vector<std::string> inbound;  // the layers whose outputs it takes, in order
};

struct FunctionalGraph {
  std::string input_name;  // the InputLayer's
  const nlohmann::json* input_entry = nullptr;
  std::string input_path;
  std::vector<FunctionalLayer> layers;  // topological (config order where free), no InputLayer
};

/// Reads `layers`, `input_layers` and `output_layers` of `config` (the functional config's
/// "config" object; the entries stay owned by it). Throws ConfigError naming the path.
FunctionalGraph read_functional_graph(ConfigObject& config);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
