#include "nn/shaped_activation.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"

namespace tandem::nn {

Shape ShapedActivationLayer::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  return input_shape;
}

const Tensor& ShapedActivationLayer::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + keras_class_ + ")");
  input_ = x;
  ops().shaped_activation_forward(a_, x, ops().place(output_, x.shape()));
  return output_;
}

const Tensor& ShapedActivationLayer::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops().shaped_activation_backward(a_, input_, grad_output,
                                   ops().place(grad_input_, input_.shape()));
  return grad_input_;
}

nlohmann::json ShapedActivationLayer::config() const {
  nlohmann::json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  if (a_.elu) {
    c["alpha"] = a_.alpha;
  } else if (keras_class_ == "LeakyReLU") {
    c["negative_slope"] = a_.negative_slope;
  } else {
    c["max_value"] = a_.capped ? nlohmann::json(a_.max_value) : nlohmann::json(nullptr);
    c["negative_slope"] = a_.negative_slope;
    c["threshold"] = a_.threshold;
  }
  return c;
}

}  // namespace tandem::nn
