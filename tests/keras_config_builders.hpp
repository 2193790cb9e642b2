// Pieces of Keras 2 functional model configs for tests, header-only (the GPU test executables
// link no test_support.cpp). Lists are built from vectors: clang reads a braced list of one json
// as a copy of it, not a list.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::test {

/// ["layer", 0, tensor, {}]: Keras 2's reference to output `tensor` of the layer's first call.
inline nlohmann::json keras2_ref(const std::string& layer, int tensor = 0) {
  return nlohmann::json::array({layer, 0, tensor, nlohmann::json::object()});
}

/// A Keras 2 functional layer entry of class `cls` named `name`, called once on `refs`.
inline nlohmann::json keras2_layer(const std::string& cls, const std::string& name,
                                   nlohmann::json config, const std::vector<nlohmann::json>& refs) {
  config["name"] = name;
  return {{"class_name", cls},
          {"name", name},
          {"config", config},
          {"inbound_nodes", nlohmann::json::array({nlohmann::json(refs)})}};
}

}  // namespace tandem::test
