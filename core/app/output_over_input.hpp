// Checks of an output path named on a command line, made before any work, so that a bad one costs
// nothing: an output that is one of the command's own inputs (`tandem import model.h5 -o
// model.h5` used to replace the Keras model with the JSON it was read into, losing its weights),
// and one that is no file to replace (`tandem export -o /dev/null` replaced the device).
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::app {

/// Throws ConfigError at `option` when `output` exists and is no file to replace — a device, a
/// FIFO, a socket or a folder (Tandem renames a new file over an output, which would replace
/// /dev/null itself) — or names the same file as one of `inputs` (the same path, a link to it, or
/// another path to it; paths that do not exist yet are never the same). '-' (standard output) is
/// the caller's to handle before.
void refuse_bad_output(const std::filesystem::path& output,
                       std::initializer_list<std::filesystem::path> inputs,
                       const std::string& option);

/// Throws ConfigError at `option` when `output` names one of the files that the data specs of a
/// run config (its "data" object) name: every string in them, resolved against `base_dir` as the
/// datasets resolve their paths. (`tandem predict -o x.npy` replaced the samples it was
/// predicting with its predictions.)
void refuse_output_over_data(const std::filesystem::path& output, const nlohmann::json& data,
                             const std::filesystem::path& base_dir, const std::string& option);

}  // namespace tandem::app
