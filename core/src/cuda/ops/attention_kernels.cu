// Private (CUDA module): attention's kernels — the masked softmax (one thread per row,
// kernel_math's masked_softmax_row, as the CPU backend) and the axis swap between (batch, time,
// heads, dim) and (batch, heads, time, dim) (one thread per element).
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void masked_softmax_kernel(const float* scores, const float* mask, float* probs,
                                      std::int64_t rows, std::int64_t heads, std::int64_t tq,
                                      std::int64_t tk, bool causal, bool keras2_hidden_rows) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const std::int64_t i = r % tq, b = r / (heads * tq);
    backend::math::masked_softmax_row(scores + r * tk, probs + r * tk, tk,
                                      mask ? mask + (b * tq + i) * tk : nullptr,
                                      causal ? i : tk - 1, keras2_hidden_rows);
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

void masked_softmax(const float* scores, const float* mask, float* probs, std::int64_t rows,
                    std::int64_t heads, std::int64_t tq, std::int64_t tk, bool causal,
                    bool keras2_hidden_rows, cudaStream_t stream) {
  if (rows <= 0) return;
  masked_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      scores, mask, probs, rows, heads, tq, tk, causal, keras2_hidden_rows);
  check_launch("masked_softmax");
}

void swap_middle_axes(const float* x, float* y, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                      std::int64_t d3, cudaStream_t stream) {
  const std::int64_t n = d0 * d1 * d2 * d3;
  if (n <= 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, d0, d1, d2, d3);
  check_launch("swap_middle_axes");
}

}  // namespace tandem::cuda
