// LayerNormalization over the last axis, Keras semantics: each sample's row of the last axis is
// normalised with its own mean and biased variance, y = (x - mean) / sqrt(var + epsilon) *
// gamma + beta, the same in training and inference (no moving statistics, so replicas need no
// cross-replica sums). Weights, in Keras order: gamma (if scale), beta (if center). Computes on
// its backend (layer_norm_forward / layer_norm_backward). Ownership and threads: as every
// layer's (tandem/layer.hpp).
#pragma once

#include "backend/ops.hpp"
#include "nn/normalization_affine.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

using LayerNormalizationOptions = AffineNormalizationOptions;

class LayerNormalization : public Layer {
 public:
  LayerNormalization(std::string name, LayerNormalizationOptions options);
  std::string class_name() const override { return "LayerNormalization"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;

 private:
  backend::LayerNormDesc desc() const { return {features_, options_.epsilon}; }

  LayerNormalizationOptions options_;
  Shape input_shape_;
  std::int64_t features_ = 0;
  Parameter gamma_, beta_;
  Tensor input_;  // the last forward's input (shared storage)
  Tensor output_, stats_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
