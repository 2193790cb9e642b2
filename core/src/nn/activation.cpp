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
  // Keras' Softmax layer names its axis (nn/layer_registry.cpp): -1, or the last axis's index
  // counting the batch axis, which only the input's rank can confirm.
  if (keras_keys_.is_object() && keras_keys_.contains("axis")) {
    const nlohmann::json& given = keras_keys_["axis"];
    const std::int64_t axis = (given.is_array() ? given[0] : given).get<std::int64_t>();
    const auto last = static_cast<std::int64_t>(input_shape.size());
    if (axis != -1 && axis != last)
      throw ShapeError("layer '" + name() + "' (" + keras_class_ + "): axis " +
                       std::to_string(axis) + " is not the last axis of inputs " +
                       shape_to_string(input_shape, true) + " (-1 or " + std::to_string(last) +
                       "; Tandem normalises over the last axis only)");
  }
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
