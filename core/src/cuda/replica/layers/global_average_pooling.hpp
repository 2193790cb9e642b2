// Private (CUDA module): the device twin of nn::GlobalAveragePooling2D: the mean over rows and
// columns, channels_last: (rows, cols, channels) -> (channels), or (1, 1, channels) with keepdims
// (the same floats). Bit for bit the host layer's arithmetic. (The host has no 1D variant.)
//
// Ownership: owns its buffers (from ctx.allocator), borrows ctx (which outlives it).
// Thread-safety: one thread at a time; all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"

namespace tandem::cuda::layers {

class DeviceGlobalAveragePooling2D final : public DeviceLayer {
 public:
  /// config: the host layer's config() (keepdims); shapes per sample. Throws ConfigError /
  /// ShapeError naming the layer when they disagree.
  DeviceGlobalAveragePooling2D(const nlohmann::json& config, const Shape& input_shape,
                               const Shape& output_shape, DeviceContext& ctx);
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  DeviceContext& ctx_;
  std::string who_;
  std::int64_t cells_ = 0, channels_ = 0;
  std::int64_t batch_ = 0;
  DeviceBuffer out_, dx_;
};

}  // namespace tandem::cuda::layers
