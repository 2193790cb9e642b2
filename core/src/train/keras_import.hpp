// `tandem import`: a run config made from a Keras HDF5 model file — its model_config as the
// model, and from its training_config (what Keras' compile() was given) the optimizer, loss,
// loss_weights and metrics, in the forms the run config reads (docs/config.md). What the file
// does not hold (the data, epochs, batch size) the caller adds (--set) before training. A model
// saved from Keras 2's multi_gpu_model (its template nested in a wrapper that slices each batch
// with Lambda layers and concatenates the template's outputs) imports as its template.
//
// Plain functions: no state, any thread (HDF5 reads take the process-wide HDF5 mutex).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/model.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct KerasImport {
  nlohmann::json config;              // the run config
  std::vector<std::string> missing;   // keys training still needs ("data.train", "loss", ...)
  std::string model_summary;          // "Functional model 'name', 18,657 parameters"
  /// What was left out of the file's model, for a warning ("" for nothing): a multi_gpu_model
  /// wrapper around the imported template.
  std::string unwrapped;
};

/// Reads `file` and makes the run config; checks the model, loss, metrics and optimizer as
/// `tandem train` would. Throws DataError (not a Keras model file, no model_config) or
/// ConfigError naming the key of the made config that Tandem cannot read.
/// `data_shapes` gives the lengths its inputs leave to the data, if any (Model::from_config).
KerasImport import_keras_file(const std::filesystem::path& file,
                              const Model::DataInputShapes& data_shapes = {});

/// The same from the two attributes' values (null training_config: the model was saved
/// uncompiled); `name` becomes the run's name.
KerasImport import_keras_configs(const nlohmann::json& model_config,
                                 const nlohmann::json& training_config, const std::string& name,
                                 const Model::DataInputShapes& data_shapes = {});

}  // namespace tandem

TANDEM_INTERNAL_API_END
