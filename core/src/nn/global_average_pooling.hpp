// GlobalAveragePooling2D: the mean over rows and columns, channels_last:
// (batch, rows, cols, channels) -> (batch, channels), or (batch, 1, 1, channels) with keepdims.
#pragma once

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class GlobalAveragePooling2D : public Layer {
 public:
  GlobalAveragePooling2D(std::string name, bool keepdims)
      : Layer(std::move(name)), keepdims_(keepdims) {}
  std::string class_name() const override { return "GlobalAveragePooling2D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  bool keepdims_;
  Shape input_shape_;  // (rows, cols, channels)
  std::int64_t last_batch_ = -1;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
