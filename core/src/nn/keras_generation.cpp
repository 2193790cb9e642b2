#include "nn/keras_generation.hpp"

namespace tandem::nn {

bool is_keras2_version(const std::string& keras_version) {
  const std::size_t dot = keras_version.find('.');
  const std::string major = keras_version.substr(0, dot);
  return !major.empty() && major.size() <= 2 &&
         major.find_first_not_of("0123456789") == std::string::npos && std::stoi(major) <= 2;
}

bool uses_keras2_definitions(const nlohmann::json& model_config) {
  if (!model_config.is_object()) return false;
  const auto it = model_config.find(kKerasVersionKey);
  return it != model_config.end() && it->is_string() && is_keras2_version(it->get<std::string>());
}

nlohmann::json with_file_keras_version(nlohmann::json model_config,
                                       const std::string& file_version) {
  if (model_config.is_object() && !model_config.contains(kKerasVersionKey) && !file_version.empty())
    model_config[kKerasVersionKey] = file_version;
  return model_config;
}

}  // namespace tandem::nn
