// The CUDA backend's batch normalization (backend::BatchNorm): keeps the per-channel statistics
// between a forward and its backward, around the kernels of cuda/ops/layer_kernels.hpp, whose sums
// are the CPU backend's (the same blocks of rows, in double, added in block order).
//
// Ownership: owns its buffers; borrows the backend, which outlives it. Thread-safety: one thread
// at a time; all work on the backend's stream.
#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/layer_kernels.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

namespace {

class CudaBatchNorm final : public backend::BatchNorm {
 public:
  CudaBatchNorm(const backend::BatchNormDesc& desc, CudaBackend& ops) : d_(desc), ops_(ops) {
    // state_: mean (C doubles), sums (2C doubles) and the kept rows (one 64-bit count); shift,
    // inv_std, a, b, k1, k2 (C floats).
    const std::int64_t c = d_.channels;
    doubles_.resize(ops_.allocator(), 2 * (3 * c + 1));  // floats, holding 3C + 1 doubles
    floats_.resize(ops_.allocator(), 6 * c);
    auto* dp = reinterpret_cast<double*>(doubles_.data());
    float* f = floats_.data();
    state_ = {dp,        dp + c,    f,
              f + c,     f + 2 * c, f + 3 * c,
              f + 4 * c, f + 5 * c, reinterpret_cast<unsigned long long*>(dp + 3 * c)};
    // Zero shift and inv_std until a forward (as the CPU's), for a backward before any forward.
    check(cudaMemsetAsync(floats_.data(), 0, static_cast<std::size_t>(6 * c) * sizeof(float),
                          ops_.stream()),
          "cudaMemsetAsync (BatchNormalization state)");
  }

  void forward_training(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                        Tensor& moving_mean, Tensor& moving_variance, Tensor& y,
                        const backend::SumAcrossReplicas& sync, const Tensor* kept) override {
    if (sync)
      throw ConfigError("model", "synchronized BatchNormalization is not available on CUDA "
                                 "replicas yet; train it on \"cpu\" or set synchronized=false");
    batch_stats_ = true;
    masked_ = kept != nullptr;
    const std::int64_t rows = x.size() / d_.channels;
    rows_ = rows;
    if (rows == 0) return;  // an empty shard: no statistics
    partial_.resize(ops_.allocator(), 2 * batch_norm_scratch_doubles(rows, d_.channels));
    batch_norm_training_statistics(x.data(), data(kept), rows, d_.channels, data(gamma), data(beta),
                                   moving_mean.data(), moving_variance.data(), d_.momentum,
                                   d_.epsilon, state_, reinterpret_cast<double*>(partial_.data()),
                                   ops_.stream());
    batch_norm_apply(x.data(), y.data(), rows, d_.channels, d_.output_relu, state_, ops_.stream());
  }

  void forward_inference(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                         const Tensor& moving_mean, const Tensor& moving_variance,
                         Tensor& y) override {
    batch_stats_ = false;
    batch_norm_inference_statistics(d_.channels, data(gamma), data(beta), moving_mean.data(),
                                    moving_variance.data(), d_.epsilon, state_, ops_.stream());
    batch_norm_apply(x.data(), y.data(), x.size() / d_.channels, d_.channels, d_.output_relu,
                     state_, ops_.stream());
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* /*gamma*/,
                Tensor* d_gamma, Tensor* d_beta, Tensor* dx, const backend::SumAcrossReplicas& sync,
                const Tensor* kept) override {
    if (sync)
      throw ConfigError("model", "synchronized BatchNormalization is not available on CUDA "
                                 "replicas yet");
    const std::int64_t rows = x.size() / d_.channels;
    float* gamma_grad = d_gamma ? d_gamma->data() : nullptr;
    float* beta_grad = d_beta ? d_beta->data() : nullptr;
    const float* relu_output = d_.output_relu ? y.data() : nullptr;  // the mask's
    // The sums feed gamma's and beta's gradients and, with batch statistics, dx.
    if (gamma_grad || beta_grad || (dx && batch_stats_)) {
      partial_.resize(ops_.allocator(), 2 * batch_norm_scratch_doubles(rows, d_.channels));
      batch_norm_gradient_sums(x.data(), relu_output, dy.data(), rows, d_.channels, batch_stats_,
                               batch_stats_ && masked_, gamma_grad, beta_grad, state_,
                               reinterpret_cast<double*>(partial_.data()), ops_.stream());
    }
    if (dx)
      batch_norm_input_gradient(x.data(), relu_output, dy.data(), data(kept), dx->data(), rows,
                                d_.channels, batch_stats_, state_, ops_.stream());
  }

  std::int64_t counted_rows() override {
    if (!masked_ || rows_ == 0) return rows_;
    unsigned long long kept = 0;
    check(cudaMemcpyAsync(&kept, state_.kept, sizeof kept, cudaMemcpyDeviceToHost, ops_.stream()),
          "cudaMemcpyAsync (BatchNormalization kept rows)");
    check(cudaStreamSynchronize(ops_.stream()), "cudaStreamSynchronize (BatchNormalization)");
    return static_cast<std::int64_t>(kept);
  }

 private:
  static const float* data(const Tensor* t) { return t ? t->data() : nullptr; }

  backend::BatchNormDesc d_;
  CudaBackend& ops_;
  bool batch_stats_ = false;
  bool masked_ = false;  // the last training forward's statistics read a mask's kept rows
  std::int64_t rows_ = 0;  // that forward's rows
  BatchNormState state_;
  DeviceBuffer doubles_, floats_, partial_;
};

}  // namespace

std::unique_ptr<backend::BatchNorm> CudaBackend::batch_norm(const backend::BatchNormDesc& desc) {
  return std::make_unique<CudaBatchNorm>(desc, *this);
}

}  // namespace tandem::cuda
