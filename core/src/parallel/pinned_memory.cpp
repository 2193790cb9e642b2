#include "parallel/pinned_memory.hpp"

#include <cstdlib>
#include <new>

#include "parallel/cuda_module.hpp"

namespace tandem::detail {

HostBlockPool::~HostBlockPool() {
  for (auto& [bytes, block] : cache_) free_(block);
}

std::shared_ptr<float[]> HostBlockPool::take(std::int64_t count) {
  const std::size_t bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(float);
  void* block = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(bytes); it != cache_.end()) {
      block = it->second;
      cache_.erase(it);
    }
  }
  if (!block) {
    block = allocate_(bytes);
    if (!block) return nullptr;
    std::lock_guard lock(mutex_);
    ++allocations_;
  }
  // The deleter keeps the pool alive and returns the block to it.
  auto self = shared_from_this();
  return std::shared_ptr<float[]>(static_cast<float*>(block),
                                  [self, bytes](float* p) { self->give_back(bytes, p); });
}

void HostBlockPool::give_back(std::size_t bytes, void* block) {
  {
    std::lock_guard lock(mutex_);
    if (cache_.count(bytes) < max_cached_) {
      cache_.emplace(bytes, block);
      return;
    }
  }
  free_(block);
}

std::int64_t HostBlockPool::allocations() const {
  std::lock_guard lock(mutex_);
  return allocations_;
}

std::size_t HostBlockPool::cached() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

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
