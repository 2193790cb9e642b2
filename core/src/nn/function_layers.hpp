// Private (nn): functions called on Keras tensors in a functional model — `x + y`, `x * 0.5`,
// `-x`, `tf.nn.relu(x)`, `tf.reshape(x, [-1, 4, 4])`, `tf.concat([a, b], -1)` — read as the Keras
// layers that compute them. tf.keras 2's to_json() writes them as TFOpLambda entries
// (config.function "__operators__.add", "math.multiply", ...; the call's first argument in the
// node, the others as its keyword arguments: tensors as ["layer", node, tensor], constants as
// JSON); Keras 3's as operation entries (module keras.src.ops.numpy or .nn, class "Add",
// "Multiply", "Relu", ...; its node {"args": [x, y], "kwargs": {}}, a constant first for `2 * x`):
//
//   x + y, x - y, x * y, maximum(x, y), minimum(x, y) (two tensors)   Add, Subtract, Multiply,
//                                                  Maximum, Minimum (one shape)
//   x + c, x - c, c - x, x * c, x / c, -x (a number)
//                                                  Rescaling (x / c as x · (1 / c): within an ulp)
//   x + v, x - v (one number per feature)          Normalization (mean -v or v, variance 1:
//                                                  exactly x + v, x - v)
//   maximum(x, 0), relu6                           ReLU
//   relu, leaky_relu, elu, selu, gelu (exact), silu/swish, softplus, softsign, sigmoid, tanh,
//   exp, softmax (last axis)                       Activation (LeakyReLU)
//   softmax over one other axis                    Softmax (its axis)
//   reshape(x, [-1, ...])                          Reshape
//   concat / concatenate([a, b, ...], axis)        Concatenate
//   transpose(x, [0, ...])                         Permute
//   reduce_mean / mean, reduce_max / max over axis 1, [1, 2] or [1, 2, 3]
//                                                  GlobalAverage/MaxPooling1D/2D/3D (keepdims)
//   reduce_sum / sum, reduce_min / min, and the mean and max over other adjacent axes
//                                                  TandemReduction (nn/reduction_layer.hpp)
//   matmul(a, b) of sequences (tf.keras 2's transpose_a/b, adjoint_a/b)
//                                                  Dot (axes [2, 1]; [1, 1], [2, 2], [1, 2])
//   cast to float32 (or float64)                  Identity
//   tf.math.l2_normalize(x, axis) (epsilon 1e-12) UnitNormalization
//   x[...] (tf.keras 2's SlicingOpLambda, Keras 3's GetItem), expand_dims, squeeze
//                                                  TandemIndexing (nn/indexing_layer.hpp)
//
// Each keeps the entry's name, in the entry's own Keras form; a model's config written back (a
// checkpoint's model_config) holds the Keras layers, and for Tandem's own ones (TandemIndexing,
// TandemReduction: no Keras layer computes those) the functions' entries as they were given.
// Anything else — another function, an argument or constant the layer cannot take, a function
// called twice in one entry — is refused at its JSON path, naming the function
// (refuse_unbuildable_layer names Keras 3's other operations). Plain functions of JSON; any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Whether `cls` is one of Tandem's own layers that run functions no Keras layer computes
/// (TandemIndexing, TandemReduction).
bool is_tandem_layer(const std::string& cls);

/// Whether a model config (its models nested as layers included) calls a function on a Keras
/// tensor that function_layers reads: a TFOpLambda entry, or a Keras 3 operation entry.
bool calls_functions(const nlohmann::json& model);

/// `model` (a Keras model config at JSON path `path`) with every such entry replaced by the Keras
/// layer entry above, at the same position (its errors keep the entry's path); `translated` gets
/// "tf.math.multiply as Rescaling" (Keras 3: "keras.src.ops.numpy.Multiply as Rescaling") once
/// per kind, `functions` (a JSON object) each such layer's name with the function it runs
/// ("tf.math.multiply"), and `given` (a JSON object) the name of each of Tandem's own layers
/// (is_tandem_layer) with its entry as given. Throws ConfigError at the entry's path for a
/// function, argument or constant without a layer.
nlohmann::json functions_as_layers(nlohmann::json model, const std::string& path,
                                   std::vector<std::string>& translated, nlohmann::json& functions,
                                   nlohmann::json& given);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
