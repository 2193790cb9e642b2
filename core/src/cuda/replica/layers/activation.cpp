#include "cuda/replica/layers/activation.hpp"

#include "cuda/ops/activations.hpp"
#include "cuda/replica/layers/layer_config.hpp"

namespace tandem::cuda::layers {

DeviceActivation::DeviceActivation(const nlohmann::json& config, const Shape& input_shape,
                                   DeviceContext& ctx)
    : ctx_(ctx) {
  const std::string who = layer_who(config, "Activation");
  kind_ = nn::parse_activation(config_value<std::string>(config, "activation", who, "linear"),
                               who + ".activation");
  if (!input_shape.empty()) cols_ = input_shape.back();
  for (std::size_t a = 0; a + 1 < input_shape.size(); ++a) rows_per_sample_ *= input_shape[a];
}

const float* DeviceActivation::forward(const float* x, std::int64_t batch, bool /*training*/,
                                       std::int64_t /*sample_offset*/) {
  if (kind_ == nn::ActivationKind::linear) return x;
  input_ = x;
  rows_ = batch * rows_per_sample_;
  output_.resize(*ctx_.allocator, rows_ * cols_);
  activation_forward(kind_, x, output_.data(), rows_, cols_, ctx_.stream);
  return output_.data();
}

const float* DeviceActivation::backward(const float* dy, bool need_input_grad) {
  if (!need_input_grad) return nullptr;
  if (kind_ == nn::ActivationKind::linear) return dy;
  grad_input_.resize(*ctx_.allocator, rows_ * cols_);
  activation_backward(kind_, input_, output_.data(), dy, grad_input_.data(), rows_, cols_,
                      ctx_.stream);
  return grad_input_.data();
}

}  // namespace tandem::cuda::layers
