#include "nn/dropout.hpp"

#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// splitmix64 finaliser: a well-mixed 64-bit hash.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

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
  mask_.resize(x.shape());
  output_.resize(x.shape());
  const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  const std::int64_t cols = rows > 0 ? x.size() / rows : 0;
  const float scale = static_cast<float>(1.0 / (1.0 - rate_));
  // keep when the top 24 bits of the hash, as a fraction, are below 1 - rate
  const auto keep_below = static_cast<std::uint64_t>((1.0 - rate_) * 16777216.0);
  const std::uint64_t step_key = mix(stream_ ^ mix(call + 1));
  const std::int64_t offset = sample_offset();
  float* m = mask_.data();
  float* y = output_.data();
  const float* xp = x.data();
  cpu::parallel_for(rows, std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(cols, 1)),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        const std::uint64_t row_key =
                            mix(step_key ^ static_cast<std::uint64_t>(offset + r));
                        for (std::int64_t c = 0; c < cols; ++c) {
                          const std::uint64_t h = mix(row_key + static_cast<std::uint64_t>(c));
                          const std::int64_t i = r * cols + c;
                          m[i] = (h >> 40) < keep_below ? scale : 0.0f;
                          y[i] = xp[i] * m[i];
                        }
                      }
                    });
  return output_;
}

const Tensor& Dropout::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (!masked_) return grad_output;
  grad_input_.resize(grad_output.shape());
  for (std::int64_t i = 0; i < grad_output.size(); ++i) grad_input_[i] = grad_output[i] * mask_[i];
  return grad_input_;
}

nlohmann::json Dropout::config() const {
  return {
      {"name", name()},         {"trainable", trainable()},
      {"dtype", "float32"},     {"rate", rate_},
      {"noise_shape", nullptr}, {"seed", seed_ ? nlohmann::json(*seed_) : nlohmann::json(nullptr)}};
}

}  // namespace tandem::nn
