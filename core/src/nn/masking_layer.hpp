// Keras' Masking layer: a step of (batch, steps, features) whose every feature equals
// `mask_value` is padding. The output is the input with those steps zeroed (x times the mask, as
// Keras computes it), and it carries the mask (nn/sequence_masks.hpp) for the layers after it.
// The gradient passes to the kept steps only. Ownership and threads: as every layer's.
#pragma once

#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class Masking : public Layer, public MaskedSteps {
 public:
  Masking(std::string name, float mask_value) : Layer(std::move(name)), mask_value_(mask_value) {}
  std::string class_name() const override { return "Masking"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  bool output_masked(bool /*input_masked*/) const override { return true; }
  void set_input_mask(const Tensor* /*mask*/) override {}
  const Tensor* output_mask() const override { return &mask_; }

 private:
  float mask_value_;
  Shape input_shape_;
  std::int64_t features_ = 0;
  Tensor mask_, output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
