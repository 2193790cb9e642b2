#include "nn/image_layers.hpp"

#include <utility>

#include "nn/batch_shape.hpp"
#include "nn/spatial.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape ImageBorder::build(const Shape& input_shape, Rng&) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  check_image_shape(input_shape, who);
  const auto [top, bottom, left, right] = borders_;
  const std::int64_t sign = pad_ ? 1 : -1;
  output_shape_ = {input_shape[0] + sign * (top + bottom), input_shape[1] + sign * (left + right),
                   input_shape[2]};
  if (output_shape_[0] <= 0 || output_shape_[1] <= 0)
    throw ShapeError(who + " crops " + std::to_string(top + bottom) + " rows and " +
                     std::to_string(left + right) + " columns from inputs " +
                     shape_to_string(input_shape, true) + ": nothing would be left");
  input_shape_ = input_shape;
  return output_shape_;
}

backend::ImageBlock ImageBorder::block(std::int64_t batch) const {
  backend::ImageBlock b;
  b.batch = batch;
  b.channels = input_shape_[2];
  b.src_rows = input_shape_[0];
  b.src_cols = input_shape_[1];
  b.dst_rows = output_shape_[0];
  b.dst_cols = output_shape_[1];
  const std::int64_t top = borders_[0], left = borders_[2];
  if (pad_) {
    b.dst_row = top, b.dst_col = left, b.rows = b.src_rows, b.cols = b.src_cols;
  } else {
    b.src_row = top, b.src_col = left, b.rows = b.dst_rows, b.cols = b.dst_cols;
  }
  return b;
}

namespace {

// The inverse block: the same cells, from the output image back to the input image.
backend::ImageBlock reversed(backend::ImageBlock b) {
  std::swap(b.src_rows, b.dst_rows);
  std::swap(b.src_cols, b.dst_cols);
  std::swap(b.src_row, b.dst_row);
  std::swap(b.src_col, b.dst_col);
  return b;
}

}  // namespace

const Tensor& ImageBorder::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  Tensor& y = ops().place(output_, with_batch(x.dim(0), output_shape_));
  if (pad_) ops().fill(y, 0.0f);
  ops().copy_image_block(block(x.dim(0)), x, y);
  return output_;
}

const Tensor& ImageBorder::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const std::int64_t batch = grad_output.dim(0);
  Tensor& dx = ops().place(grad_input_, with_batch(batch, input_shape_));
  if (!pad_) ops().fill(dx, 0.0f);
  ops().copy_image_block(reversed(block(batch)), grad_output, dx);
  return grad_input_;
}

nlohmann::json ImageBorder::config() const {
  const auto [top, bottom, left, right] = borders_;
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {pad_ ? "padding" : "cropping", {{top, bottom}, {left, right}}},
          {"data_format", "channels_last"}};
}

Shape UpSampling2D::build(const Shape& input_shape, Rng&) {
  check_image_shape(input_shape, "layer '" + name() + "' (UpSampling2D)");
  input_shape_ = input_shape;
  return {input_shape[0] * factors_[0], input_shape[1] * factors_[1], input_shape[2]};
}

backend::UpsampleDesc UpSampling2D::desc(std::int64_t batch) const {
  return {batch, input_shape_[0], input_shape_[1], input_shape_[2], factors_[0], factors_[1]};
}

const Tensor& UpSampling2D::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (UpSampling2D)");
  const std::int64_t batch = x.dim(0);
  ops().upsample_forward(desc(batch), x,
                         ops().place(output_, {batch, input_shape_[0] * factors_[0],
                                               input_shape_[1] * factors_[1], input_shape_[2]}));
  return output_;
}

const Tensor& UpSampling2D::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const std::int64_t batch = grad_output.dim(0);
  ops().upsample_backward(desc(batch), grad_output,
                          ops().place(grad_input_, with_batch(batch, input_shape_)));
  return grad_input_;
}

nlohmann::json UpSampling2D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"size", {factors_[0], factors_[1]}},
          {"data_format", "channels_last"},
          {"interpolation", "nearest"}};
}

}  // namespace tandem::nn
