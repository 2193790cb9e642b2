// Private (CUDA module): the device twin of nn::BatchNormalization (Keras 3, channels_last, the
// last axis), with the host layer's arithmetic (see nn/batch_normalization.hpp):
//   training (forward with training=true on a trainable layer): the batch's mean and biased
//     variance per channel, in double, two passes, summed over the same blocks of rows in the
//     same order as the host; the moving statistics move by Keras 3's formula;
//   otherwise (inference, or trainable=false: Keras 3 runs a frozen layer in inference mode and
//     leaves its moving statistics alone): the moving statistics.
// backward: gamma / beta gradients (when bound with a grad), and dx through the batch statistics
// (or the moving ones). Every operation is rounded as the host's build rounds it, so the results
// equal the CPU layer's bit for bit. A replica normalises with its own shard's statistics, as the
// host layer does; synchronized=true (statistics over the global batch) is not available here yet.
//
// Ownership: owns its buffers (from ctx.allocator), borrows ctx (which outlives it) and the bound
// parameters (it writes the moving statistics in place). Thread-safety: one thread at a time;
// all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

class DeviceBatchNormalization final : public DeviceLayer {
 public:
  /// config: the host layer's config(); `trainable`: the host layer's trainable() (false runs
  /// it in inference mode). Shapes per sample, the output equal to the input. Throws ConfigError
  /// for synchronized=true, and ConfigError / ShapeError naming the layer when shapes disagree.
  DeviceBatchNormalization(const nlohmann::json& config, const Shape& input_shape,
                           const Shape& output_shape, DeviceContext& ctx, bool trainable);
  /// gamma (if scale), beta (if center), moving_mean, moving_variance: `channels` values each.
  void bind(std::vector<DeviceParameter> params) override;
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  DeviceParameter* gamma() { return scale_ ? &params_[0] : nullptr; }
  DeviceParameter* beta() { return center_ ? &params_[scale_ ? 1 : 0] : nullptr; }
  DeviceParameter& moving_mean() { return params_[params_.size() - 2]; }
  DeviceParameter& moving_variance() { return params_[params_.size() - 1]; }

  DeviceContext& ctx_;
  std::string who_;
  bool trainable_;
  double momentum_ = 0.99, epsilon_ = 1e-3;
  bool center_ = true, scale_ = true;
  std::int64_t channels_ = 0;
  std::int64_t rows_per_sample_ = 0;  // values per sample / channels

  const float* x_ = nullptr;  // the last forward's input (the caller keeps it)
  std::int64_t rows_ = 0;     // the last forward's rows (batch * rows_per_sample_)
  bool batch_stats_ = false;  // whether the last forward normalised with batch statistics
  layers::BatchNormState state_;
  DeviceBuffer doubles_, floats_;  // state_'s arrays (doubles_ holds doubles)
  DeviceBuffer partial_;           // reduction scratch (holds doubles)
  DeviceBuffer out_, dx_;
};

}  // namespace tandem::cuda::layers
