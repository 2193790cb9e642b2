// Private (nn): tf.keras 2's TensorFlow functions called on Keras tensors in a functional model —
// `x + y`, `x * 0.5`, `tf.nn.relu(x)`, `tf.reshape(x, [-1, 4, 4])`, `tf.concat([a, b], -1)` —
// which its to_json() writes as TFOpLambda entries (config.function "__operators__.add",
// "math.multiply", ...; the call's first argument in the node, the others as its keyword
// arguments: tensors as ["layer", node, tensor], constants as JSON), read as the Keras layers
// that compute them:
//
//   x + y, x - y, x * y, tf.maximum(x, y), tf.minimum(x, y) (two tensors)  Add, Subtract,
//                                                  Multiply, Maximum, Minimum (one shape)
//   x + c, x - c, x * c, x / c, -x (a number)     Rescaling (x / c as x · (1 / c): within an ulp)
//   x + v, x - v (one number per feature)          Normalization (mean -v or v, variance 1:
//                                                  exactly x + v, x - v)
//   tf.maximum(x, 0)                               ReLU
//   tf.nn.relu, relu6, leaky_relu, elu, selu, gelu (exact), silu/swish, softplus, softsign,
//   tf.math.sigmoid, tanh, exp, tf.nn.softmax (last axis)          Activation (ReLU, LeakyReLU)
//   tf.reshape(x, [-1, ...])                       Reshape
//   tf.concat([a, b, ...], axis)                   Concatenate
//   tf.transpose(x, [0, ...])                      Permute
//   tf.reduce_mean / reduce_max over axis 1, [1, 2] or [1, 2, 3]
//                                                  GlobalAverage/MaxPooling1D/2D/3D (keepdims)
//   tf.matmul(a, b) of sequences (transpose_b)    Dot (axes [2, 1]; [2, 2])
//
// Each keeps the entry's name; a model's config written back (a checkpoint's model_config) holds
// the layers. Anything else — another function, a constant first argument, an argument the
// layer cannot take, a function called twice in one entry — is refused at its JSON path, naming
// the function. Keras 3's operation entries (keras.src.ops) are refused by
// refuse_unbuildable_layer. Plain functions of JSON; any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Whether a model config (its models nested as layers included) has a TFOpLambda entry.
bool calls_tf_functions(const nlohmann::json& model);

/// `model` (a Keras model config at JSON path `path`) with every TFOpLambda entry replaced by the
/// Keras layer entry above, in place, at the same position (its errors keep the entry's path);
/// `translated` gets "tf.<function> as <Layer>" once per kind. Throws ConfigError at the
/// entry's path for a function or argument without a layer.
nlohmann::json tf_functions_as_layers(nlohmann::json model, const std::string& path,
                                      std::vector<std::string>& translated);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
