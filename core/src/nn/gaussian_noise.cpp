#include "nn/gaussian_noise.hpp"

#include <cmath>

#include "backend/ops.hpp"

namespace tandem::nn {

GaussianNoise::GaussianNoise(std::string name, Kind kind, double amount,
                             std::optional<std::uint64_t> seed)
    : Layer(std::move(name)), kind_(kind), amount_(amount), random_(seed) {}

Shape GaussianNoise::build(const Shape& input_shape, Rng& init) {
  random_.build(init);
  return input_shape;
}

const Tensor& GaussianNoise::forward(const Tensor& x, bool training) {
  noisy_ = training && amount_ > 0.0;
  if (!noisy_) return x;
  backend::Backend& ops = this->ops();
  const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? x.size() / rows : 0;
  ops.normal_noise(random_.next_call(0.0, sample_offset()), ops.place(noise_, x.shape()), cols);
  ops.place(output_, x.shape());
  if (kind_ == Kind::additive) {
    ops.affine(noise_, static_cast<float>(amount_), 0.0f, noise_);
    ops.add(x, noise_, output_);
  } else {
    ops.affine(noise_, static_cast<float>(std::sqrt(amount_ / (1.0 - amount_))), 1.0f, noise_);
    ops.multiply(x, noise_, output_);
  }
  return output_;
}

const Tensor& GaussianNoise::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!noisy_ || kind_ == Kind::additive) return grad_output;
  ops().multiply(grad_output, noise_, ops().place(grad_input_, grad_output.shape()));
  return grad_input_;
}

nlohmann::json GaussianNoise::config() const {
  const std::optional<std::uint64_t> seed = random_.seed();
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {kind_ == Kind::additive ? "stddev" : "rate", amount_},
          {"seed", seed ? nlohmann::json(*seed) : nlohmann::json(nullptr)}};
}

}  // namespace tandem::nn
