// Private (nn): Keras' order of a functional model's layers — its `model.layers`, the order
// Keras' save_weights lists them in (an HDF5 file's layer_names) and its load_weights pairs a
// file's layers by when their names are not the model's. It is not the config's order: Keras
// orders the graph (Keras 2.15's _map_graph_network, Keras 3's map_graph), so a config whose
// layers are listed in another order still gives the same `model.layers`:
//   - a walk from the outputs (in output order), depth first through each call's inputs (in
//     argument order), numbers each layer where it first meets it and lists the calls in post
//     order;
//   - a call's depth is its distance from the outputs (the longest), and a layer's the deepest
//     of its calls';
//   - the layers, InputLayers included, deepest first; those of one depth by their numbers.
// Plain function; any thread.
#pragma once

#include <cstddef>
#include <vector>

#include "nn/functional_config.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// The layers of a functional model of `input_count` inputs, its `calls` (each with its layer
/// and the calls it reads; -1 - i for input i) and the calls giving its `outputs`, in Keras'
/// order: InputLayer i as -1 - i, a layer by its index. Every input and layer appears once when
/// every call leads to an output (as read_functional_graph ensures).
std::vector<int> keras_layer_order(std::size_t input_count,
                                   const std::vector<FunctionalCall>& calls,
                                   const std::vector<std::size_t>& outputs);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
