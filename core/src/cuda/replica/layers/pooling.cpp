// Private (CUDA module): DevicePooling2D (see pooling.hpp): config parsing and launches; the
// kernels are in pooling.cu. Ownership and thread-safety as the class.
#include "cuda/replica/layers/pooling.hpp"

#include <string>

#include "cuda/replica/layers/layer_config.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

DevicePooling2D::DevicePooling2D(const nlohmann::json& config, const Shape& input_shape,
                                 const Shape& output_shape, DeviceContext& ctx, bool max)
    : ctx_(ctx),
      who_(layers::layer_who(config, max ? "MaxPooling2D" : "AveragePooling2D")),
      max_(max) {
  if (ctx_.allocator == nullptr)
    throw RunError(who_ + " on a CUDA replica: the device context has no allocator");
  const nn::Pair k = layers::config_pair(config, "pool_size", who_, {2, 2});
  const nn::Pair s = layers::config_pair(config, "strides", who_, k);  // Keras: None = pool_size
  const nn::Padding padding = layers::config_padding(config, who_);
  if (k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0)
    throw ConfigError(layers::config_path(config, ""),
                      who_ + " needs positive pool_size and strides");
  nn::check_image_shape(input_shape, who_);
  geom_.rows = layers::make_axis(input_shape[0], k[0], s[0], 1, padding);
  geom_.cols = layers::make_axis(input_shape[1], k[1], s[1], 1, padding);
  geom_.channels = input_shape[2];
  if (geom_.rows.out <= 0 || geom_.cols.out <= 0)
    throw ShapeError(who_ + ": pool_size " + shape_to_string({k[0], k[1]}) +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  layers::check_shape(who_, "output", output_shape,
                      {geom_.rows.out, geom_.cols.out, geom_.channels});
  if (geom_.rows.in * geom_.cols.in > (std::int64_t{1} << 31) - 1)
    throw ShapeError(who_ + " on a CUDA replica: an input of more than 2^31 cells");
  in_size_ = shape_size(input_shape);
  out_size_ = shape_size(output_shape);
}

const float* DevicePooling2D::forward(const float* x, std::int64_t batch, bool /*training*/,
                                      std::int64_t /*sample_offset*/) {
  batch_ = batch;
  out_.resize(*ctx_.allocator, batch * out_size_);
  if (max_) {
    static_assert(sizeof(std::int32_t) == sizeof(float));
    argmax_.resize(*ctx_.allocator, batch * out_size_);
    layers::max_pool_forward(x, out_.data(), reinterpret_cast<std::int32_t*>(argmax_.data()), batch,
                             geom_, ctx_.stream);
  } else {
    layers::avg_pool_forward(x, out_.data(), batch, geom_, ctx_.stream);
  }
  return out_.data();
}

const float* DevicePooling2D::backward(const float* dy, bool need_input_grad) {
  if (!need_input_grad) return nullptr;
  dx_.resize(*ctx_.allocator, batch_ * in_size_);
  if (max_)
    layers::max_pool_backward(dy, reinterpret_cast<const std::int32_t*>(argmax_.data()), dx_.data(),
                              batch_, geom_, ctx_.stream);
  else
    layers::avg_pool_backward(dy, dx_.data(), batch_, geom_, ctx_.stream);
  return dx_.data();
}

}  // namespace tandem::cuda::layers
