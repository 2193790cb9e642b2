#include "parallel/pinned_memory.hpp"

#include <cstdlib>
#include <new>

#include "parallel/cuda_module.hpp"

namespace tandem::detail {

std::shared_ptr<float[]> HostBlockPool::take(std::int64_t count) {
  const std::size_t bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(float);
  void* block = cache_.take(static_cast<std::int64_t>(bytes));
  if (!block) {
    block = allocate_(bytes);
    if (!block) return nullptr;
    ++allocations_;
  }
  // The deleter keeps the pool alive and returns the block to it.
  auto self = shared_from_this();
  return std::shared_ptr<float[]>(static_cast<float*>(block),
                                  [self, bytes](float* p) { self->give_back(bytes, p); });
}

void HostBlockPool::give_back(std::size_t bytes, void* block) {
  cache_.give_back(block, static_cast<std::int64_t>(bytes));
}

std::int64_t HostBlockPool::allocations() const { return allocations_; }

std::size_t HostBlockPool::cached() const { return static_cast<std::size_t>(cache_.held_blocks()); }

std::function<std::shared_ptr<float[]>(std::int64_t)> pinned_batch_storage() {
  const CudaModule& cuda = cuda_module();
  if (!cuda.api || !cuda.api->allocate_pinned || !cuda.api->free_pinned) return {};
  auto pool = std::make_shared<HostBlockPool>(cuda.api->allocate_pinned, cuda.api->free_pinned);
  return [pool](std::int64_t count) {
    if (auto block = pool->take(count)) return block;
    // Pinning failed (e.g. the locked-memory limit): ordinary memory, slower copies.
    const auto bytes = static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(float);
    return std::shared_ptr<float[]>(
        static_cast<float*>(::operator new[](bytes, std::align_val_t{64})),
        [](float* p) { ::operator delete[](p, std::align_val_t{64}); });
  };
}

}  // namespace tandem::detail
