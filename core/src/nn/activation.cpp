#include "nn/activation.hpp"

#include "tandem/error.hpp"

namespace tandem::nn {

Shape Activation::build(const Shape& input_shape, Rng& /*init*/) {
  if (kind_ == ActivationKind::softmax && input_shape.empty())
    throw ShapeError("layer '" + name() + "' (Activation softmax) needs an axis to normalise over");
  return input_shape;
}

const Tensor& Activation::forward(const Tensor& x, bool /*training*/) {
  input_ = x;
  output_.resize(x.shape());
  const std::int64_t cols = x.rank() > 1 ? x.shape().back() : 1;
  activation_forward(kind_, x.data(), output_.data(), x.size() / std::max<std::int64_t>(cols, 1),
                     cols);
  return output_;
}

const Tensor& Activation::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  grad_input_.resize(input_.shape());
  const std::int64_t cols = input_.rank() > 1 ? input_.shape().back() : 1;
  activation_backward(kind_, input_.data(), output_.data(), grad_output.data(), grad_input_.data(),
                      input_.size() / std::max<std::int64_t>(cols, 1), cols);
  return grad_input_;
}

nlohmann::json Activation::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"activation", activation_name(kind_)}};
}

}  // namespace tandem::nn
