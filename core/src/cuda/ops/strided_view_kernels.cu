// Private (CUDA module): the indexing layer's strided views (backend/strided_view_math.hpp), one
// thread per value of the view: a gather out of the source and its scatter back (the gradient;
// a view never picks a position twice, so no two threads write one value).
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/strided_view_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void gather_view_kernel(backend::StridedView v, const float* src, float* dst) {
  const std::int64_t n = backend::math::view_size(v);
  for (std::int64_t k = grid_first(); k < n; k += grid_step())
    dst[k] = src[backend::math::view_source(v, k)];
}

__global__ void scatter_view_kernel(backend::StridedView v, const float* src, float* dst) {
  const std::int64_t n = backend::math::view_size(v);
  for (std::int64_t k = grid_first(); k < n; k += grid_step())
    dst[backend::math::view_source(v, k)] = src[k];
}

}  // namespace

void gather_view(const backend::StridedView& view, const float* src, float* dst,
                 cudaStream_t stream) {
  const std::int64_t n = backend::math::view_size(view);
  if (n <= 0) return;
  gather_view_kernel<<<blocks_for(n), kThreads, 0, stream>>>(view, src, dst);
  check_launch("gather_view");
}

void scatter_view(const backend::StridedView& view, const float* src, float* dst,
                  cudaStream_t stream) {
  const std::int64_t n = backend::math::view_size(view);
  if (n <= 0) return;
  scatter_view_kernel<<<blocks_for(n), kThreads, 0, stream>>>(view, src, dst);
  check_launch("scatter_view");
}

}  // namespace tandem::cuda
