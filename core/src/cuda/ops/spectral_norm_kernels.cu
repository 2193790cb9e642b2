// Private (CUDA module): SpectralNormalization's training update (backend/ops.hpp's
// spectral_normalize) on the device, with no read back to the host (so a captured step graph
// holds it): u Wᵀ a thread per row and v W a thread per column (each sum in double, in order),
// the norms, σ and the all-zero test by one block's fixed tree of partial sums; the kernel
// divided by σ read from device memory. The CPU backend's arithmetic up to the order of the norms'
// sums.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

// out[r] = Σ_c u[c] W[r, c].
__global__ void rows_kernel(const float* w, const double* u, double* out, std::int64_t rows,
                            std::int64_t cols) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    double s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += u[c] * static_cast<double>(w[r * cols + c]);
    out[r] = s;
  }
}

// out[c] = Σ_r v[r] W[r, c].
__global__ void columns_kernel(const float* w, const double* v, double* out, std::int64_t rows,
                               std::int64_t cols) {
  for (std::int64_t c = grid_first(); c < cols; c += grid_step()) {
    double s = 0;
    for (std::int64_t r = 0; r < rows; ++r) s += v[r] * static_cast<double>(w[r * cols + c]);
    out[c] = s;
  }
}

// One block: the sum of a[i] · b[i] (b null: a[i]²) over n values, by a fixed tree.
__device__ double block_dot(const double* a, const double* b, std::int64_t n, double* shared) {
  double s = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += a[i] * (b ? b[i] : a[i]);
  shared[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// x *= min(rsqrt(Σ x²), 1e7), one block (Keras' ops.normalize).
__global__ void normalize_kernel(double* x, std::int64_t n) {
  __shared__ double shared[kThreads];
  const double squares = block_dot(x, nullptr, n, shared);
  const double scale = fmin(1.0 / sqrt(squares), 1e7);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) x[i] *= scale;
}

// sigma[0] = Σ vw · u (as float), sigma[1] = 1 when the kernel holds a value other than 0; one
// block.
__global__ void sigma_kernel(const float* w, std::int64_t size, const double* vw, const double* u,
                             std::int64_t cols, float* sigma) {
  __shared__ double shared[kThreads];
  const double s = block_dot(vw, u, cols, shared);
  double nonzero = 0;
  for (std::int64_t i = threadIdx.x; i < size; i += blockDim.x)
    if (w[i] != 0.0f) nonzero = 1;
  shared[threadIdx.x] = nonzero;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sigma[0] = static_cast<float>(s);
    sigma[1] = static_cast<float>(shared[0]);
  }
}

// Unless the kernel is all zeros: kernel /= σ and u = the new u (as floats).
__global__ void apply_kernel(float* w, std::int64_t size, float* u, const double* new_u,
                             std::int64_t cols, const float* sigma) {
  if (sigma[1] == 0.0f) return;
  for (std::int64_t i = grid_first(); i < size; i += grid_step()) w[i] = w[i] / sigma[0];
  for (std::int64_t c = grid_first(); c < cols; c += grid_step())
    u[c] = static_cast<float>(new_u[c]);
}

__global__ void widen_kernel(const float* u, double* out, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) out[i] = u[i];
}

}  // namespace

std::int64_t spectral_norm_scratch_floats(std::int64_t rows, std::int64_t cols) {
  return 2 * (rows + 2 * cols) + 2;  // doubles v, u, vw; then σ and the non-zero flag
}

void spectral_normalize(std::int64_t rows, std::int64_t cols, int iterations, float* w, float* u,
                        float* scratch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  double* v = reinterpret_cast<double*>(scratch);
  double* uu = v + rows;
  double* vw = uu + cols;
  float* sigma = reinterpret_cast<float*>(vw + cols);
  widen_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(u, uu, cols);
  for (int it = 0; it < iterations; ++it) {
    rows_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(w, uu, v, rows, cols);
    normalize_kernel<<<1, kThreads, 0, stream>>>(v, rows);
    columns_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(w, v, vw, rows, cols);
    check(cudaMemcpyAsync(uu, vw, static_cast<std::size_t>(cols) * sizeof(double),
                          cudaMemcpyDeviceToDevice, stream),
          "spectral_normalize (u)");
    normalize_kernel<<<1, kThreads, 0, stream>>>(uu, cols);
  }
  sigma_kernel<<<1, kThreads, 0, stream>>>(w, rows * cols, vw, uu, cols, sigma);
  apply_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(w, rows * cols, u, uu, cols,
                                                                 sigma);
  check_launch("spectral_normalize");
}

}  // namespace tandem::cuda
