// GlobalAveragePooling1D, 2D and 3D: the mean over every position, channels_last: (batch,
// steps, features) -> (batch, features) for 1D, (batch, rows, cols, channels) -> (batch,
// channels) for 2D, (batch, depth, rows, cols, channels) for 3D; with keepdims the pooled axes
// stay, of size 1. One class: they differ only in how many axes they pool.
#pragma once

#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class GlobalAveragePooling : public Layer, public MaskedSteps {
 public:
  /// `spatial_axes`: 1, 2 or 3 (GlobalAveragePooling1D, 2D, 3D).
  GlobalAveragePooling(std::string name, int spatial_axes, bool keepdims)
      : Layer(std::move(name)), spatial_axes_(spatial_axes), keepdims_(keepdims) {}
  std::string class_name() const override;
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  /// GlobalAveragePooling1D averages over the steps a Keras mask keeps (Keras': Σ mask·x / Σ
  /// mask); the output carries none. GlobalAveragePooling2D reads no mask.
  bool output_masked(bool /*input_masked*/) const override { return false; }
  void set_input_mask(const Tensor* mask) override { mask_ = spatial_axes_ == 1 ? mask : nullptr; }
  const Tensor* output_mask() const override { return nullptr; }

 private:
  int spatial_axes_;
  bool keepdims_;
  Shape input_shape_;   // (positions..., channels)
  Shape output_shape_;  // (channels), or (1..., channels) with keepdims
  std::int64_t cells_ = 0, channels_ = 0;
  std::int64_t last_batch_ = -1;
  const Tensor* mask_ = nullptr;  // the steps a Keras mask keeps (borrowed), or null
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
