// Private (CUDA module): the device twin of nn::Dropout — the same mask bit for bit (a hash of
// the layer's stream, its call count and each sample's place in the global batch, so it does not
// depend on the device plan: contract 1), y = x * mask in training, the identity otherwise.
// The call count lives in device memory and is counted there, so a training step replayed from a
// CUDA graph draws a fresh mask every time; random_state() reads it back.
//
// Ownership: owns its mask and output buffers; borrows ctx. Thread-safety: one thread at a time.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"

namespace tandem::cuda::layers {

class DeviceDropout final : public DeviceLayer {
 public:
  DeviceDropout(const nlohmann::json& config, const Shape& input_shape, DeviceContext& ctx);
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;
  void skip_training_step() override;
  /// {stream, calls}, as nn::Dropout's random state (reads the count from the device: waits for
  /// the work queued so far).
  std::vector<std::uint64_t> random_state() const override;
  void set_random_state(const std::vector<std::uint64_t>& state) override;

 private:
  std::string who_;
  DeviceContext& ctx_;
  double rate_ = 0;
  std::int64_t sample_size_ = 1;
  std::uint64_t stream_ = 0;
  bool masked_ = false;
  std::int64_t n_ = 0;
  DeviceBuffer calls_;  // one uint64: training forwards so far
  DeviceBuffer mask_, output_, grad_input_;
};

}  // namespace tandem::cuda::layers
