// Private (CUDA module): GlobalAveragePooling2D's kernels: one thread per (sample, channel) sums
// the sample's cells in order and scales by 1 / cells, the host layer's float arithmetic
// operation for operation (no fused multiply-add), so both give the same bits.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void gap_forward_kernel(const float* x, float* y, std::int64_t batch, std::int64_t cells,
                                   std::int64_t channels, float scale) {
  const std::int64_t n = batch * channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % channels, b = e / channels;
    const float* xb = x + b * cells * channels + c;
    float s = 0.0f;
    for (std::int64_t i = 0; i < cells; ++i) s = backend::math::fadd(s, xb[i * channels]);
    y[e] = backend::math::fmul(s, scale);
  }
}

__global__ void gap_backward_kernel(const float* dy, float* dx, std::int64_t batch,
                                    std::int64_t cells, std::int64_t channels, float scale) {
  const std::int64_t n = batch * cells * channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % channels, b = e / (cells * channels);
    dx[e] = backend::math::fmul(dy[b * channels + c], scale);
  }
}

}  // namespace

void global_average_pool_forward(const float* x, float* y, std::int64_t batch, std::int64_t cells,
                                 std::int64_t channels, cudaStream_t stream) {
  if (batch * channels == 0) return;
  const float scale = 1.0f / static_cast<float>(cells);
  gap_forward_kernel<<<blocks_for(batch * channels), kThreads, 0, stream>>>(x, y, batch, cells,
                                                                            channels, scale);
  check_launch("global_average_pool_forward");
}

void global_average_pool_backward(const float* dy, float* dx, std::int64_t batch,
                                  std::int64_t cells, std::int64_t channels, cudaStream_t stream) {
  if (batch * cells * channels == 0) return;
  const float scale = 1.0f / static_cast<float>(cells);
  gap_backward_kernel<<<blocks_for(batch * cells * channels), kThreads, 0, stream>>>(
      dy, dx, batch, cells, channels, scale);
  check_launch("global_average_pool_backward");
}

}  // namespace tandem::cuda
