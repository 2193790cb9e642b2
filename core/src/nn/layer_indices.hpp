// Private (nn): the index list of every layer of a model, for the helpers that take a subset of
// its layers (a pipeline stage's) and are also called for the whole model.
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

#include "tandem/model.hpp"

namespace tandem::nn {

/// 0, 1, ..., model.layer_count() - 1.
inline std::vector<std::size_t> every_layer(const Model& model) {
  std::vector<std::size_t> layers(model.layer_count());
  std::iota(layers.begin(), layers.end(), std::size_t{0});
  return layers;
}

}  // namespace tandem::nn
