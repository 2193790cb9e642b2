#include "cuda/replica/layers/dropout.hpp"

#include "cuda/ops/activations.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/replica/layers/layer_config.hpp"

namespace tandem::cuda::layers {

namespace {

// The call count: one uint64 in a DeviceBuffer of floats (256-byte aligned).
std::uint64_t* count_of(DeviceBuffer& b) {
  return reinterpret_cast<std::uint64_t*>(b.data());
}

}  // namespace

DeviceDropout::DeviceDropout(const nlohmann::json& config, const Shape& input_shape,
                             DeviceContext& ctx)
    : who_(layer_who(config, "Dropout")), ctx_(ctx) {
  rate_ = config_value<double>(config, "rate", who_);
  sample_size_ = shape_size(input_shape);
  calls_.resize(*ctx_.allocator, 2);
  check(cudaMemsetAsync(calls_.data(), 0, sizeof(std::uint64_t), ctx_.stream),
        "cudaMemsetAsync (Dropout's call count)");
}

std::vector<std::uint64_t> DeviceDropout::random_state() const {
  std::uint64_t calls = 0;
  check(cudaMemcpyAsync(&calls, calls_.data(), sizeof calls, cudaMemcpyDeviceToHost, ctx_.stream),
        "copy of Dropout's call count to the host");
  check(cudaStreamSynchronize(ctx_.stream), "copy of Dropout's call count to the host");
  return {stream_, calls};
}

void DeviceDropout::set_random_state(const std::vector<std::uint64_t>& state) {
  if (state.size() != 2)
    throw DataError(who_ + ": a Dropout random state has 2 numbers, got " +
                    std::to_string(state.size()));
  stream_ = state[0];
  const std::uint64_t calls = state[1];
  check(cudaMemcpyAsync(calls_.data(), &calls, sizeof calls, cudaMemcpyHostToDevice, ctx_.stream),
        "copy of Dropout's call count to the device");
  check(cudaStreamSynchronize(ctx_.stream), "copy of Dropout's call count to the device");
}

const float* DeviceDropout::forward(const float* x, std::int64_t batch, bool training,
                                    std::int64_t sample_offset) {
  masked_ = training && rate_ > 0.0;
  if (!masked_) return x;
  n_ = batch * sample_size_;
  mask_.resize(*ctx_.allocator, n_);
  output_.resize(*ctx_.allocator, n_);
  dropout_forward(x, output_.data(), mask_.data(), batch, sample_size_, stream_, count_of(calls_),
                  sample_offset, rate_, ctx_.stream);
  return output_.data();
}

void DeviceDropout::skip_training_step() {
  if (rate_ > 0.0) count_dropout_call(count_of(calls_), ctx_.stream);
}

const float* DeviceDropout::backward(const float* dy, bool need_input_grad) {
  if (!need_input_grad) return nullptr;
  if (!masked_) return dy;
  grad_input_.resize(*ctx_.allocator, n_);
  multiply(dy, mask_.data(), grad_input_.data(), n_, ctx_.stream);
  return grad_input_.data();
}

}  // namespace tandem::cuda::layers
