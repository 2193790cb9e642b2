// Flatten: (batch, d1, d2, ...) -> (batch, d1*d2*...); a view, no copy.
#pragma once

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  std::string class_name() const override { return "Flatten"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  Shape input_shape_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
