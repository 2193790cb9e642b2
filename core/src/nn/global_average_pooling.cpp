#include "nn/global_average_pooling.hpp"

#include "nn/spatial.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape GlobalAveragePooling2D::build(const Shape& input_shape, Rng& /*init*/) {
  check_image_shape(input_shape, "layer '" + name() + "' (GlobalAveragePooling2D)");
  input_shape_ = input_shape;
  if (keepdims_) return {1, 1, input_shape[2]};
  return {input_shape[2]};
}

const Tensor& GlobalAveragePooling2D::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() != 4 || x.dim(1) != input_shape_[0] || x.dim(2) != input_shape_[1] ||
      x.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (GlobalAveragePooling2D) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  const std::int64_t batch = x.dim(0), channels = input_shape_[2];
  const std::int64_t cells = input_shape_[0] * input_shape_[1];
  last_batch_ = batch;
  ops().place(output_, keepdims_ ? Shape{batch, 1, 1, channels} : Shape{batch, channels});
  ops().global_average_pool_forward(x, output_, cells, channels);
  return output_;
}

const Tensor& GlobalAveragePooling2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = last_batch_, channels = input_shape_[2];
  if (batch < 0 || grad_output.dim(0) != batch || grad_output.size() != batch * channels)
    throw ShapeError("layer '" + name() + "' (GlobalAveragePooling2D): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(output_.shape()));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const std::int64_t cells = input_shape_[0] * input_shape_[1];
  ops().global_average_pool_backward(
      grad_output, ops().place(grad_input_, {batch, input_shape_[0], input_shape_[1], channels}),
      cells, channels);
  return grad_input_;
}

nlohmann::json GlobalAveragePooling2D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"data_format", "channels_last"},
          {"keepdims", keepdims_}};
}

}  // namespace tandem::nn
