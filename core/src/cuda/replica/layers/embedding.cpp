// Private (CUDA module): DeviceEmbedding (see embedding.hpp): config parsing, the bad-index
// error and launches; the kernels are in embedding.cu. Ownership and thread-safety as the class.
#include "cuda/replica/layers/embedding.hpp"

#include "nn/embedding.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/replica/layers/layer_config.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

// Floats that hold n int32 (int32 and float have the same size).
std::int64_t floats_for_int32(std::int64_t n) {
  static_assert(sizeof(std::int32_t) == sizeof(float));
  return n;
}

}  // namespace

DeviceEmbedding::DeviceEmbedding(const nlohmann::json& config, const Shape& input_shape,
                                 const Shape& output_shape, DeviceContext& ctx)
    : ctx_(ctx),
      name_(config.value("name", std::string("?"))),
      who_(layers::layer_who(config, "Embedding")),
      input_shape_(input_shape) {
  using layers::config_value;
  if (ctx_.allocator == nullptr)
    throw RunError(who_ + " on a CUDA replica: the device context has no allocator");
  vocab_ = config_value<std::int64_t>(config, "input_dim", who_);
  dim_ = config_value<std::int64_t>(config, "output_dim", who_);
  if (vocab_ <= 0 || dim_ <= 0)
    throw ConfigError(layers::config_path(config, ""),
                      who_ + " needs positive input_dim and output_dim");
  if (vocab_ >= kMaxInt32)
    throw ConfigError(layers::config_path(config, "input_dim"),
                      who_ + ": input_dim " + std::to_string(vocab_) +
                          " is too large for a CUDA replica (at most 2^31 - 2)");
  if (config_value<bool>(config, "mask_zero", who_, false))
    throw ConfigError(layers::config_path(config, "mask_zero"),
                      who_ + ": mask_zero is not supported");
  Shape expected = input_shape;
  expected.push_back(dim_);
  layers::check_shape(who_, "output", output_shape, expected);
  per_sample_ = std::max<std::int64_t>(shape_size(input_shape), 1);
  flag_.resize(*ctx_.allocator, 2);  // one unsigned long long
}

void DeviceEmbedding::bind(std::vector<DeviceParameter> params) {
  layers::check_parameters(who_, params, {vocab_ * dim_});
  DeviceLayer::bind(std::move(params));
}

// The host layer's error (nn::throw_bad_embedding_index).
void DeviceEmbedding::throw_bad_index(const float* x, std::int64_t i, std::int64_t sample_offset) {
  float v = 0.0f;
  check(cudaMemcpyAsync(&v, x + i, sizeof v, cudaMemcpyDeviceToHost, ctx_.stream),
        "cudaMemcpyAsync (Embedding input)");
  check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize");
  nn::throw_bad_embedding_index(name_, input_shape_, sample_offset, i, v, vocab_);
}

const float* DeviceEmbedding::forward(const float* x, std::int64_t batch, bool /*training*/,
                                      std::int64_t sample_offset) {
  const std::int64_t n = batch * shape_size(input_shape_);
  if (n > kMaxInt32)
    throw ShapeError(who_ + " on a CUDA replica: " + std::to_string(n) +
                     " indices in one batch, more than 2^31 - 1");
  count_ = n;
  indices_.resize(*ctx_.allocator, floats_for_int32(n));
  auto* indices = reinterpret_cast<std::int32_t*>(indices_.data());
  auto* flag = reinterpret_cast<unsigned long long*>(flag_.data());
  layers::embedding_indices(x, indices, n, vocab_, flag, ctx_.stream);
  unsigned long long first_bad = 0;
  check(cudaMemcpyAsync(&first_bad, flag, sizeof first_bad, cudaMemcpyDeviceToHost, ctx_.stream),
        "cudaMemcpyAsync (Embedding index check)");
  check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize");
  if (first_bad < static_cast<unsigned long long>(n))
    throw_bad_index(x, static_cast<std::int64_t>(first_bad), sample_offset);
  out_.resize(*ctx_.allocator, n * dim_);
  layers::embedding_gather(params_.at(0).value, indices, out_.data(), n, dim_, ctx_.stream);
  return out_.data();
}

const float* DeviceEmbedding::backward(const float* dy, bool need_input_grad) {
  if (need_input_grad)
    throw ShapeError("layer '" + name_ +
                     "' (Embedding) has no gradient with respect to its inputs (integer "
                     "indices): it must be the first layer with trainable weights, directly "
                     "after the input or after layers without weights");
  float* grad = params_.at(0).grad;
  if (grad == nullptr) return nullptr;  // a frozen table
  const std::int64_t n = count_;
  work_.resize(*ctx_.allocator, floats_for_int32(3 * n));
  starts_.resize(*ctx_.allocator, floats_for_int32(vocab_ + 1));
  const std::size_t bytes = n > 0 ? layers::embedding_gradient_scratch_bytes(n, vocab_) : 0;
  sort_scratch_.resize(*ctx_.allocator,
                       static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
  layers::embedding_gradient(reinterpret_cast<const std::int32_t*>(indices_.data()), dy, grad, n,
                             vocab_, dim_, reinterpret_cast<std::int32_t*>(work_.data()),
                             reinterpret_cast<std::int32_t*>(starts_.data()), sort_scratch_.data(),
                             bytes, ctx_.stream);
  return nullptr;
}

}  // namespace tandem::cuda::layers
