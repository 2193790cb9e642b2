// Weight initialisers, Keras names and semantics, drawn from a seeded Rng.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/rng.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct Initializer {
  std::string name;                      // "glorot_uniform"
  std::optional<std::uint64_t> seed;     // the config's own seed, if any
  double value = 0;                      // for "constant"
  double minval = -0.05, maxval = 0.05;  // for "random_uniform" (Keras defaults)
  double mean = 0.0, stddev = 0.05;      // for "random_normal" (Keras defaults)
  /// Fills `t`; fan_in/fan_out as Keras computes them for this weight.
  void fill(Tensor& t, std::int64_t fan_in, std::int64_t fan_out, Rng& model_rng) const;
  nlohmann::json config() const;  // {"class_name": "GlorotUniform", "config": {"seed": null}}
};

/// Parses "glorot_uniform" or {"class_name": "GlorotUniform", "config": {...}}; known:
/// glorot_uniform, glorot_normal, he_normal, he_uniform, lecun_normal, lecun_uniform, zeros, ones,
/// constant, random_normal, random_uniform, and Keras' aliases uniform (= random_uniform), normal
/// (= random_normal), one, zero. RandomUniform takes minval/maxval, RandomNormal mean/stddev.
/// Throws ConfigError naming `path`.
Initializer parse_initializer(const nlohmann::json& spec, const std::string& path);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
