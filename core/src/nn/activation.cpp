#include "nn/activation.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// Softmax normalises the last axis.
std::int64_t last_axis(const Tensor& x) {
  return std::max<std::int64_t>(x.rank() > 1 ? x.shape().back() : 1, 1);
}

}  // namespace

Shape Activation::build(const Shape& input_shape, Rng& /*init*/) {
  if ((kind_ == ActivationKind::softmax || kind_ == ActivationKind::log_softmax) &&
      input_shape.empty())
    throw ShapeError("layer '" + name() + "' (Activation " + activation_name(kind_) +
                     ") needs an axis to normalise over");
  return input_shape;
}

const Tensor& Activation::forward(const Tensor& x, bool /*training*/) {
  input_ = x;
  if (relu_absorbed_) {
    output_ = x;  // shares the storage
    return output_;
  }
  ops().activation_forward(kind_, x, ops().place(output_, x.shape()), last_axis(x));
  return output_;
}

const Tensor& Activation::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (relu_absorbed_) {
    grad_input_ = grad_output;  // shares the storage
    return grad_input_;
  }
  ops().activation_backward(kind_, input_, output_, grad_output,
                            ops().place(grad_input_, input_.shape()), last_axis(input_));
  return grad_input_;
}

nlohmann::json Activation::config() const {
  nlohmann::json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  if (keras_keys_.is_null())
    c["activation"] = activation_name(kind_);
  else
    c.update(keras_keys_);
  return c;
}

}  // namespace tandem::nn
