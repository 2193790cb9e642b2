// An output file that is one of the command's own inputs: `tandem import model.h5 -o model.h5`
// used to replace the Keras model with the JSON it was read into, losing its weights.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::app {

/// Throws ConfigError at `option` when `output` names the same file as one of `inputs` (the same
/// path, a link to it, or another path to it). Paths that do not exist yet are never the same.
void refuse_output_over_input(const std::filesystem::path& output,
                              std::initializer_list<std::filesystem::path> inputs,
                              const std::string& option);

/// The same for the files that the data specs of a run config (its "data" object) name: every
/// string in them, resolved against `base_dir` as the datasets resolve their paths.
/// (`tandem predict -o x.npy` replaced the samples it was predicting with its predictions.)
void refuse_output_over_data(const std::filesystem::path& output, const nlohmann::json& data,
                             const std::filesystem::path& base_dir, const std::string& option);

}  // namespace tandem::app
