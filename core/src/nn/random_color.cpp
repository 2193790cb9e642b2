#include "nn/random_color.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

using backend::AdjustDesc;

RandomColor::RandomColor(std::string name, AdjustDesc desc, std::optional<std::uint64_t> seed,
                         nlohmann::json keras_config)
    : Layer(std::move(name)), desc_(desc), random_(seed), keras_config_(std::move(keras_config)) {}

Shape RandomColor::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 3)
    throw ShapeError("layer '" + name() + "' (" + class_name() +
                     ") expects images (None, rows, cols, channels), got " +
                     shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  random_.build(init);
  return input_shape;
}

AdjustDesc RandomColor::desc_for(std::int64_t batch) const {
  AdjustDesc d = desc_;
  d.batch = batch;
  d.rows = input_shape_[0];
  d.cols = input_shape_[1];
  d.channels = input_shape_[2];
  return d;
}

const Tensor& RandomColor::forward(const Tensor& x, bool training) {
  adjusted_ = training;
  if (!training) return x;
  backend::Backend& ops = this->ops();
  const std::int64_t batch = x.rank() > 0 ? x.dim(0) : 0;
  input_ = x;
  ops.uniform_noise(random_.next_call(0.0, sample_offset()), ops.place(draws_, {batch, 1}), 1);
  ops.adjust_images(desc_for(batch), draws_, x, ops.place(means_, {batch, input_shape_[2]}),
                    ops.place(output_, x.shape()));
  return output_;
}

const Tensor& RandomColor::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!adjusted_) return grad_output;
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  ops().adjust_images_backward(desc_for(batch), draws_, input_, means_, grad_output,
                               ops().place(grad_input_, grad_output.shape()));
  return grad_input_;
}

nlohmann::json RandomColor::config() const {
  nlohmann::json c = keras_config_;
  const std::optional<std::uint64_t> seed = random_.seed();
  c["name"] = name();
  c["trainable"] = trainable();
  c["dtype"] = "float32";
  c["seed"] = seed ? nlohmann::json(*seed) : nlohmann::json(nullptr);
  return c;
}

}  // namespace tandem::nn
