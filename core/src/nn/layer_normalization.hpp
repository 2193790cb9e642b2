// LayerNormalization over the last axis, Keras semantics: each sample's row of the last axis is
// normalised with its own mean and biased variance, y = (x - mean) / sqrt(var + epsilon) *
// gamma + beta, the same in training and inference (no moving statistics, so replicas need no
// cross-replica sums). Weights, in Keras order: gamma (if scale), beta (if center). Computes on
// its backend (layer_norm_forward / layer_norm_backward). Ownership and threads: as every
// layer's (tandem/layer.hpp).
#pragma once

#include "backend/ops.hpp"
#include "nn/initializer.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct LayerNormalizationOptions {
  /// -1, or the positive index of the last axis counting the batch axis (checked in build()).
  std::int64_t axis = -1;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer{"zeros", std::nullopt, 0};
  Initializer gamma_initializer{"ones", std::nullopt, 0};
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
