// Keras 3's .keras files (model.save("x.keras")): a zip archive of metadata.json
// ({"keras_version", "date_saved"}), config.json (the model as model.to_json() writes it, with a
// "compile_config" when it was compiled) and model.weights.h5 (io/keras3_weights.hpp's layout),
// and assets/ for layers that keep files (vocabularies). Keras' zipped=False writes the same
// members into a folder, which is read the same way.
// Plain functions; any thread (no HDF5 here: the weights come back as the file's bytes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct KerasArchive {
  nlohmann::json config;              // config.json, without Keras' "shared_object_id" marks
  std::string keras_version;          // metadata.json's; "" when it gives none
  std::vector<std::uint8_t> weights;  // model.weights.h5's bytes, when asked for
};

/// Whether `path` is to be read as a .keras archive: a file starting as a zip does ("PK\3\4"),
/// or a folder holding a config.json.
bool is_keras_archive(const std::filesystem::path& path);

/// The archive's configs, and its weights file when `with_weights`. Throws DataError naming the
/// path: a zip that is not a Keras archive (no config.json: its members listed), weights kept
/// as model.weights.npz (Keras' pickled NumPy form) or missing, a config.json or metadata.json
/// that is not a JSON object, and what io/zip_archive.hpp refuses (corrupt, encrypted members).
KerasArchive read_keras_archive(const std::filesystem::path& path, bool with_weights);

}  // namespace tandem

TANDEM_INTERNAL_API_END
