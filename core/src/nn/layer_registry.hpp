// The layer classes a model config may name, by Keras class name.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "util/config_object.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Reads a layer's "config" object (the common keys name/trainable/dtype are already consumed)
/// and makes the layer. `name` is the final layer name.
using LayerFactory =
    std::function<std::unique_ptr<Layer>(ConfigObject& config, const std::string& name)>;

struct LayerClass {
  std::string default_name;  // "dense": Keras names layers dense, dense_1, dense_2, ...
  LayerFactory make;
};

/// Keras class name -> factory.
const std::map<std::string, LayerClass>& layer_registry();

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
