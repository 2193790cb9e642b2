#include "nn/dropout.hpp"

#include "backend/kernel_math.hpp"
#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

using backend::math::mix;

Dropout::Dropout(std::string name, double rate, std::optional<std::uint64_t> seed)
    : Layer(std::move(name)), rate_(rate), seed_(seed) {}

Shape Dropout::build(const Shape& input_shape, Rng& init) {
  stream_ = seed_ ? mix(*seed_ + 0x9e3779b97f4a7c15ULL) : init.next_u64();
  return input_shape;
}

void Dropout::set_random_state(const std::vector<std::uint64_t>& state) {
  if (state.size() != 2)
    throw DataError("layer '" + name() + "': a Dropout random state has 2 numbers, got " +
                    std::to_string(state.size()));
  stream_ = state[0];
  calls_ = state[1];
}

const Tensor& Dropout::forward(const Tensor& x, bool training) {
  masked_ = training && rate_ > 0.0;
  if (!masked_) return x;
  const std::uint64_t call = calls_++;
  const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? x.size() / rows : 0;
  ops().dropout_forward({stream_, call, rate_, sample_offset()}, x,
                        ops().place(output_, x.shape()), ops().place(mask_, x.shape()), cols);
  return output_;
}

const Tensor& Dropout::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!masked_) return grad_output;
  ops().multiply(grad_output, mask_, ops().place(grad_input_, grad_output.shape()));
  return grad_input_;
}

nlohmann::json Dropout::config() const {
  return {
      {"name", name()},         {"trainable", trainable()},
      {"dtype", "float32"},     {"rate", rate_},
      {"noise_shape", nullptr}, {"seed", seed_ ? nlohmann::json(*seed_) : nlohmann::json(nullptr)}};
}

}  // namespace tandem::nn
