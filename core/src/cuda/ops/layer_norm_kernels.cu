// Private (CUDA module): LayerNormalization's kernels, kernel_math's row functions as the CPU
// backend runs them: one thread per row for the statistics, the output and dx; one thread per
// column for the gamma and beta gradients, adding the rows in kernel_math's blocks (no atomics).
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace math = backend::math;

namespace {

__global__ void forward_kernel(LayerNormForm d, const float* x, const float* gamma,
                               const float* beta, float* y, float* mean, float* inv_std,
                               std::int64_t rows) {
  const std::int64_t cols = d.cols;
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const float* row = x + r * cols;
    math::layer_norm_row_stats(row, cols, d.epsilon, d.centred_variance, mean + r, inv_std + r);
    math::layer_norm_row(row, y + r * cols, cols,
                         math::layer_norm_output_shift(mean[r], d.centred_output), inv_std[r],
                         gamma, beta);
  }
}

__global__ void input_gradient_kernel(const float* x, const float* dy, const float* gamma,
                                      const float* mean, const float* inv_std, float* dx,
                                      std::int64_t rows, std::int64_t cols, bool centred_output) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step())
    math::layer_norm_row_backward(x + r * cols, dy + r * cols, gamma, mean[r], inv_std[r],
                                  centred_output, cols, dx + r * cols);
}

__global__ void parameter_gradient_kernel(const float* x, const float* dy, const float* mean,
                                          const float* inv_std, float* d_gamma, float* d_beta,
                                          std::int64_t rows, std::int64_t cols,
                                          bool centred_output) {
  for (std::int64_t c = grid_first(); c < cols; c += grid_step()) {
    float g = 0.0f, b = 0.0f;
    for (std::int64_t r0 = 0; r0 < rows; r0 += math::kLayerNormRowBlock) {
      const std::int64_t r1 =
          r0 + math::kLayerNormRowBlock < rows ? r0 + math::kLayerNormRowBlock : rows;
      float block_g = 0.0f, block_b = 0.0f;
      for (std::int64_t r = r0; r < r1; ++r) {
        const float gy = dy[r * cols + c];
        const float shift = math::layer_norm_output_shift(mean[r], centred_output);
        block_g = math::fadd(block_g,
                             math::layer_norm_gamma_term(gy, x[r * cols + c], shift, inv_std[r]));
        block_b = math::fadd(block_b, gy);
      }
      g = math::fadd(g, block_g);
      b = math::fadd(b, block_b);
    }
    if (d_gamma) d_gamma[c] = g;
    if (d_beta) d_beta[c] = b;
  }
}

}  // namespace

void layer_norm_forward(LayerNormForm desc, const float* x, const float* gamma, const float* beta,
                        float* y, float* mean, float* inv_std, std::int64_t rows,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  forward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(desc, x, gamma, beta, y, mean, inv_std,
                                                            rows);
  check_launch("layer_norm_forward");
}

void layer_norm_backward(LayerNormForm desc, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* inv_std, float* dx, float* d_gamma,
                         float* d_beta, std::int64_t rows, cudaStream_t stream) {
  const std::int64_t cols = desc.cols;
  if (d_gamma || d_beta) {
    parameter_gradient_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(
        x, dy, mean, inv_std, d_gamma, d_beta, rows, cols, desc.centred_output);
    check_launch("layer_norm_backward (gamma, beta)");
  }
  if (dx && rows > 0) {
    input_gradient_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
        x, dy, gamma, mean, inv_std, dx, rows, cols, desc.centred_output);
    check_launch("layer_norm_backward (dx)");
  }
}

}  // namespace tandem::cuda
