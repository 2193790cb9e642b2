// Private (CUDA module): DeviceGlobalAveragePooling2D (see global_average_pooling.hpp): config
// parsing and launches; the kernels are in global_average_pooling.cu. Ownership and
// thread-safety as the class.
#include "cuda/replica/layers/global_average_pooling.hpp"

#include "cuda/replica/layers/layer_config.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

DeviceGlobalAveragePooling2D::DeviceGlobalAveragePooling2D(const nlohmann::json& config,
                                                           const Shape& input_shape,
                                                           const Shape& output_shape,
                                                           DeviceContext& ctx)
    : ctx_(ctx), who_(layers::layer_who(config, "GlobalAveragePooling2D")) {
  if (ctx_.allocator == nullptr)
    throw RunError(who_ + " on a CUDA replica: the device context has no allocator");
  const bool keepdims = layers::config_value<bool>(config, "keepdims", who_, false);
  nn::check_image_shape(input_shape, who_);
  cells_ = input_shape[0] * input_shape[1];
  channels_ = input_shape[2];
  layers::check_shape(who_, "output", output_shape,
                      keepdims ? Shape{1, 1, channels_} : Shape{channels_});
}

const float* DeviceGlobalAveragePooling2D::forward(const float* x, std::int64_t batch,
                                                   bool /*training*/,
                                                   std::int64_t /*sample_offset*/) {
  batch_ = batch;
  out_.resize(*ctx_.allocator, batch * channels_);
  layers::global_average_pool_forward(x, out_.data(), batch, cells_, channels_, ctx_.stream);
  return out_.data();
}

const float* DeviceGlobalAveragePooling2D::backward(const float* dy, bool need_input_grad) {
  if (!need_input_grad) return nullptr;
  dx_.resize(*ctx_.allocator, batch_ * cells_ * channels_);
  layers::global_average_pool_backward(dy, dx_.data(), batch_, cells_, channels_, ctx_.stream);
  return dx_.data();
}

}  // namespace tandem::cuda::layers
