// Private (CUDA module): the kernels of MaxPooling2D and AveragePooling2D on the device, NHWC, one
// thread per output element forward and one per input element backward (gradients gathered from
// the windows holding the cell, in a fixed order: no atomics). The window math, oneDNN's
// max-pooling tie-breaking and the average over the cells inside the input are window_math.hpp's.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void max_pool_forward_kernel(const float* x, float* y, std::int32_t* argmax,
                                        std::int64_t n, backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    y[e] = backend::window::max_pool_element(g, x, e, argmax + e);
}

__global__ void max_pool_backward_kernel(const float* dy, const std::int32_t* argmax, float* dx,
                                         std::int64_t n, backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    dx[e] = backend::window::max_pool_grad_element(g, dy, argmax, e);
}

__global__ void avg_pool_forward_kernel(const float* x, float* y, std::int64_t n,
                                        backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    y[e] = backend::window::avg_pool_element(g, x, e);
}

__global__ void avg_pool_backward_kernel(const float* dy, float* dx, std::int64_t n,
                                         backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    dx[e] = backend::window::avg_pool_grad_element(g, dy, e);
}

std::int64_t outputs(std::int64_t samples, const backend::window::Geometry& g) {
  return samples * backend::window::output_cells(g) * g.channels;
}

std::int64_t inputs(std::int64_t samples, const backend::window::Geometry& g) {
  return samples * backend::window::input_cells(g) * g.channels;
}

}  // namespace

void max_pool_forward(const float* x, float* y, std::int32_t* argmax, std::int64_t samples,
                      const backend::window::Geometry& g, cudaStream_t stream) {
  const std::int64_t n = outputs(samples, g);
  if (n == 0) return;
  max_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, argmax, n, g);
  check_launch("max_pool_forward");
}

void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, std::int64_t samples,
                       const backend::window::Geometry& g, cudaStream_t stream) {
  const std::int64_t n = inputs(samples, g);
  if (n == 0) return;
  max_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, argmax, dx, n, g);
  check_launch("max_pool_backward");
}

void avg_pool_forward(const float* x, float* y, std::int64_t samples,
                      const backend::window::Geometry& g, cudaStream_t stream) {
  const std::int64_t n = outputs(samples, g);
  if (n == 0) return;
  avg_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, g);
  check_launch("avg_pool_forward");
}

void avg_pool_backward(const float* dy, float* dx, std::int64_t samples,
                       const backend::window::Geometry& g, cudaStream_t stream) {
  const std::int64_t n = inputs(samples, g);
  if (n == 0) return;
  avg_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, dx, n, g);
  check_launch("avg_pool_backward");
}

}  // namespace tandem::cuda
