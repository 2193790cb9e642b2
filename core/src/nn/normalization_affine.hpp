// Private (nn): what Keras' LayerNormalization and GroupNormalization share — the last axis they
// normalise over (axis), epsilon, and the per-channel gamma and beta applied after (scale,
// center) with their initializers, written to their configs alike (nn/layer_registry.cpp reads
// them). Plain data and functions; any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/initializer.hpp"
#include "tandem/parameter.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct AffineNormalizationOptions {
  /// -1, or the positive index of the last axis counting the batch axis (checked by
  /// require_last_axis when the input's rank is known).
  std::int64_t axis = -1;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  Initializer beta_initializer{"zeros", std::nullopt, 0};
  Initializer gamma_initializer{"ones", std::nullopt, 0};
};

/// Writes the options into a layer's Keras `config` (the layer registry reads them back), with
/// gamma's and beta's regularizers and constraints null.
void write_affine_normalization(const AffineNormalizationOptions& options, nlohmann::json& config);

/// Throws ShapeError naming `who` unless options.axis is the last axis of `input_shape`.
void require_last_axis(const AffineNormalizationOptions& options, const Shape& input_shape,
                       const std::string& who);
/// gamma and beta of `channels` values where scale and center have them, drawn from their
/// initializers (the parameters the options leave out stay empty).
void build_gamma_beta(const AffineNormalizationOptions& options, std::int64_t channels,
                      Parameter& gamma, Parameter& beta, Rng& init);
/// gamma (with scale), then beta (with center): Keras' order.
std::vector<Parameter*> gamma_beta(const AffineNormalizationOptions& options, Parameter& gamma,
                                   Parameter& beta);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
