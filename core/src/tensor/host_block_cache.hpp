// HostBlockCache: large host blocks that tensors gave back, kept for the next tensor of the same
// size instead of going back to the kernel.
//
// A training loop allocates the same large buffers step after step (the loader's batches, a
// layer's outputs when the last batch is smaller). glibc returns blocks of 32 MiB and more to the
// kernel as they are freed, so each new one is first touched page by page, and on a VM with
// shadow page tables a first touch is costly: 11 µs a 4 KiB page on this project's VMs, 180 ms
// for one 64 MiB batch of seed-mlp against 3 ms to clear memory already touched
// (docs/benchmarks.md, "Host memory"). Tensor's allocator (tensor.cpp) takes blocks from here
// first and offers freed ones back; the pool of GPU plans' pinned batch memory
// (parallel/pinned_memory.hpp) keeps its blocks in one too.
//
// Thread-safe: tensors are freed from whichever thread drops the last reference. Under
// AddressSanitizer a kept block is poisoned until it is taken again, so a use after free is
// still reported.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <list>
#include <mutex>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// What a HostBlockCache keeps: blocks of at least `min_block_bytes`, `capacity_bytes` of them
/// at most together, and at most `max_blocks_per_size` of any one size.
struct HostBlockLimits {
  std::int64_t capacity_bytes = 0;
  std::int64_t min_block_bytes = 0;
  std::int64_t max_blocks_per_size = INT64_MAX;
};

class HostBlockCache {
 public:
  /// How a block is given back for good (std::free by default; the CUDA module's pinned free).
  using Free = void (*)(void* block);
  explicit HostBlockCache(HostBlockLimits limits, Free free = &std::free);
  /// Frees every block it holds.
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  /// A kept block of exactly `bytes` (the one kept last, whose pages are likeliest still in a
  /// cache), now the caller's, contents unspecified; nullptr when there is none.
  void* take(std::int64_t bytes);
  /// Offers `block` (`bytes` long, to be given back with the cache's Free) for reuse. True: the
  /// cache owns it now, evicting (freeing) its oldest blocks to stay within its capacity. False:
  /// not kept (smaller than the minimum, larger than the capacity, or as many of its size kept
  /// already) and still the caller's to free.
  bool keep(void* block, std::int64_t bytes);
  /// keep(), and when that refuses `block`, gives it back for good with the cache's Free: what a
  /// block's owner calls when it is done with it.
  void give_back(void* block, std::int64_t bytes);
  /// Frees every block it holds: when an allocation failed, before it is tried again.
  void release();
  /// Bytes of the blocks it holds, and how many they are.
  std::int64_t held_bytes() const;
  std::int64_t held_blocks() const;

 private:
  struct Block {
    void* data;
    std::int64_t bytes;
  };
  void free_oldest();  // requires mutex_

  const HostBlockLimits limits_;
  const Free free_;
  mutable std::mutex mutex_;
  std::list<Block> blocks_;  // oldest first; guarded by mutex_
  std::int64_t held_ = 0;    // guarded by mutex_
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
