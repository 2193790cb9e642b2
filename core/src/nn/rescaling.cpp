#include "nn/rescaling.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Rescaling::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  return input_shape;
}

const Tensor& Rescaling::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Rescaling)");
  ops().affine(x, static_cast<float>(scale_), static_cast<float>(offset_),
               ops().place(output_, x.shape()));
  return output_;
}

const Tensor& Rescaling::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops().affine(grad_output, static_cast<float>(scale_), 0.0f,
               ops().place(grad_input_, grad_output.shape()));
  return grad_input_;
}

nlohmann::json Rescaling::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"scale", scale_},
          {"offset", offset_}};
}

}  // namespace tandem::nn
