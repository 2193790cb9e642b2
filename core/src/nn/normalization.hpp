// Normalization, Keras semantics: each feature of the last axis is standardised with a mean and
// variance, y = (x - mean) / max(sqrt(variance), 1e-7), or, with invert, x * max(sqrt(variance),
// 1e-7) + mean. The statistics are either given in the config (constants, not weights, as Keras
// keeps them then) or what Keras' adapt() computed and saved as the layer's non-trainable weights
// `mean`, `variance` (one per feature) and `count` (a scalar Keras keeps for older files; unused
// here), loaded with the model's weights: Keras writes that config with mean and variance null.
// A fresh run computes them from the training data as adapt() does (train/adapt_normalization).
// Computes on its backend (normalization_factors, then column_affine), the config's constants
// copied to the backend's device on first use there. Ownership and threads: as every layer's.
#pragma once

#include <vector>

#include "tandem/layer.hpp"
#include "tandem/parameter.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Normalization : public Layer {
 public:
  /// Statistics given in the config: `mean` and `variance`, one value (every feature) or one per
  /// feature of the last axis.
  Normalization(std::string name, std::vector<double> mean, std::vector<double> variance,
                bool invert);
  /// Statistics adapt() computed: the layer's weights mean, variance and count.
  Normalization(std::string name, bool invert);

  std::string class_name() const override { return "Normalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  /// mean, variance and count (none when the config gives the statistics).
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;

  /// Whether the statistics are weights (Keras' adapted layer), not the config's constants.
  bool adapted() const { return config_mean_.empty(); }
  /// Sets an adapted layer's weights as adapt() does: one mean and (biased) variance per feature
  /// and the number of values each was computed from. Host weights, after build(); the caller
  /// checks that the sizes fit.
  void set_statistics(const std::vector<double>& mean, const std::vector<double>& variance,
                      std::int64_t count);

 private:
  /// The statistics on the backend's device: the weights, or the config's constants (copied
  /// there when the backend changed).
  std::pair<const Tensor*, const Tensor*> statistics();

  std::vector<double> config_mean_, config_variance_;  // empty when adapted
  bool invert_;
  Shape input_shape_;
  Parameter mean_, variance_, count_;     // adapted: the weights; else the constants, per feature
  Tensor placed_mean_, placed_variance_;  // the constants on the layer's backend
  Tensor scale_, shift_;                  // y = x * scale + shift, per feature
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
