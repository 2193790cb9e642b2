// Private (CUDA module): DeviceBatchNormalization (see batch_normalization.hpp): config parsing
// and launches; the kernels are in batch_normalization.cu. Ownership and thread-safety as the
// class.
#include "cuda/replica/layers/batch_normalization.hpp"

#include <string>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/replica/layers/layer_config.hpp"

namespace tandem::cuda::layers {

DeviceBatchNormalization::DeviceBatchNormalization(const nlohmann::json& config,
                                                   const Shape& input_shape,
                                                   const Shape& output_shape, DeviceContext& ctx,
                                                   bool trainable)
    : ctx_(ctx), who_(layers::layer_who(config, "BatchNormalization")), trainable_(trainable) {
  using layers::config_value;
  if (ctx_.allocator == nullptr)
    throw RunError(who_ + " on a CUDA replica: the device context has no allocator");
  const std::string name = config.value("name", std::string("?"));
  if (config_value<bool>(config, "synchronized", who_, false))
    throw ConfigError(
        layers::config_path(config, "synchronized"),
        "layer '" + name +
            "': synchronized BatchNormalization is not available on CUDA replicas yet");
  momentum_ = config_value<double>(config, "momentum", who_, 0.99);
  epsilon_ = config_value<double>(config, "epsilon", who_, 1e-3);
  center_ = config_value<bool>(config, "center", who_, true);
  scale_ = config_value<bool>(config, "scale", who_, true);
  const auto axis = config.find("axis");
  std::int64_t axis_value = -1;
  if (axis != config.end() && axis->is_array() && axis->size() == 1)
    axis_value = (*axis)[0].get<std::int64_t>();  // tf.keras saves [3]
  else if (axis != config.end() && !axis->is_null())
    axis_value = config_value<std::int64_t>(config, "axis", who_);
  if (input_shape.empty())
    throw ShapeError(who_ + " needs inputs with a channel axis, got " +
                     shape_to_string(input_shape, true));
  if (axis_value != -1 && axis_value != static_cast<std::int64_t>(input_shape.size()))
    throw ShapeError(who_ + ": axis " + std::to_string(axis_value) + " of inputs " +
                     shape_to_string(input_shape, true) +
                     " is not the last axis; Tandem normalises the last axis only");
  layers::check_shape(who_, "output", output_shape, input_shape);
  channels_ = input_shape.back();
  if (channels_ <= 0)
    throw ShapeError(who_ + " needs a positive channel count, got " +
                     shape_to_string(input_shape, true));
  rows_per_sample_ = shape_size(input_shape) / channels_;

  // state_: mean (C doubles) and sums (2C doubles); shift, inv_std, a, b, k1, k2 (C floats each).
  const std::int64_t c = channels_;
  doubles_.resize(*ctx_.allocator, 2 * 3 * c);  // floats, holding 3C doubles
  floats_.resize(*ctx_.allocator, 6 * c);
  auto* d = reinterpret_cast<double*>(doubles_.data());
  float* f = floats_.data();
  state_.mean = d;
  state_.sums = d + c;
  state_.shift = f;
  state_.inv_std = f + c;
  state_.a = f + 2 * c;
  state_.b = f + 3 * c;
  state_.k1 = f + 4 * c;
  state_.k2 = f + 5 * c;
  // The host layer starts with zero shift and inv_std (used only by a backward before any
  // forward with samples).
  check(cudaMemsetAsync(floats_.data(), 0, static_cast<std::size_t>(6 * c) * sizeof(float),
                        ctx_.stream),
        "cudaMemsetAsync (BatchNormalization state)");
}

void DeviceBatchNormalization::bind(std::vector<DeviceParameter> params) {
  std::vector<std::int64_t> sizes(2 + (scale_ ? 1 : 0) + (center_ ? 1 : 0), channels_);
  layers::check_parameters(who_, params, sizes);
  DeviceLayer::bind(std::move(params));
}

const float* DeviceBatchNormalization::forward(const float* x, std::int64_t batch, bool training,
                                               std::int64_t /*sample_offset*/) {
  x_ = x;
  rows_ = batch * rows_per_sample_;
  out_.resize(*ctx_.allocator, rows_ * channels_);
  const float* g = gamma() ? gamma()->value : nullptr;
  const float* b = beta() ? beta()->value : nullptr;
  // Keras 3: `training and self.trainable` uses the batch statistics; otherwise the moving ones.
  batch_stats_ = training && trainable_;
  if (batch_stats_) {
    if (rows_ == 0) return out_.data();  // an empty shard: no statistics
    partial_.resize(*ctx_.allocator,
                    2 * layers::batch_norm_scratch_doubles(rows_, channels_));  // doubles
    layers::batch_norm_training_statistics(x, rows_, channels_, g, b, moving_mean().value,
                                           moving_variance().value, momentum_, epsilon_, state_,
                                           reinterpret_cast<double*>(partial_.data()), ctx_.stream);
  } else {
    layers::batch_norm_inference_statistics(channels_, g, b, moving_mean().value,
                                            moving_variance().value, epsilon_, state_, ctx_.stream);
  }
  layers::batch_norm_apply(x, out_.data(), rows_, channels_, state_, ctx_.stream);
  return out_.data();
}

const float* DeviceBatchNormalization::backward(const float* dy, bool need_input_grad) {
  float* gamma_grad = gamma() ? gamma()->grad : nullptr;
  float* beta_grad = beta() ? beta()->grad : nullptr;
  if (need_input_grad) dx_.resize(*ctx_.allocator, rows_ * channels_);
  // The sums feed gamma's and beta's gradients and, with batch statistics, dx.
  if (gamma_grad || beta_grad || (need_input_grad && batch_stats_)) {
    partial_.resize(*ctx_.allocator, 2 * layers::batch_norm_scratch_doubles(rows_, channels_));
    layers::batch_norm_gradient_sums(x_, dy, rows_, channels_, batch_stats_, gamma_grad, beta_grad,
                                     state_, reinterpret_cast<double*>(partial_.data()),
                                     ctx_.stream);
  }
  if (!need_input_grad) return nullptr;
  layers::batch_norm_input_gradient(x_, dy, dx_.data(), rows_, channels_, batch_stats_, state_,
                                    ctx_.stream);
  return dx_.data();
}

}  // namespace tandem::cuda::layers
