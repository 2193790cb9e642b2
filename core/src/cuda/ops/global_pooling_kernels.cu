// Private (CUDA module): GlobalAveragePooling2D's kernels: one thread per (sample, channel) sums
// the sample's cells in order and scales by 1 / cells, the host layer's float arithmetic
// operation for operation (no fused multiply-add), so both give the same bits. The adaptive
// poolings': one thread per output value forward, per input value backward, each
// adaptive_pool_math.hpp's function of it, as the CPU backend runs them.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/adaptive_pool_math.hpp"
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

__global__ void adaptive_forward_kernel(backend::AdaptivePoolDesc d, const float* x, float* y,
                                        float* arg) {
  const std::int64_t out_cells = backend::math::adaptive_out_cells(d),
                     in_values = backend::math::adaptive_in_cells(d) * d.channels;
  const std::int64_t n = d.batch * out_cells * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % d.channels, cell = e / d.channels % out_cells,
                       b = e / (d.channels * out_cells);
    float at = 0.0f;
    y[e] = backend::math::adaptive_pool_value(d, x + b * in_values, cell, c, &at);
    if (arg) arg[e] = at;
  }
}

__global__ void adaptive_backward_kernel(backend::AdaptivePoolDesc d, const float* dy,
                                         const float* arg, float* dx) {
  const std::int64_t in_cells = backend::math::adaptive_in_cells(d),
                     out_values = backend::math::adaptive_out_cells(d) * d.channels;
  const std::int64_t n = d.batch * in_cells * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % d.channels, cell = e / d.channels % in_cells,
                       b = e / (d.channels * in_cells);
    dx[e] = backend::math::adaptive_pool_input_gradient(
        d, dy + b * out_values, arg ? arg + b * out_values : nullptr, cell, c);
  }
}

}  // namespace

void adaptive_pool_forward(const backend::AdaptivePoolDesc& desc, const float* x, float* y,
                           float* arg, cudaStream_t stream) {
  const std::int64_t n = desc.batch * backend::math::adaptive_out_cells(desc) * desc.channels;
  if (n == 0) return;
  adaptive_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, x, y, arg);
  check_launch("adaptive_pool_forward");
}

void adaptive_pool_backward(const backend::AdaptivePoolDesc& desc, const float* dy,
                            const float* arg, float* dx, cudaStream_t stream) {
  const std::int64_t n = desc.batch * backend::math::adaptive_in_cells(desc) * desc.channels;
  if (n == 0) return;
  adaptive_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, dy, arg, dx);
  check_launch("adaptive_pool_backward");
}

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
