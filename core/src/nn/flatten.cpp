#include "nn/flatten.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Flatten::build(const Shape& input_shape, Rng& /*init*/) {
  input_shape_ = input_shape;
  return {shape_size(input_shape)};
}

const Tensor& Flatten::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() < 1 || (x.dim(0) > 0 && x.size() / x.dim(0) != shape_size(input_shape_)))
    throw ShapeError("layer '" + name() + "' (Flatten) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  output_ = x.reshaped({x.dim(0), shape_size(input_shape_)});
  return output_;
}

const Tensor& Flatten::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  grad_input_ = grad_output.reshaped(with_batch(grad_output.dim(0), input_shape_));
  return grad_input_;
}

nlohmann::json Flatten::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
