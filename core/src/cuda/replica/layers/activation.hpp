// Private (CUDA module): the device twin of nn::Activation — any Keras activation of
// nn/activation_fn.hpp (softmax over the last axis), as one kernel forward and one backward.
//
// Ownership: owns its buffers; borrows ctx. Thread-safety: one thread at a time.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "nn/activation_fn.hpp"

namespace tandem::cuda::layers {

class DeviceActivation final : public DeviceLayer {
 public:
  DeviceActivation(const nlohmann::json& config, const Shape& input_shape, DeviceContext& ctx);
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  DeviceContext& ctx_;
  nn::ActivationKind kind_;
  std::int64_t cols_ = 1, rows_per_sample_ = 1;
  const float* input_ = nullptr;
  std::int64_t rows_ = 0;
  DeviceBuffer output_, grad_input_;
};

/// Flatten, Reshape (and any layer that only reinterprets the shape): the data unchanged.
class DevicePassThrough final : public DeviceLayer {
 public:
  const float* forward(const float* x, std::int64_t, bool, std::int64_t) override { return x; }
  const float* backward(const float* dy, bool need_input_grad) override {
    return need_input_grad ? dy : nullptr;
  }
};

}  // namespace tandem::cuda::layers
