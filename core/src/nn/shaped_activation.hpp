// Keras' ReLU (with max_value, negative_slope, threshold), LeakyReLU (negative_slope; Keras 2's
// alpha) and ELU (alpha) layers with parameters other than their plain activation's (the plain
// forms are an Activation under the Keras name: nn/activation.hpp). The arithmetic is
// kernel_math's shaped_activation_value, on the layer's backend. No weights. Ownership and
// threads: as every layer's.
#pragma once

#include "backend/activation_kind.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class ShapedActivationLayer : public Layer {
 public:
  /// `keras_class`: "ReLU", "LeakyReLU" or "ELU".
  ShapedActivationLayer(std::string name, std::string keras_class,
                        const backend::ShapedActivation& a)
      : Layer(std::move(name)), keras_class_(std::move(keras_class)), a_(a) {}
  std::string class_name() const override { return keras_class_; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::string keras_class_;
  backend::ShapedActivation a_;
  Shape input_shape_;
  Tensor input_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
