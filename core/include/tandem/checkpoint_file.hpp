// Checkpoint files: the on-disk format (docs/design.md contract 4), as plain data.
//
// A checkpoint is an HDF5 file in the Keras legacy layout, so h5py and Keras read it:
//   /                      attrs keras_version, backend, model_config (JSON)
//   /model_weights         attrs layer_names, keras_version, backend
//   /model_weights/<layer> attr weight_names ("<layer>/kernel:0", ...)
//   /model_weights/<layer>/<layer>/kernel:0   float32 dataset
// Tandem's own training state sits beside it in /tandem (format_version, a JSON document with
// epoch/step/history/config, optimizer slots, RNG states). Strings are fixed-length ASCII.
//
// Every non-empty array dataset is written with HDF5's Fletcher32 checksum, which HDF5 verifies
// on every read: a damaged byte is an error naming the dataset, never weights loaded silently.
// Writes are crash-safe: the file is written to a temporary name in the same folder, flushed to
// disk, then renamed over the target, so a crash at any moment leaves the previous file whole.
// Functions here are thread-compatible: call them from one thread at a time (HDF5 is serial).
//
// Ownership: CheckpointData and its parts are plain values; their tensors share storage the way
// Tensor's copies do. Model::save_weights and Trainer::checkpoint fill one with copies of the
// model's tensors (Snapshot::copy) unless asked to share them (Snapshot::shared). Nothing here
// keeps a file open after a call returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"
#include "tandem/snapshot.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

inline constexpr int kCheckpointFormatVersion = 1;

struct TANDEM_EXPORT NamedTensor {
  std::string name;  // a weight: "kernel"; an optimizer slot: "dense/kernel/m"
  Tensor value;
};

struct TANDEM_EXPORT LayerWeights {
  std::string layer;                 // "dense_1"
  std::vector<NamedTensor> weights;  // Keras order; may be empty (Flatten, Dropout)
};

struct TANDEM_EXPORT TrainingStateData {
  nlohmann::json state;  // epoch, step, history, optimizer config, ...
  std::vector<NamedTensor> optimizer_slots;
  std::map<std::string, std::vector<std::uint64_t>> rng_states;  // "loader", "dense/dropout", ...
};

/// How a file names its weights, and so how a model pairs them with its own.
enum class WeightsLayout {
  /// Keras 2's HDF5 layout (Tandem's checkpoints, Keras' model.save("x.h5")): layers by their
  /// names, in model order; weights by name ("kernel").
  keras2,
  /// Keras 3's (model.save_weights("x.weights.h5"), a .keras archive's model.weights.h5):
  /// layers named after their class and place among the model's layers of that class ("dense",
  /// "dense_1", in no particular order here); weights by position under the layer, or a
  /// sublayer's attribute ("0", "1", "query_dense/0"). Model::load_weights pairs them.
  keras3,
};

struct TANDEM_EXPORT CheckpointData {
  nlohmann::json model_config;                // {"class_name": "Sequential", "config": {...}}
  nlohmann::json training_config;             // Keras' compile() settings, when the file has them
  /// Read: the file's root "keras_version" ("" when absent), the Keras whose definitions its
  /// model follows when model_config names none (nn/keras_generation.hpp). Not written: the
  /// writer stamps model_config's "keras_version", or Keras 3's.
  std::string keras_version;
  WeightsLayout layout = WeightsLayout::keras2;  // read; written files are always keras2
  std::vector<LayerWeights> layers;           // every layer of the model, in model order (keras2)
  std::optional<TrainingStateData> training;  // absent in a weights-only file
};

/// Writes atomically (temp file, flush, rename). Throws RunError naming the path on I/O failure;
/// the previous file at `path`, if any, is untouched then.
TANDEM_EXPORT void write_checkpoint_file(const std::filesystem::path& path,
                                         const CheckpointData& data);

/// Reads a checkpoint written by Tandem, a Keras .h5 weights/model file with the same layout, a
/// Keras 3 weights file (.weights.h5) or a Keras 3 .keras archive (its config.json as
/// model_config, its compile_config as training_config, metadata.json's keras_version, its
/// model.weights.h5). Throws DataError naming the path and the problem (missing, not HDF5,
/// truncated, wrong layout, newer format version).
TANDEM_EXPORT CheckpointData read_checkpoint_file(const std::filesystem::path& path);

/// The most weight values (those of the layers, not the training state) a checkpoint may hold
/// for the model it is read for: its count_params(). A file declaring more is refused naming the
/// weight that goes past it, before that weight is read — a few kilobytes of file can declare
/// gigabytes of compressed or never-written arrays.
TANDEM_EXPORT CheckpointData read_checkpoint_file(const std::filesystem::path& path,
                                                  std::int64_t max_weight_values);

/// The same, but only the file's configs (model_config, training_config, keras_version): no
/// weights are read, so a file whose arrays are large (or crafted to declare huge ones) costs
/// only its attributes. `layers` and `training` are empty. Errors as read_checkpoint_file's.
TANDEM_EXPORT CheckpointData read_checkpoint_configs(const std::filesystem::path& path);

/// What verify_checkpoint_file found: every dataset, and those carrying a checksum (HDF5's
/// Fletcher32 filter, on every non-empty array Tandem writes; none in older files and Keras').
struct TANDEM_EXPORT CheckpointVerification {
  std::size_t datasets = 0;
  std::size_t checksummed = 0;
};

/// Reads the whole checkpoint as read_checkpoint_file does, and every checksummed dataset in
/// it, so that each checksum is verified. Throws DataError naming the path and the first
/// damaged dataset.
TANDEM_EXPORT CheckpointVerification verify_checkpoint_file(const std::filesystem::path& path);

}  // namespace tandem
