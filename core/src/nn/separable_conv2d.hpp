// SeparableConv2D: Keras' depthwise separable convolution, channels_last — a DepthwiseConv2D
// (kernel_size, strides, padding, dilation_rate, depth_multiplier; no bias) followed by a 1x1
// Conv2D to `filters` with the bias and the activation. Weights in Keras' order and names:
// depthwise_kernel (kh, kw, in, multiplier), pointwise_kernel (1, 1, in · multiplier, filters),
// bias (filters,). Written as the two layers it is made of, so it runs wherever they do.
// Owns its two parts; one thread at a time.
#pragma once

#include <memory>

#include "nn/conv2d.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct SeparableConv2DOptions {
  Conv2DOptions depthwise;  // the window, depth_multiplier and the depthwise kernel's keys
  Conv2DOptions pointwise;  // filters, activation, use_bias and the pointwise kernel's and bias'
};

class SeparableConv2D : public Layer, public WeightRules, public KerasTwoDefinitions {
 public:
  SeparableConv2D(std::string name, SeparableConv2DOptions options);
  std::string class_name() const override { return "SeparableConv2D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override { pointwise_->use_keras2_definitions(); }

 private:
  /// The parts compute on this layer's backend, for this layer's rows.
  void place_parts();

  std::unique_ptr<DepthwiseConv2D> depthwise_;
  std::unique_ptr<Conv2D> pointwise_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
