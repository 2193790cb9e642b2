// Private (CUDA module): BatchNormalization's kernels (see layer_kernels.hpp): per-channel sums in
// double over blocks of rows split as the host layer splits them, the blocks added in order, and
// every operation rounded on its own (backend::math's fadd, fmul, f2d, ...: nvcc would otherwise
// fuse multiply-adds the host's build does not, and its float operations and conversions would
// keep the subnormals that the CPU flushes), so the statistics and outputs equal the CPU's.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

namespace math = backend::math;

constexpr std::int64_t kBlockValues = 1 << 15;  // nn/batch_normalization.cpp's kBlockValues

std::int64_t blocks_of(std::int64_t rows, std::int64_t width) {
  const std::int64_t block = batch_norm_block_rows(width);
  return (rows + block - 1) / block;
}

// partial[blk * 2C + c] = sum over the block's rows of d = x[r, c] - x[0, c], partial[blk * 2C +
// C + c] = sum of d * d, in row order (the CPU's one-pass statistics); with `kept`, over the rows
// it keeps.
__global__ void bn_partial_kernel(const float* x, const float* kept, double* partial,
                                  std::int64_t rows, std::int64_t channels, std::int64_t block,
                                  std::int64_t blocks) {
  const std::int64_t n = blocks * channels;
  for (std::int64_t t = grid_first(); t < n; t += grid_step()) {
    const std::int64_t c = t % channels, blk = t / channels;
    const std::int64_t r1 = (blk + 1) * block < rows ? (blk + 1) * block : rows;
    const double first = math::f2d(x[c]);
    double sum = 0.0, squares = 0.0;
    for (std::int64_t r = blk * block; r < r1; ++r) {
      if (kept && kept[r] == 0.0f) continue;
      const double d = math::dsub(math::f2d(x[r * channels + c]), first);
      sum = math::dadd(sum, d);
      squares = math::dadd(squares, math::dmul(d, d));
    }
    partial[blk * 2 * channels + c] = sum;
    partial[blk * 2 * channels + channels + c] = squares;
  }
}

// *count += the rows `kept` keeps (its non-zero values): integers, so any order gives the same.
__global__ void bn_kept_count_kernel(const float* kept, std::int64_t rows,
                                     unsigned long long* count) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step())
    if (kept[r] != 0.0f) atomicAdd(count, 1ULL);
}

// The rows the statistics read: `rows`, or with a mask the count it kept.
__device__ double bn_count(double rows, const unsigned long long* kept) {
  return kept ? static_cast<double>(*kept) : rows;
}

// The gradient that reaches the normalization: dy, or with the absorbed relu (y non-null) dy
// masked by y > 0 (activation_backward's relu arithmetic).
__device__ float bn_incoming(const float* dy, const float* y, std::int64_t i) {
  if (!y) return dy[i];
  return math::activation_grad(backend::ActivationKind::relu, y[i], y[i], dy[i]);
}

// The sum of a channel's partials in block order.
__device__ double bn_total(const double* partial, std::int64_t blocks, std::int64_t width,
                           std::int64_t j) {
  double s = 0.0;
  for (std::int64_t blk = 0; blk < blocks; ++blk) s = math::dadd(s, partial[blk * width + j]);
  return s;
}

// a and b of y = (x - shift) * a + b.
__device__ void bn_affine(const BatchNormState& s, const float* gamma, const float* beta,
                          std::int64_t c) {
  s.a[c] = gamma ? math::fmul(gamma[c], s.inv_std[c]) : s.inv_std[c];
  s.b[c] = beta ? beta[c] : 0.0f;
}

// `masked`: the count is the rows the mask kept (state.kept); none kept gives mean 0, variance 0.
__global__ void bn_training_finish_kernel(const float* x, const double* partial,
                                          std::int64_t blocks, std::int64_t channels, double rows,
                                          bool masked, const float* gamma, const float* beta,
                                          float* moving_mean, float* moving_variance,
                                          double momentum, double epsilon, BatchNormState s) {
  const double count = bn_count(rows, masked ? s.kept : nullptr);
  for (std::int64_t c = grid_first(); c < channels; c += grid_step()) {
    double mean = 0.0, var = 0.0;
    if (count > 0.0) {
      const double m = math::ddiv(bn_total(partial, blocks, 2 * channels, c), count);
      mean = math::dadd(math::f2d(x[c]), m);
      const double squares =
          math::ddiv(bn_total(partial, blocks, 2 * channels, channels + c), count);
      const double deviation = math::dsub(squares, math::dmul(m, m));
      var = deviation < 0.0 ? 0.0 : deviation;  // biased; std::max(v, 0.0)
    }
    s.mean[c] = mean;
    s.shift[c] = math::d2f(mean);
    s.inv_std[c] = math::d2f(math::ddiv(1.0, math::dsqrt(math::dadd(var, epsilon))));
    const double keep = math::dsub(1.0, momentum);
    moving_mean[c] = math::d2f(
        math::dadd(math::dmul(math::f2d(moving_mean[c]), momentum), math::dmul(mean, keep)));
    moving_variance[c] = math::d2f(
        math::dadd(math::dmul(math::f2d(moving_variance[c]), momentum), math::dmul(var, keep)));
    bn_affine(s, gamma, beta, c);
  }
}

__global__ void bn_inference_kernel(std::int64_t channels, const float* gamma, const float* beta,
                                    const float* moving_mean, const float* moving_variance,
                                    double epsilon, BatchNormState s) {
  for (std::int64_t c = grid_first(); c < channels; c += grid_step()) {
    s.shift[c] = moving_mean[c];
    s.inv_std[c] =
        math::d2f(math::ddiv(1.0, math::dsqrt(math::dadd(math::f2d(moving_variance[c]), epsilon))));
    bn_affine(s, gamma, beta, c);
  }
}

__global__ void bn_apply_kernel(const float* x, float* y, std::int64_t n, std::int64_t channels,
                                bool relu, BatchNormState s) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const std::int64_t c = i % channels;
    const float z = math::fadd(math::fmul(math::fsub(x[i], s.shift[c]), s.a[c]), s.b[c]);
    y[i] = relu ? math::activation_value(backend::ActivationKind::relu, z) : z;
  }
}

// partial[blk * 2C + c] = sum of dy, partial[blk * 2C + C + c] = sum of dy * x-hat, row order.
__global__ void bn_grad_partial_kernel(const float* x, const float* y, const float* dy,
                                       double* partial,
                                       std::int64_t rows, std::int64_t channels, std::int64_t block,
                                       std::int64_t blocks, BatchNormState s) {
  const std::int64_t n = blocks * channels;
  for (std::int64_t t = grid_first(); t < n; t += grid_step()) {
    const std::int64_t c = t % channels, blk = t / channels;
    const std::int64_t r1 = (blk + 1) * block < rows ? (blk + 1) * block : rows;
    const float shift = s.shift[c], inv_std = s.inv_std[c];
    double sum_g = 0.0, sum_gx = 0.0;
    for (std::int64_t r = blk * block; r < r1; ++r) {
      const float g = bn_incoming(dy, y, r * channels + c);
      const float xhat = math::fmul(math::fsub(x[r * channels + c], shift), inv_std);
      sum_g = math::dadd(sum_g, math::f2d(g));
      sum_gx = math::dadd(sum_gx, math::dmul(math::f2d(g), math::f2d(xhat)));
    }
    partial[blk * 2 * channels + c] = sum_g;
    partial[blk * 2 * channels + channels + c] = sum_gx;
  }
}

__global__ void bn_grad_finish_kernel(const double* partial, std::int64_t blocks,
                                      std::int64_t channels, double rows, bool batch_stats,
                                      bool masked, float* gamma_grad, float* beta_grad,
                                      BatchNormState s) {
  const double count = bn_count(rows, masked ? s.kept : nullptr);
  for (std::int64_t c = grid_first(); c < channels; c += grid_step()) {
    const double sum_g = bn_total(partial, blocks, 2 * channels, c);
    const double sum_gx = bn_total(partial, blocks, 2 * channels, channels + c);
    s.sums[c] = sum_g;
    s.sums[channels + c] = sum_gx;
    if (gamma_grad) gamma_grad[c] = math::d2f(sum_gx);
    if (beta_grad) beta_grad[c] = math::d2f(sum_g);
    const bool means = batch_stats && count > 0;
    s.k1[c] = means ? math::d2f(math::ddiv(sum_g, count)) : 0.0f;
    s.k2[c] = means ? math::d2f(math::ddiv(sum_gx, count)) : 0.0f;
  }
}

__global__ void bn_input_grad_kernel(const float* x, const float* y, const float* dy,
                                     const float* kept, float* dx, std::int64_t n,
                                     std::int64_t channels, bool batch_stats, BatchNormState s) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const std::int64_t c = i % channels;
    const float g = bn_incoming(dy, y, i);
    if (batch_stats && !(kept && kept[i / channels] == 0.0f)) {
      const float xhat_k2 =
          math::fmul(math::fmul(math::fsub(x[i], s.shift[c]), s.inv_std[c]), s.k2[c]);
      dx[i] = math::fmul(s.a[c], math::fsub(math::fsub(g, s.k1[c]), xhat_k2));
    } else {
      dx[i] = math::fmul(s.a[c], g);
    }
  }
}

}  // namespace

std::int64_t batch_norm_block_rows(std::int64_t width) {
  const std::int64_t w = width > 1 ? width : 1;
  return kBlockValues / w > 1 ? kBlockValues / w : 1;
}

std::int64_t batch_norm_scratch_doubles(std::int64_t rows, std::int64_t channels) {
  // The statistics and the gradient sums both keep two sums per channel per block.
  const std::int64_t most = blocks_of(rows, 2 * channels) * 2 * channels;
  return most > 1 ? most : 1;
}

void batch_norm_training_statistics(const float* x, const float* kept, std::int64_t rows,
                                    std::int64_t channels, const float* gamma, const float* beta,
                                    float* moving_mean, float* moving_variance, double momentum,
                                    double epsilon, const BatchNormState& state, double* partial,
                                    cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const std::int64_t block = batch_norm_block_rows(2 * channels);
  const std::int64_t blocks = blocks_of(rows, 2 * channels);
  if (kept) {
    check(cudaMemsetAsync(state.kept, 0, sizeof(unsigned long long), stream),
          "cudaMemsetAsync (batch_norm kept rows)");
    bn_kept_count_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(kept, rows, state.kept);
    check_launch("batch_norm (kept rows)");
  }
  bn_partial_kernel<<<blocks_for(blocks * channels), kThreads, 0, stream>>>(
      x, kept, partial, rows, channels, block, blocks);
  check_launch("batch_norm (sums)");
  bn_training_finish_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(
      x, partial, blocks, channels, math::i2d(rows), kept != nullptr, gamma, beta, moving_mean,
      moving_variance, momentum, epsilon, state);
  check_launch("batch_norm (statistics)");
}

void batch_norm_inference_statistics(std::int64_t channels, const float* gamma, const float* beta,
                                     const float* moving_mean, const float* moving_variance,
                                     double epsilon, const BatchNormState& state,
                                     cudaStream_t stream) {
  if (channels == 0) return;
  bn_inference_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(
      channels, gamma, beta, moving_mean, moving_variance, epsilon, state);
  check_launch("batch_norm (inference statistics)");
}

void batch_norm_apply(const float* x, float* y, std::int64_t rows, std::int64_t channels,
                      bool relu, const BatchNormState& state, cudaStream_t stream) {
  const std::int64_t n = rows * channels;
  if (n == 0) return;
  bn_apply_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, channels, relu, state);
  check_launch("batch_norm (apply)");
}

void batch_norm_gradient_sums(const float* x, const float* y, const float* dy, std::int64_t rows,
                              std::int64_t channels, bool batch_stats, bool masked,
                              float* gamma_grad, float* beta_grad, const BatchNormState& state,
                              double* partial, cudaStream_t stream) {
  if (channels == 0) return;
  const std::int64_t block = batch_norm_block_rows(2 * channels);
  const std::int64_t blocks = blocks_of(rows, 2 * channels);
  if (blocks > 0) {
    bn_grad_partial_kernel<<<blocks_for(blocks * channels), kThreads, 0, stream>>>(
        x, y, dy, partial, rows, channels, block, blocks, state);
    check_launch("batch_norm (gradient sums)");
  }
  bn_grad_finish_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(
      partial, blocks, channels, math::i2d(rows), batch_stats, masked, gamma_grad, beta_grad,
      state);
  check_launch("batch_norm (gradient finish)");
}

void batch_norm_input_gradient(const float* x, const float* y, const float* dy, const float* kept,
                               float* dx, std::int64_t rows, std::int64_t channels,
                               bool batch_stats, const BatchNormState& state, cudaStream_t stream) {
  const std::int64_t n = rows * channels;
  if (n == 0) return;
  bn_input_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, dy, kept, dx, n, channels,
                                                               batch_stats, state);
  check_launch("batch_norm (input gradient)");
}

}  // namespace tandem::cuda
