// Private (CUDA module): Embedding's kernels: index validation (the lowest bad position, an
// integer minimum), the row gather, and the deterministic table gradient (CUB's stable radix sort
// of (index, position), then one thread per (table row, column) summing its row's gradients in
// input order, no floating-point atomics).
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include <cub/device/device_radix_sort.cuh>

#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void reset_flag_kernel(unsigned long long* flag, unsigned long long value) {
  *flag = value;
}

__global__ void indices_kernel(const float* x, std::int32_t* indices, std::int64_t n,
                               std::int64_t vocab, unsigned long long* first_bad) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const float v = x[i];
    // As the host layer: an integer in [0, vocab) (NaN fails every comparison).
    const bool ok = v >= 0.0f && v < static_cast<float>(vocab) && v == floorf(v);
    indices[i] = ok ? static_cast<std::int32_t>(v) : 0;
    if (!ok) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

__global__ void gather_kernel(const float* table, const std::int32_t* indices, float* y,
                              std::int64_t n, std::int64_t dim) {
  for (std::int64_t e = grid_first(); e < n * dim; e += grid_step()) {
    const std::int64_t i = e / dim, c = e % dim;
    y[e] = table[static_cast<std::int64_t>(indices[i]) * dim + c];
  }
}

__global__ void iota_kernel(std::int32_t* positions, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    positions[i] = static_cast<std::int32_t>(i);
}

// starts[v] = the first place in the sorted keys holding v or more (v in [0, vocab]).
__global__ void run_starts_kernel(const std::int32_t* sorted_keys, std::int64_t n,
                                  std::int64_t vocab, std::int32_t* starts) {
  for (std::int64_t v = grid_first(); v <= vocab; v += grid_step()) {
    std::int64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (sorted_keys[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    starts[v] = static_cast<std::int32_t>(lo);
  }
}

__global__ void row_sums_kernel(const float* dy, const std::int32_t* positions,
                                const std::int32_t* starts, float* grad, std::int64_t vocab,
                                std::int64_t dim) {
  for (std::int64_t e = grid_first(); e < vocab * dim; e += grid_step()) {
    const std::int64_t v = e / dim, c = e % dim;
    float s = 0.0f;
    for (std::int32_t p = starts[v]; p < starts[v + 1]; ++p)
      s = backend::math::fadd(s, dy[static_cast<std::int64_t>(positions[p]) * dim + c]);
    grad[e] = s;
  }
}

int key_bits(std::int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (std::int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

}  // namespace

void embedding_indices(const float* x, std::int32_t* indices, std::int64_t n, std::int64_t vocab,
                       unsigned long long* first_bad, cudaStream_t stream) {
  reset_flag_kernel<<<1, 1, 0, stream>>>(first_bad, static_cast<unsigned long long>(n));
  check_launch("embedding (reset)");
  if (n == 0) return;
  indices_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, indices, n, vocab, first_bad);
  check_launch("embedding (indices)");
}

void embedding_gather(const float* table, const std::int32_t* indices, float* y, std::int64_t n,
                      std::int64_t dim, cudaStream_t stream) {
  if (n * dim == 0) return;
  gather_kernel<<<blocks_for(n * dim), kThreads, 0, stream>>>(table, indices, y, n, dim);
  check_launch("embedding (gather)");
}

std::size_t embedding_gradient_scratch_bytes(std::int64_t n, std::int64_t vocab) {
  std::size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(
            nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
            static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
            static_cast<std::int32_t*>(nullptr), static_cast<int>(n), 0, key_bits(vocab)),
        "cub::DeviceRadixSort::SortPairs (scratch size)");
  return bytes;
}

void embedding_gradient(const std::int32_t* indices, const float* dy, float* grad, std::int64_t n,
                        std::int64_t vocab, std::int64_t dim, std::int32_t* work,
                        std::int32_t* starts, void* scratch, std::size_t scratch_bytes,
                        cudaStream_t stream) {
  if (vocab * dim == 0) return;
  std::int32_t* positions = work;
  std::int32_t* sorted_keys = work + n;
  std::int32_t* sorted_positions = work + 2 * n;
  if (n > 0) {
    iota_kernel<<<blocks_for(n), kThreads, 0, stream>>>(positions, n);
    check_launch("embedding (positions)");
    // Stable: equal indices keep their positions in ascending order.
    check(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, indices, sorted_keys, positions,
                                          sorted_positions, static_cast<int>(n), 0, key_bits(vocab),
                                          stream),
          "cub::DeviceRadixSort::SortPairs");
  }
  run_starts_kernel<<<blocks_for(vocab + 1), kThreads, 0, stream>>>(sorted_keys, n, vocab, starts);
  check_launch("embedding (run starts)");
  row_sums_kernel<<<blocks_for(vocab * dim), kThreads, 0, stream>>>(dy, sorted_positions, starts,
                                                                    grad, vocab, dim);
  check_launch("embedding (gradient)");
}

}  // namespace tandem::cuda
