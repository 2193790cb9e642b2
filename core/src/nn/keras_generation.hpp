// Which Keras wrote a model config: the few definitions Keras 3 changed (hard_sigmoid, the
// masked rows of MultiHeadAttention; nn/layer_extensions.hpp, KerasTwoDefinitions) follow it, so
// a Keras 2.15 model computes what tf.keras computed. Stateless; any thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// "keras_version" at the top of a model config, as Keras' to_json() writes it; a checkpoint's
/// root attribute of the same name when the file's model_config has none.
inline constexpr const char* kKerasVersionKey = "keras_version";

/// Whether `keras_version` ("2.15.0", "3.3.3", "") names Keras 2 or older (1.x): then Keras 2's
/// definitions apply. An empty or unreadable version is Keras 3's, Tandem's own.
bool is_keras2_version(const std::string& keras_version);

/// is_keras2_version of the model config's "keras_version" (absent or not a string: false).
bool uses_keras2_definitions(const nlohmann::json& model_config);

/// A model config read from a Keras HDF5 file, which keeps the version at its root, not in the
/// model_config: `model_config` with "keras_version" set to `file_version` when it names none
/// (and `file_version` is not empty). Used where a file's model config becomes a model.
nlohmann::json with_file_keras_version(nlohmann::json model_config,
                                       const std::string& file_version);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
