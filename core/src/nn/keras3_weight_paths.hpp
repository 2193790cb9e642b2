// Where Keras 3 keeps a model's weights in its weights files (io/keras3_weights.hpp): a layer's
// under /layers/<group>, the group named after the layer's class, not its name — Keras'
// to_snake_case of the class, numbered by its place among the model's layers of that class
// ("dense", "dense_1", ...; Keras' saving_lib, _save_container_state) — and each weight by its
// position among the layer's own ("0", "1") or under the sublayer attribute holding it
// ("query_dense/0"). Plain functions; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Keras' naming.to_snake_case: "Conv2DTranspose" → "conv2d_transpose", "PReLU" → "p_re_lu".
std::string keras_snake_case(std::string_view class_name);

/// The /layers group of each layer of a model, given the classes of its layers in Keras' order
/// (model.layers: a functional model's InputLayers among them, a Sequential model's not).
std::vector<std::string> keras3_layer_groups(const std::vector<std::string>& classes);

/// Keras 3's names for the weights of a layer of class `class_name`, given their Keras 2 names
/// in the layer's order ("kernel", "bias"; a sublayer's "query/kernel"): "0", "1", ...;
/// "query_dense/0" for MultiHeadAttention's, whose sublayers Keras 3 keeps as attributes
/// query_dense, key_dense, value_dense and output_dense; "cell/0" for a recurrent layer's
/// ("lstm_cell/kernel"), whose cell Keras 3 keeps as attribute `cell`.
std::vector<std::string> keras3_weight_names(const std::string& class_name,
                                             const std::vector<std::string>& keras2_names);

/// keras3_weight_names for `layer`: a TimeDistributed's weights are its wrapped layer's, under
/// the attribute `layer` ("layer/0", "layer/cell/0").
std::vector<std::string> keras3_weight_names(Layer& layer, const std::vector<std::string>& keras2_names);

/// The spelling Keras 3.0's first releases used for a sublayer's weight, under the private
/// attribute ("_query_dense/0" for "query_dense/0"); "" for a layer's own weight.
std::string keras3_private_spelling(const std::string& weight_name);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
