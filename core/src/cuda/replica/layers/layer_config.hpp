// Private (CUDA module): reading a host layer's Keras config() for its device twin (the keys the
// nn/ layers write), the sliding-window axes from nn::window_along, and the checks every device
// layer makes of its shapes and bound parameters. Host code only (C++20; not for nvcc).
// Ownership: none. Thread-safety: pure functions, any thread.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/window_math.hpp"
#include "nn/spatial.hpp"
#include "tandem/error.hpp"
#include "tandem/tensor.hpp"

namespace tandem::cuda::layers {

/// "layer 'conv2d' (Conv2D)", as the host layers name themselves in errors.
inline std::string layer_who(const nlohmann::json& config, const std::string& class_name) {
  return "layer '" + config.value("name", std::string("?")) + "' (" + class_name + ")";
}

/// Where a key of a layer's config is, in ConfigErrors: "conv2d.config.filters" (the whole
/// config for an empty key).
inline std::string config_path(const nlohmann::json& config, const std::string& key) {
  return config.value("name", std::string("?")) + ".config" + (key.empty() ? "" : "." + key);
}

/// A value of the config, or a ConfigError naming the layer and the key.
template <class T>
T config_value(const nlohmann::json& config, const char* key, const std::string& who) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null())
    throw ConfigError(config_path(config, key), who + ": required key is missing");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(config_path(config, key), who + ": unexpected value: " + e.what());
  }
}

template <class T>
T config_value(const nlohmann::json& config, const char* key, const std::string& who, T fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  return config_value<T>(config, key, who);
}

/// An (rows, cols) pair: a list of two integers or one integer for both.
inline nn::Pair config_pair(const nlohmann::json& config, const char* key, const std::string& who,
                            nn::Pair fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    return {v, v};
  }
  if (it->is_array() && it->size() == 2 && (*it)[0].is_number_integer() &&
      (*it)[1].is_number_integer())
    return {(*it)[0].get<std::int64_t>(), (*it)[1].get<std::int64_t>()};
  throw ConfigError(config_path(config, key),
                    who + ": expected an integer or a list of 2 integers");
}

/// "valid" or "same", case-insensitive.
inline nn::Padding config_padding(const nlohmann::json& config, const std::string& who) {
  std::string p = config_value<std::string>(config, "padding", who, "valid");
  for (char& ch : p) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (p == "valid") return nn::Padding::valid;
  if (p == "same") return nn::Padding::same;
  throw ConfigError(config_path(config, "padding"),
                    who + ": expected one of 'valid', 'same', got '" + p + "'");
}

/// One window axis exactly as the host layer computes it (nn::window_along).
inline window::Axis make_axis(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                              std::int64_t dilation, nn::Padding padding) {
  const nn::Window w = nn::window_along(in, kernel, stride, dilation, padding);
  window::Axis a;
  a.in = in;
  a.out = w.out;
  a.kernel = kernel;
  a.stride = stride;
  a.dilation = dilation;
  a.pad_before = w.pad_before;
  return a;
}

/// Throws ShapeError unless `got` equals `expected` (the host model's shape and the one the
/// device layer computes from the config).
inline void check_shape(const std::string& who, const char* what, const Shape& got,
                        const Shape& expected) {
  if (got != expected)
    throw ShapeError(who + " on a CUDA replica: " + what + " shape " + shape_to_string(got, true) +
                     " does not match " + shape_to_string(expected, true) +
                     " computed from its config");
}

/// Throws RunError unless `params` has the sizes `sizes`, in order.
inline void check_parameters(const std::string& who, const std::vector<DeviceParameter>& params,
                             const std::vector<std::int64_t>& sizes) {
  bool ok = params.size() == sizes.size();
  for (std::size_t i = 0; ok && i < sizes.size(); ++i)
    ok = params[i].size == sizes[i] && params[i].value != nullptr;
  if (!ok) {
    std::string want, got;
    for (std::int64_t s : sizes) want += (want.empty() ? "" : ", ") + std::to_string(s);
    for (const DeviceParameter& p : params)
      got += (got.empty() ? "" : ", ") + std::to_string(p.size);
    throw RunError(who + " on a CUDA replica: bound parameters of sizes (" + got + "), expected (" +
                   want + ")");
  }
}

}  // namespace tandem::cuda::layers
