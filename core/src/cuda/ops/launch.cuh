// Private (CUDA module): launch helpers shared by the device layers' .cu files (only those include
// it): the block size, a grid size for grid-stride loops over n elements, and the launch check.
// Ownership: none. Thread-safety: pure functions, any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/ops/cuda_check.hpp"

namespace tandem::cuda {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements (at least 1, at most 65535 * 16).
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

/// Throws RunError when the last launch failed.
inline void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

/// The first element of this thread in a grid-stride loop, and the loop's step.
__device__ inline std::int64_t grid_first() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline std::int64_t grid_step() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace tandem::cuda
