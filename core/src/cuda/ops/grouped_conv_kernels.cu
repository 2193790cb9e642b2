// Private (CUDA module): the grouped convolution's kernels (layer_kernels.hpp), the index math
// window_math.hpp's grouped_conv_*. Ownership: none. Thread-safety: launchers queue on the given
// stream, any thread.
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

using backend::window::Geometry;

__global__ void forward_kernel(const float* x, const float* k, const float* bias, float* y,
                               std::int64_t n, Geometry g, std::int64_t filters,
                               std::int64_t groups) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const float v = backend::window::grouped_conv_output(g, filters, groups, x, k, e);
    y[e] = bias ? __fadd_rn(v, bias[e % filters]) : v;
  }
}

__global__ void data_kernel(const float* dy, const float* k, float* dx, std::int64_t n, Geometry g,
                            std::int64_t filters, std::int64_t groups) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    dx[e] = backend::window::grouped_conv_input_grad(g, filters, groups, dy, k, e);
}

// Block b sums value b over `rows` rows: the kernel gradient's terms (values < kernel_size), then
// the bias' column sums of dy (the rest). Thread t takes rows t, t + blockDim, ...; the partial
// sums meet in a fixed tree.
__global__ void weights_kernel(const float* x, const float* dy, float* dk, float* db,
                               std::int64_t kernel_size, std::int64_t rows, Geometry g,
                               std::int64_t filters, std::int64_t groups) {
  __shared__ float partial[kThreads];
  const std::int64_t w = blockIdx.x;
  const bool bias = w >= kernel_size;
  float s = 0.0f;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    s = __fadd_rn(s, bias ? dy[r * filters + (w - kernel_size)]
                          : backend::window::grouped_conv_kernel_term(g, filters, groups, x, dy,
                                                                      w, r));
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] = __fadd_rn(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) (bias ? db[w - kernel_size] : dk[w]) = partial[0];
}

}  // namespace

void grouped_conv_forward(const float* x, const float* kernel, const float* bias, float* y,
                          std::int64_t samples, const Geometry& g, std::int64_t filters,
                          std::int64_t groups, cudaStream_t stream) {
  const std::int64_t n = samples * backend::window::output_cells(g) * filters;
  if (n == 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, kernel, bias, y, n, g, filters,
                                                         groups);
  check_launch("grouped convolution forward");
}

void grouped_conv_backward_data(const float* dy, const float* kernel, float* dx,
                                std::int64_t samples, const Geometry& g, std::int64_t filters,
                                std::int64_t groups, cudaStream_t stream) {
  const std::int64_t n = samples * backend::window::input_cells(g) * g.channels;
  if (n == 0) return;
  data_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, kernel, dx, n, g, filters, groups);
  check_launch("grouped convolution backward (data)");
}

void grouped_conv_backward_weights(const float* x, const float* dy, float* d_kernel, float* d_bias,
                                   std::int64_t samples, const Geometry& g, std::int64_t filters,
                                   std::int64_t groups, cudaStream_t stream) {
  const std::int64_t kernel_size =
      backend::window::kernel_taps(g) * (g.channels / groups) * filters;
  const std::int64_t values = kernel_size + (d_bias ? filters : 0);
  const std::int64_t rows = samples * backend::window::output_cells(g);
  if (values == 0) return;
  weights_kernel<<<static_cast<unsigned>(values), kThreads, 0, stream>>>(
      x, dy, d_kernel, d_bias, kernel_size, rows, g, filters, groups);
  check_launch("grouped convolution backward (weights)");
}

}  // namespace tandem::cuda
