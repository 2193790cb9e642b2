// Weight initialisers, Keras names and semantics, drawn from a seeded Rng.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "tandem/rng.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// Keras' fans of a weight of this shape (keras.initializers' compute_fans): 1 and 1 for a
/// scalar, n and n for a vector (a bias), the two axes of a matrix, and for a higher rank the last
/// two axes each times the product of the others (a kernel's receptive field).
std::pair<std::int64_t, std::int64_t> keras_fans(const Shape& shape);

struct Initializer {
  std::string name;                      // "glorot_uniform"
  std::optional<std::uint64_t> seed;     // the config's own seed, if any
  double value = 0;                      // for "constant"
  double minval = -0.05, maxval = 0.05;  // for "random_uniform" (Keras defaults)
  double mean = 0.0, stddev = 0.05;      // for "random_normal" and "truncated_normal"
  // For "variance_scaling" (the named schemes glorot_*, he_*, lecun_* are fixed cases of it):
  // variance scale / fan, fan by mode "fan_in", "fan_out" or "fan_avg", drawn from
  // "truncated_normal" (rescaled to that variance), "untruncated_normal" or "uniform".
  double scale = 1.0;
  std::string mode = "fan_in";
  std::string distribution = "truncated_normal";
  double gain = 1.0;  // for "orthogonal" and "identity"
  /// Fills `t`, a weight in Keras' own shape: the variance-scaling schemes take the fans of that
  /// shape (keras_fans), as Keras does for every weight, a bias included. Draws from the
  /// initializer's own seed when it has one, else from `model_rng`.
  void fill(Tensor& t, Rng& model_rng) const;
  nlohmann::json config() const;  // {"class_name": "GlorotUniform", "config": {"seed": null}}
};

/// Parses "glorot_uniform" or {"class_name": "GlorotUniform", "config": {...}}; known:
/// glorot_uniform, glorot_normal, he_normal, he_uniform, lecun_normal, lecun_uniform,
/// variance_scaling, zeros, ones, constant, random_normal, random_uniform, truncated_normal,
/// orthogonal, identity, and Keras' aliases uniform (= random_uniform), normal (=
/// random_normal), one, zero. RandomUniform takes minval/maxval, RandomNormal and
/// TruncatedNormal mean/stddev, VarianceScaling scale/mode/distribution, Orthogonal and Identity
/// gain (Identity fills 2-D weights only: ShapeError from fill() otherwise). Throws ConfigError
/// naming `path`.
Initializer parse_initializer(const nlohmann::json& spec, const std::string& path);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
