#include "nn/global_average_pooling.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "nn/spatial.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

std::string GlobalAveragePooling::class_name() const {
  return "GlobalAveragePooling" + std::to_string(spatial_axes_) + "D";
}

Shape GlobalAveragePooling::build(const Shape& input_shape, Rng& /*init*/) {
  const std::string what = "layer '" + name() + "' (" + class_name() + ")";
  bool fits = static_cast<int>(input_shape.size()) == spatial_axes_ + 1;
  for (std::int64_t d : input_shape) fits = fits && d > 0;
  if (!fits)
    throw ShapeError(what + " expects inputs " + spatial_axes_shape(spatial_axes_) + ", got " +
                     shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  channels_ = input_shape.back();
  cells_ = shape_size(input_shape) / channels_;
  output_shape_ = keepdims_ ? Shape(static_cast<std::size_t>(spatial_axes_), 1) : Shape{};
  output_shape_.push_back(channels_);
  return output_shape_;
}

const Tensor& GlobalAveragePooling::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  last_batch_ = x.dim(0);
  ops().place(output_, with_batch(last_batch_, output_shape_));
  if (mask_) {
    if (mask_->size() != last_batch_ * cells_)
      throw ShapeError("layer '" + name() + "' (" + class_name() + "): a mask of shape " +
                       shape_to_string(mask_->shape()) + " for inputs " +
                       shape_to_string(x.shape()));
    ops().masked_average_steps(x, *mask_, output_, cells_, channels_);
    return output_;
  }
  ops().global_average_pool_forward(x, output_, cells_, channels_);
  return output_;
}

const Tensor& GlobalAveragePooling::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = last_batch_;
  if (batch < 0 || grad_output.dim(0) != batch || grad_output.size() != batch * channels_)
    throw ShapeError("layer '" + name() + "' (" + class_name() + "): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(output_.shape()));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  Tensor& dx = ops().place(grad_input_, with_batch(batch, input_shape_));
  if (mask_)
    ops().masked_average_steps_backward(grad_output, *mask_, dx, cells_, channels_);
  else
    ops().global_average_pool_backward(grad_output, dx, cells_, channels_);
  return grad_input_;
}

nlohmann::json GlobalAveragePooling::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"data_format", "channels_last"},
          {"keepdims", keepdims_}};
}

}  // namespace tandem::nn
