// Private: pinned (page-locked) host memory for the batches of GPU plans, from the CUDA module,
// recycled through a pool.
//
// A GPU copies from pinned memory by DMA at full speed and truly asynchronously; from ordinary
// memory the driver first copies through a staging buffer of its own. Pinning is slow (a system
// call, milliseconds for large blocks), so released blocks are kept by size (a HostBlockCache)
// and handed out again: a training loop that reads batches of one size pins a handful of blocks
// once.
//
// Ownership: the pool is shared by the allocator function and every block it handed out, so it
// lives until the last batch tensor is gone. Thread-safety: allocate and release from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/host_block_cache.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

class HostBlockPool : public std::enable_shared_from_this<HostBlockPool> {
 public:
  using Allocate = void* (*)(std::size_t bytes);  // null on failure
  using Free = HostBlockCache::Free;
  /// Keeps at most `max_cached_per_size` released blocks of one size, 4 GiB of them at most.
  HostBlockPool(Allocate allocate, Free free, std::int64_t max_cached_per_size = 8)
      : allocate_(allocate),
        cache_({.capacity_bytes = std::int64_t{4} << 30, .max_blocks_per_size = max_cached_per_size},
               free) {}
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

  /// `count` floats (contents unspecified); a cached block of the same size when there is one.
  /// Null when the underlying allocation fails (the caller falls back to ordinary memory).
  std::shared_ptr<float[]> take(std::int64_t count);
  /// Blocks allocated from the underlying allocator so far, and those waiting in the pool.
  std::int64_t allocations() const;
  std::size_t cached() const;

 private:
  void give_back(std::size_t bytes, void* block);

  Allocate allocate_;
  HostBlockCache cache_;  // released blocks; frees them with the pool's Free
  std::atomic<std::int64_t> allocations_{0};
};

/// Storage for DataLoaderOptions::allocate: pinned host memory through the CUDA module, falling
/// back to ordinary memory when pinning fails. Empty when the CUDA module is not loaded.
std::function<std::shared_ptr<float[]>(std::int64_t)> pinned_batch_storage();

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
