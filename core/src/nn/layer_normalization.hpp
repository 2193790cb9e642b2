// LayerNormalization over the last axis, Keras semantics: each sample's row of the last axis is
// normalised with its own mean and biased variance, y = (x - mean) / sqrt(var + epsilon) *
// gamma + beta, the same in training and inference (no moving statistics, so replicas need no
// cross-replica sums). Weights, in Keras order: gamma (if scale), beta (if center).
//
// Keras' rms_scaling (Keras 3; deprecated there since, with the same definition in every
// release): y = x / sqrt(var + epsilon) * gamma — the deviation about the mean, the mean left
// in, gamma always (whatever `scale` says), no beta.
//
// RMSNormalization (Keras 3's keras.layers.RMSNormalization, the RMSNorm of Zhang and
// Sennrich): y = x / sqrt(mean(x²) + epsilon) * scale, one weight `scale` (ones), epsilon 1e-6;
// the same layer with the root mean square for the deviation.
//
// Computes on its backend (layer_norm_forward / layer_norm_backward in the form the layer
// names). Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include "backend/ops.hpp"
#include "nn/normalization_affine.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct LayerNormalizationOptions : AffineNormalizationOptions {
  bool rms_scaling = false;  // Keras' rms_scaling: the mean left in, gamma only
};

class LayerNormalization : public Layer {
 public:
  LayerNormalization(std::string name, LayerNormalizationOptions options);
  std::string class_name() const override { return "LayerNormalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;

 protected:
  /// RMSNormalization's: the deviation is the root mean square, the weight `scale`.
  struct RootMeanSquare {};
  LayerNormalization(std::string name, std::int64_t axis, double epsilon, RootMeanSquare);
  const LayerNormalizationOptions& options() const { return options_; }

 private:
  /// The weights the layer has: gamma with scale or rms_scaling, beta with center unless
  /// rms_scaling (Keras' build).
  AffineNormalizationOptions weights() const;
  backend::LayerNormDesc desc() const;
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }

  LayerNormalizationOptions options_;
  bool root_mean_square_ = false;
  Shape input_shape_;
  std::int64_t features_ = 0;
  Parameter gamma_, beta_;
  Tensor input_;  // the last forward's input (shared storage)
  Tensor output_, stats_, grad_input_;
};

/// keras.layers.RMSNormalization (above); its config: axis, epsilon.
class RmsNormalization : public LayerNormalization {
 public:
  RmsNormalization(std::string name, std::int64_t axis, double epsilon);
  std::string class_name() const override { return "RMSNormalization"; }
  nlohmann::json config() const override;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
