// Activation: applies a named activation function — Keras' `Activation` layer, and the layers
// Keras names after one activation (`ReLU`, `ELU`, `Softmax`), which are the same layer under
// their own class name and config keys. Keras' Softmax layer normalises over the axis its config
// names: another than the last is moved last (nn/axis_permutation.hpp), normalised there, and
// moved back; its gradient the same way.
//
// A relu whose input comes from a layer that can apply it (nn::ReluAbsorber, paired by the Model)
// hands it over and becomes the identity: it outputs its input and passes the gradient on.
#pragma once

#include <vector>

#include "nn/activation_fn.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Activation : public Layer, public PlainRelu, public KerasTwoDefinitions {
 public:
  Activation(std::string name, ActivationKind kind) : Layer(std::move(name)), kind_(kind) {}
  /// The layer Keras calls `keras_class`, whose config holds `keras_keys` besides the name,
  /// trainable and dtype (ReLU: {"max_value": null, ...}).
  Activation(std::string name, ActivationKind kind, std::string keras_class,
             nlohmann::json keras_keys)
      : Layer(std::move(name)),
        kind_(kind),
        keras_class_(std::move(keras_class)),
        keras_keys_(std::move(keras_keys)) {}
  std::string class_name() const override { return keras_class_; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  bool is_plain_relu() const override { return kind_ == ActivationKind::relu; }
  void set_relu_absorbed(bool absorbed) override { relu_absorbed_ = absorbed; }
  void use_keras2_definitions() override { kind_ = keras2_definition(kind_); }

 private:
  /// `from` (batch, shape...) with its axes in `order` (the batch's included) into `to`.
  void permute(const Tensor& from, const Shape& shape, const std::vector<int>& order, Tensor& to);

  ActivationKind kind_;
  bool relu_absorbed_ = false;  // the input's producer applies the relu: an identity
  // Softmax over another axis than the last: the order that moves it last and its inverse
  // (empty: the last axis); the input's and the moved output's per-sample shapes.
  std::vector<int> to_last_, from_last_;
  Shape input_shape_, moved_shape_;
  Tensor moved_, moved_output_, moved_grad_, scratch_;
  std::string keras_class_ = "Activation";
  nlohmann::json keras_keys_;  // null: {"activation": <name>}
  Tensor input_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
