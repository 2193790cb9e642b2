#include "nn/resizing.hpp"

#include <algorithm>

#include "backend/ops.hpp"
#include "nn/image_layers.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

using backend::WarpDesc;

WarpDesc resize_warp(std::int64_t batch, const Shape& image, std::int64_t out_rows,
                     std::int64_t out_cols, ResizeWindow window, int interpolation,
                     float fill_value) {
  WarpDesc d;
  d.kind = WarpDesc::resize;
  d.batch = batch;
  d.rows = d.src_rows = image[0];
  d.cols = d.src_cols = image[1];
  d.channels = image[2];
  d.out_rows = out_rows;
  d.out_cols = out_cols;
  if (window == ResizeWindow::crop_to_aspect_ratio) {  // smart_resize: at least a row, a column
    d.src_rows = std::max<std::int64_t>(1, std::min(d.rows, d.cols * out_rows / out_cols));
    d.src_cols = std::max<std::int64_t>(1, std::min(d.cols, d.rows * out_cols / out_rows));
  } else if (window == ResizeWindow::pad_to_aspect_ratio) {  // Keras 3's image.resize
    d.src_rows = std::max(d.rows, d.cols * out_rows / out_cols);
    d.src_cols = std::max(d.cols, d.rows * out_cols / out_rows);
  }
  // The window's first row and column: inside the image, or where it pads before it (negative:
  // the image starts at floor(padding / 2) of the window, as in Keras).
  d.src_row = (d.rows - d.src_rows) / 2;
  d.src_col = (d.cols - d.src_cols) / 2;
  d.interpolation = interpolation;
  d.fill = WarpDesc::nearest_edge;
  d.fill_value = fill_value;
  return d;
}

Resizing::Resizing(std::string name, std::int64_t height, std::int64_t width, int interpolation,
                   ResizeWindow window, float fill_value)
    : Layer(std::move(name)),
      height_(height),
      width_(width),
      interpolation_(interpolation),
      window_(window),
      fill_value_(fill_value) {}

Shape Resizing::build(const Shape& input_shape, Rng& /*init*/) {
  if (input_shape.size() != 3)
    throw ShapeError("layer '" + name() + "' (Resizing) expects images (None, rows, cols, " +
                     "channels), got " + shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  return {height_, width_, input_shape[2]};
}

const Tensor& Resizing::forward(const Tensor& x, bool /*training*/) {
  backend::Backend& ops = this->ops();
  const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
  last_ = resize_warp(batch, input_shape_, height_, width_, window_, interpolation_, fill_value_);
  ops.fill(ops.place(draws_, {batch, WarpDesc::kDraws}), 0.0f);  // a resize draws nothing
  ops.warp_images(last_, draws_, x, ops.place(output_, {batch, height_, width_, input_shape_[2]}));
  return output_;
}

const Tensor& Resizing::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  ops().warp_images_backward(
      last_, draws_, grad_output,
      ops().place(grad_input_, {batch, input_shape_[0], input_shape_[1], input_shape_[2]}));
  return grad_input_;
}

nlohmann::json Resizing::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"height", height_},
          {"width", width_},
          {"interpolation", interpolation_ == WarpDesc::nearest ? "nearest" : "bilinear"},
          {"crop_to_aspect_ratio", window_ == ResizeWindow::crop_to_aspect_ratio},
          {"pad_to_aspect_ratio", window_ == ResizeWindow::pad_to_aspect_ratio},
          {"fill_mode", "constant"},
          {"fill_value", fill_value_},
          {"data_format", "channels_last"}};
}

CenterCrop::CenterCrop(std::string name, std::int64_t height, std::int64_t width)
    : Reshaped2D(std::move(name)), height_(height), width_(width) {}

Shape CenterCrop::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 3)
    throw ShapeError(label() + " expects images (None, rows, cols, channels), got " +
                     shape_to_string(input_shape, true));
  const std::int64_t extra_rows = input_shape[0] - height_, extra_cols = input_shape[1] - width_;
  std::unique_ptr<Layer> inner;
  if (extra_rows >= 0 && extra_cols >= 0)  // the centred window, Keras' start floor(extra / 2)
    inner = std::make_unique<ImageBorder>(name(), false,
                                          Borders{extra_rows / 2, extra_rows - extra_rows / 2,
                                                  extra_cols / 2, extra_cols - extra_cols / 2});
  else  // smaller than the target along an axis: Keras' smart_resize
    inner = std::make_unique<Resizing>(name(), height_, width_, WarpDesc::bilinear,
                                       ResizeWindow::crop_to_aspect_ratio);
  return build_inner(std::move(inner), input_shape, input_shape,
                     Shape{height_, width_, input_shape[2]}, init);
}

nlohmann::json CenterCrop::config() const {
  return {{"name", name()},    {"trainable", trainable()}, {"dtype", "float32"},
          {"height", height_}, {"width", width_},          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
