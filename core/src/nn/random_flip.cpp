#include "nn/random_flip.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

RandomFlip::RandomFlip(std::string name, std::string mode, std::optional<std::uint64_t> seed)
    : Layer(std::move(name)), mode_(std::move(mode)), random_(seed) {}

Shape RandomFlip::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 3)
    throw ShapeError("layer '" + name() + "' (RandomFlip) expects images (None, rows, cols, "
                     "channels), got " + shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  random_.build(init);
  return input_shape;
}

backend::FlipDesc RandomFlip::desc_for(std::int64_t batch) const {
  backend::FlipDesc d;
  d.batch = batch;
  d.rows = input_shape_[0];
  d.cols = input_shape_[1];
  d.channels = input_shape_[2];
  d.horizontal = mode_ != "vertical";
  d.vertical = mode_ != "horizontal";
  return d;
}

const Tensor& RandomFlip::forward(const Tensor& x, bool training) {
  flipped_ = training;
  if (!training) return x;
  backend::Backend& ops = this->ops();
  const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
  ops.uniform_noise(random_.next_call(0.0, sample_offset()), ops.place(draws_, {batch, 2}), 2);
  ops.flip_images(desc_for(batch), draws_, x, ops.place(output_, x.shape()));
  return output_;
}

const Tensor& RandomFlip::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!flipped_) return grad_output;
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  ops().flip_images(desc_for(batch), draws_, grad_output,
                    ops().place(grad_input_, grad_output.shape()));
  return grad_input_;
}

nlohmann::json RandomFlip::config() const {
  const std::optional<std::uint64_t> seed = random_.seed();
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"mode", mode_},
          {"seed", seed ? nlohmann::json(*seed) : nlohmann::json(nullptr)},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
