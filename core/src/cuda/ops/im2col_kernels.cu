// Private (CUDA module): Conv2D's kernels besides the GEMMs: the implicit im2col that feeds
// cuBLASLt, col2im as a gather (one thread per input element, taps in a fixed order, no atomics)
// and an element-wise accumulate for batch chunks. The index math is window_math.hpp's.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void im2col_kernel(const float* x, float* cols, std::int64_t n,
                              backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    cols[e] = backend::window::im2col_element(g, x, e);
}

__global__ void col2im_kernel(const float* dcols, float* dx, std::int64_t n,
                              backend::window::Geometry g) {
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    dx[e] = backend::window::col2im_element(g, dcols, e);
}

__global__ void add_kernel(float* acc, const float* x, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) acc[i] = __fadd_rn(acc[i], x[i]);
}

}  // namespace

void im2col(const float* x, float* cols, std::int64_t samples, const backend::window::Geometry& g,
            cudaStream_t stream) {
  const std::int64_t n =
      samples * backend::window::output_cells(g) * backend::window::patch_size(g);
  if (n == 0) return;
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, cols, n, g);
  check_launch("im2col");
}

void col2im(const float* dcols, float* dx, std::int64_t samples, const backend::window::Geometry& g,
            cudaStream_t stream) {
  const std::int64_t n = samples * backend::window::input_cells(g) * g.channels;
  if (n == 0) return;
  col2im_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dcols, dx, n, g);
  check_launch("col2im");
}

void add_in_place(float* acc, const float* x, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, x, n);
  check_launch("add_in_place");
}

}  // namespace tandem::cuda
