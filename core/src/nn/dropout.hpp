// Dropout: during training zeroes each value with probability `rate` and scales the rest by
// 1/(1-rate) (inverted dropout, as Keras); the identity at inference. Seeded, reproducible.
#pragma once

#include <optional>

#include "tandem/layer.hpp"

namespace tandem::nn {

class Dropout : public Layer {
 public:
  Dropout(std::string name, double rate, std::optional<std::uint64_t> seed);
  std::string class_name() const override { return "Dropout"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  Rng* rng() override { return &rng_; }

 private:
  double rate_;
  std::optional<std::uint64_t> seed_;
  Rng rng_;
  bool masked_ = false;  // whether the last forward applied a mask
  Tensor mask_, output_, grad_input_;
};

}  // namespace tandem::nn
