// Pinned host memory for the batches of GPU plans (parallel/pinned_memory.hpp pools it).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::detail {

void* allocate_pinned(std::size_t bytes) {
  void* block = nullptr;
  if (cudaHostAlloc(&block, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // not the next CUDA call's error
    return nullptr;
  }
  return block;
}

void free_pinned(void* block) {
  if (block) cudaFreeHost(block);
}

}  // namespace tandem::detail
