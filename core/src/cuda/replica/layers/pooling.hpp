// Private (CUDA module): the device twin of nn::Pooling2D — MaxPooling2D and AveragePooling2D,
// Keras semantics, channels_last: pool_size, strides, padding "valid" or "same" (TensorFlow's
// SAME, nn::window_along). As the host layer (oneDNN): padded cells never win a max and are left
// out of an average; among equal maxima the first in window order wins and takes the gradient;
// NaN never wins. The forward keeps each output's arg-max cell for the backward. (The host's
// relu hand-over between a Conv2D and a max pooling is a CPU optimisation: here each layer
// applies its own activation, the same function.)
//
// Ownership: owns its buffers (from ctx.allocator), borrows ctx (which outlives it).
// Thread-safety: one thread at a time; all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/window_math.hpp"

namespace tandem::cuda::layers {

/// Both kinds; construct one of the two classes below.
class DevicePooling2D : public DeviceLayer {
 public:
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 protected:
  /// config: the host layer's config(); `max`: MaxPooling2D, else AveragePooling2D. Shapes per
  /// sample: (rows, cols, channels) -> (out_rows, out_cols, channels). Throws ConfigError /
  /// ShapeError naming the layer when they disagree.
  DevicePooling2D(const nlohmann::json& config, const Shape& input_shape, const Shape& output_shape,
                  DeviceContext& ctx, bool max);

 private:
  DeviceContext& ctx_;
  std::string who_;
  bool max_;
  window::Geometry2D geom_;
  std::int64_t in_size_ = 0, out_size_ = 0;  // floats per sample
  std::int64_t batch_ = 0;
  DeviceBuffer out_, dx_, argmax_;  // argmax_: int32 cells, in a float buffer
};

class DeviceMaxPooling2D final : public DevicePooling2D {
 public:
  DeviceMaxPooling2D(const nlohmann::json& config, const Shape& input_shape,
                     const Shape& output_shape, DeviceContext& ctx)
      : DevicePooling2D(config, input_shape, output_shape, ctx, true) {}
};

class DeviceAveragePooling2D final : public DevicePooling2D {
 public:
  DeviceAveragePooling2D(const nlohmann::json& config, const Shape& input_shape,
                         const Shape& output_shape, DeviceContext& ctx)
      : DevicePooling2D(config, input_shape, output_shape, ctx, false) {}
};

}  // namespace tandem::cuda::layers
