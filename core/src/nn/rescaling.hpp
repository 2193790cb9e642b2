// Rescaling, Keras semantics: y = x * scale + offset element-wise (scalar scale and offset),
// e.g. 1/255 to bring pixel bytes to [0, 1]; dx = dy * scale. No weights. Computes on its
// backend (affine). Ownership and threads: as every layer's.
#pragma once

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Rescaling : public Layer {
 public:
  Rescaling(std::string name, double scale, double offset)
      : Layer(std::move(name)), scale_(scale), offset_(offset) {}
  std::string class_name() const override { return "Rescaling"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  double scale_, offset_;
  Shape input_shape_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
