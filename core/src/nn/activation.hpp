// Activation: applies a named activation function (Keras `Activation` layer).
#pragma once

#include "nn/activation_fn.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Activation : public Layer {
 public:
  Activation(std::string name, ActivationKind kind) : Layer(std::move(name)), kind_(kind) {}
  std::string class_name() const override { return "Activation"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  ActivationKind kind_;
  Tensor input_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
