// Private (CUDA module): Discretization's, IntegerLookup's and CategoryEncoding's kernels: a bin
// or a table row per value (kernel_math.hpp's bin_of and looked_up, the host's binary searches)
// and the encoding of valid int32 indices,
// one thread per output cell counting its matches in index order (no atomics: the same bits as
// the host). Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void discretize_kernel(const float* x, const float* boundaries, std::int64_t nb,
                                  float* y, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    y[i] = static_cast<float>(backend::math::bin_of(x[i], boundaries, nb));
}

__global__ void lookup_kernel(backend::math::LookupDesc desc, const float* x, const float* keys,
                              const float* values, std::int64_t nk, float* y, std::int64_t n,
                              unsigned long long* first_missing) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    bool found = false;
    y[i] = backend::math::looked_up(x[i], keys, values, nk, desc, &found);
    if (!found && first_missing) atomicMin(first_missing, static_cast<unsigned long long>(i));
  }
}

__global__ void encode_kernel(const std::int32_t* indices, float* y, std::int64_t outer,
                              std::int64_t n, std::int64_t inner, std::int64_t depth, bool count) {
  const std::int64_t cells = outer * inner * depth;
  for (std::int64_t e = grid_first(); e < cells; e += grid_step()) {
    const std::int64_t d = e % depth, j = (e / depth) % inner, o = e / (depth * inner);
    float v = 0.0f;
    for (std::int64_t k = 0; k < n; ++k)
      if (indices[(o * n + k) * inner + j] == d) v = count ? v + 1.0f : 1.0f;
    y[e] = v;
  }
}

}  // namespace

void discretize(const float* x, const float* boundaries, std::int64_t nb, float* y, std::int64_t n,
                cudaStream_t stream) {
  if (n == 0) return;
  discretize_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, boundaries, nb, y, n);
  check_launch("discretize");
}

void lookup(const backend::math::LookupDesc& desc, const float* x, const float* keys,
            const float* values, std::int64_t nk, float* y, std::int64_t n,
            unsigned long long* first_missing, cudaStream_t stream) {
  if (n == 0) return;
  lookup_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, x, keys, values, nk, y, n,
                                                        first_missing);
  check_launch("lookup");
}

void encode_categories(const std::int32_t* indices, float* y, std::int64_t outer, std::int64_t n,
                       std::int64_t inner, std::int64_t depth, bool count, cudaStream_t stream) {
  const std::int64_t cells = outer * inner * depth;
  if (cells == 0) return;
  encode_kernel<<<blocks_for(cells), kThreads, 0, stream>>>(indices, y, outer, n, inner, depth,
                                                            count);
  check_launch("encode_categories");
}

}  // namespace tandem::cuda
