#include "nn/volume_cells.hpp"

#include "nn/batch_shape.hpp"
#include "nn/spatial.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape TwoPassVolume::build(const Shape& input_shape, Rng& init) {
  check_volume_shape(input_shape, label());
  check_fits(input_shape);
  const std::int64_t depth = input_shape[0], rows = input_shape[1], cols = input_shape[2];
  const std::int64_t channels = input_shape[3];
  first_ = make_first();
  second_ = make_second();
  first_input_ = {depth, rows, cols * channels};
  first_output_ = first_->build(first_input_, init);
  second_input_ = {first_output_[0] * first_output_[1], cols, channels};
  second_output_ = second_->build(second_input_, init);
  input_shape_ = input_shape;
  output_shape_ = {first_output_[0], first_output_[1], second_output_[1], channels};
  return output_shape_;
}

const Tensor& TwoPassVolume::forward(const Tensor& x, bool training) {
  require_batch_of(x, input_shape_, label());
  const std::int64_t batch = x.dim(0);
  for (Layer* pass : {first_.get(), second_.get()}) {
    pass->set_backend(ops());
    pass->set_sample_offset(sample_offset());
  }
  const Tensor& rows = first_->forward(x.reshaped(with_batch(batch, first_input_)), training);
  const Tensor& cols = second_->forward(rows.reshaped(with_batch(batch, second_input_)), training);
  output_ = cols.reshaped(with_batch(batch, output_shape_));
  return output_;
}

const Tensor& TwoPassVolume::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  if (grad_output.shape() != with_batch(batch, output_shape_))
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output " +
                     shape_to_string(with_batch(batch, output_shape_)));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const Tensor& d_rows =
      second_->backward(grad_output.reshaped(with_batch(batch, second_output_)), true);
  const Tensor& dx = first_->backward(d_rows.reshaped(with_batch(batch, first_output_)), true);
  grad_input_ = dx.reshaped(with_batch(batch, input_shape_));
  return grad_input_;
}

void VolumeBorder::check_fits(const Shape& input_shape) const {
  if (pad_) return;
  for (std::size_t a = 0; a < 3; ++a)
    if (input_shape[a] - borders_[a][0] - borders_[a][1] <= 0) {
      static const char* const kAxes[] = {"depth slices", "rows", "columns"};
      throw ShapeError(label() + " crops " + std::to_string(borders_[a][0] + borders_[a][1]) + " " +
                       kAxes[a] + " from inputs " + shape_to_string(input_shape, true) +
                       ": nothing would be left");
    }
}

std::unique_ptr<Layer> VolumeBorder::make_first() const {
  return std::make_unique<ImageBorder>(
      name(), pad_, Borders{borders_[0][0], borders_[0][1], borders_[1][0], borders_[1][1]});
}

std::unique_ptr<Layer> VolumeBorder::make_second() const {
  return std::make_unique<ImageBorder>(name(), pad_, Borders{0, 0, borders_[2][0], borders_[2][1]});
}

nlohmann::json VolumeBorder::config() const {
  nlohmann::json amounts = nlohmann::json::array();
  for (const auto& axis : borders_) amounts.push_back({axis[0], axis[1]});
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {pad_ ? "padding" : "cropping", amounts},
          {"data_format", "channels_last"}};
}

void UpSampling3D::check_fits(const Shape& /*input_shape*/) const {
  for (std::int64_t f : factors_)
    if (f <= 0) throw ShapeError(label() + " needs positive sizes");
}

std::unique_ptr<Layer> UpSampling3D::make_first() const {
  return std::make_unique<UpSampling2D>(name(), factors_[0], factors_[1]);
}

std::unique_ptr<Layer> UpSampling3D::make_second() const {
  return std::make_unique<UpSampling2D>(name(), 1, factors_[2]);
}

nlohmann::json UpSampling3D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"size", {factors_[0], factors_[1], factors_[2]}},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
