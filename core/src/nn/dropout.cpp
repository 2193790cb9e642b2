#include "nn/dropout.hpp"

namespace tandem::nn {

Dropout::Dropout(std::string name, double rate, std::optional<std::uint64_t> seed)
    : Layer(std::move(name)), rate_(rate), seed_(seed) {}

Shape Dropout::build(const Shape& input_shape, Rng& init) {
  // The layer's own stream: from its config seed, else from the model's initialisation stream.
  rng_.reseed(seed_ ? *seed_ : init.next_u64());
  return input_shape;
}

const Tensor& Dropout::forward(const Tensor& x, bool training) {
  masked_ = training && rate_ > 0.0;
  if (!masked_) {
    return x;
  }
  mask_.resize(x.shape());
  output_.resize(x.shape());
  const float scale = static_cast<float>(1.0 / (1.0 - rate_));
  const float keep = static_cast<float>(1.0 - rate_);
  float* m = mask_.data();
  float* y = output_.data();
  const float* xp = x.data();
  for (std::int64_t i = 0; i < x.size(); ++i) {
    m[i] = rng_.uniform() < keep ? scale : 0.0f;
    y[i] = xp[i] * m[i];
  }
  return output_;
}

const Tensor& Dropout::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!masked_) return grad_output;
  grad_input_.resize(grad_output.shape());
  for (std::int64_t i = 0; i < grad_output.size(); ++i) grad_input_[i] = grad_output[i] * mask_[i];
  return grad_input_;
}

nlohmann::json Dropout::config() const {
  return {
      {"name", name()},         {"trainable", trainable()},
      {"dtype", "float32"},     {"rate", rate_},
      {"noise_shape", nullptr}, {"seed", seed_ ? nlohmann::json(*seed_) : nlohmann::json(nullptr)}};
}

}  // namespace tandem::nn
