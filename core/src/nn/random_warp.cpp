#include "nn/random_warp.hpp"

#include "backend/ops.hpp"
#include "nn/resizing.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

using backend::WarpDesc;

RandomWarp::RandomWarp(std::string name, WarpDesc desc, std::int64_t crop_rows,
                       std::int64_t crop_cols, std::optional<std::uint64_t> seed,
                       nlohmann::json keras_config)
    : Layer(std::move(name)),
      desc_(desc),
      crop_rows_(crop_rows),
      crop_cols_(crop_cols),
      random_(seed),
      keras_config_(std::move(keras_config)) {}

std::string RandomWarp::class_name() const {
  switch (desc_.kind) {
    case WarpDesc::translate:
      return "RandomTranslation";
    case WarpDesc::rotate:
      return "RandomRotation";
    case WarpDesc::zoom:
      return "RandomZoom";
    default:
      return "RandomCrop";
  }
}

Shape RandomWarp::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 3)
    throw ShapeError("layer '" + name() + "' (" + class_name() +
                     ") expects images (None, rows, cols, channels), got " +
                     shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  random_.build(init);
  if (crop_rows_ > 0) return {crop_rows_, crop_cols_, input_shape[2]};
  return input_shape;
}

// Training: the layer's own kind (RandomCrop: a random window, or a resize when the image is
// smaller than the target). Inference: RandomCrop's resize of the centred window.
WarpDesc RandomWarp::desc_for(std::int64_t batch, bool training) const {
  WarpDesc d = desc_;
  d.batch = batch;
  d.rows = d.src_rows = input_shape_[0];
  d.cols = d.src_cols = input_shape_[1];
  d.channels = input_shape_[2];
  d.out_rows = crop_rows_ > 0 ? crop_rows_ : d.rows;
  d.out_cols = crop_cols_ > 0 ? crop_cols_ : d.cols;
  if (d.kind != WarpDesc::crop) return d;
  if (training && d.rows >= d.out_rows && d.cols >= d.out_cols) return d;
  // Keras' smart_resize: the largest centred window of the target's aspect ratio.
  return resize_warp(batch, input_shape_, d.out_rows, d.out_cols,
                     ResizeWindow::crop_to_aspect_ratio, WarpDesc::bilinear);
}

const Tensor& RandomWarp::forward(const Tensor& x, bool training) {
  const bool same_size =
      crop_rows_ == 0 || (crop_rows_ == input_shape_[0] && crop_cols_ == input_shape_[1]);
  warped_ = training || !same_size;
  if (!warped_) return x;
  backend::Backend& ops = this->ops();
  const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
  last_ = desc_for(batch, training);
  ops.place(draws_, {batch, WarpDesc::kDraws});
  if (training)
    ops.uniform_noise(random_.next_call(0.0, sample_offset()), draws_, WarpDesc::kDraws);
  else
    ops.fill(draws_, 0.0f);  // a resize draws nothing
  ops.warp_images(last_, draws_, x,
                  ops.place(output_, {batch, last_.out_rows, last_.out_cols, last_.channels}));
  return output_;
}

const Tensor& RandomWarp::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!warped_) return grad_output;
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  ops().warp_images_backward(
      last_, draws_, grad_output,
      ops().place(grad_input_, {batch, last_.rows, last_.cols, last_.channels}));
  return grad_input_;
}

nlohmann::json RandomWarp::config() const {
  nlohmann::json c = keras_config_;
  const std::optional<std::uint64_t> seed = random_.seed();
  c["name"] = name();
  c["trainable"] = trainable();
  c["dtype"] = "float32";
  c["seed"] = seed ? nlohmann::json(*seed) : nlohmann::json(nullptr);
  c["data_format"] = "channels_last";
  return c;
}

}  // namespace tandem::nn
