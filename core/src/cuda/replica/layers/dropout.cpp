#include "cuda/replica/layers/dropout.hpp"

#include "cuda/ops/activations.hpp"
#include "cuda/replica/layers/layer_config.hpp"

namespace tandem::cuda::layers {

DeviceDropout::DeviceDropout(const nlohmann::json& config, const Shape& input_shape,
                             DeviceContext& ctx)
    : who_(layer_who(config, "Dropout")), ctx_(ctx) {
  rate_ = config_value<double>(config, "rate", who_);
  sample_size_ = shape_size(input_shape);
}

void DeviceDropout::set_random_state(const std::vector<std::uint64_t>& state) {
  if (state.size() != 2)
    throw DataError(who_ + ": a Dropout random state has 2 numbers, got " +
                    std::to_string(state.size()));
  stream_ = state[0];
  calls_ = state[1];
}

const float* DeviceDropout::forward(const float* x, std::int64_t batch, bool training,
                                    std::int64_t sample_offset) {
  masked_ = training && rate_ > 0.0;
  if (!masked_) return x;
  n_ = batch * sample_size_;
  mask_.resize(*ctx_.allocator, n_);
  output_.resize(*ctx_.allocator, n_);
  dropout_forward(x, output_.data(), mask_.data(), batch, sample_size_, stream_, calls_++,
                  sample_offset, rate_, ctx_.stream);
  return output_.data();
}

const float* DeviceDropout::backward(const float* dy, bool need_input_grad) {
  if (!need_input_grad) return nullptr;
  if (!masked_) return dy;
  grad_input_.resize(*ctx_.allocator, n_);
  multiply(dy, mask_.data(), grad_input_.data(), n_, ctx_.stream);
  return grad_input_.data();
}

}  // namespace tandem::cuda::layers
