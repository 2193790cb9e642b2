// Private (CUDA module): attention's kernels — the masked softmax and its gradient (one thread
// per row, kernel_math's masked_softmax_row and masked_softmax_row_backward, as the CPU backend)
// and the axis swap between (batch, time, heads, dim) and (batch, heads, time, dim) (one thread per
// element). Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void masked_softmax_kernel(const float* scores, const float* mask, float* probs,
                                      std::int64_t rows, backend::AttentionMaskDesc d) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const backend::math::AttentionRow a = backend::math::attention_row(d, mask, r);
    backend::math::masked_softmax_row(scores + r * d.tk, probs + r * d.tk, d.tk, a.keep, a.last,
                                      d.hidden_rows);
  }
}

__global__ void masked_softmax_backward_kernel(const float* probs, const float* mask,
                                               const float* d_probs, float* d_scores,
                                               std::int64_t rows, backend::AttentionMaskDesc d) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const backend::math::AttentionRow a = backend::math::attention_row(d, mask, r);
    backend::math::masked_softmax_row_backward(probs + r * d.tk, d_probs + r * d.tk,
                                               d_scores + r * d.tk, d.tk, a.keep, a.last,
                                               d.hidden_rows);
  }
}

__global__ void swap_kernel(const float* x, float* y, std::int64_t d0, std::int64_t d1,
                            std::int64_t d2, std::int64_t d3) {
  const std::int64_t n = d0 * d1 * d2 * d3;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    // e indexes y (d0, d2, d1, d3).
    const std::int64_t d = e % d3, b = (e / d3) % d1, c = (e / (d3 * d1)) % d2,
                       a = e / (d3 * d1 * d2);
    y[e] = x[((a * d1 + b) * d2 + c) * d3 + d];
  }
}

}  // namespace

void masked_softmax(const backend::AttentionMaskDesc& desc, const float* scores, const float* mask,
                    float* probs, std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  masked_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(scores, mask, probs, rows, desc);
  check_launch("masked_softmax");
}

void masked_softmax_backward(const backend::AttentionMaskDesc& desc, const float* probs,
                             const float* mask, const float* d_probs, float* d_scores,
                             std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  masked_softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(probs, mask, d_probs,
                                                                            d_scores, rows, desc);
  check_launch("masked_softmax_backward");
}

void swap_middle_axes(const float* x, float* y, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                      std::int64_t d3, cudaStream_t stream) {
  const std::int64_t n = d0 * d1 * d2 * d3;
  if (n <= 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, d0, d1, d2, d3);
  check_launch("swap_middle_axes");
}

}  // namespace tandem::cuda
