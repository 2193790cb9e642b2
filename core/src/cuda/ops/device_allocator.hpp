// Private (CUDA module): a caching allocator of device memory for one device and one stream.
//
// Blocks are rounded up to a size class (512 B steps below 1 MiB, 2 MiB steps above) and kept
// when released, so a training step that asks for the same sizes every time calls cudaMalloc
// only in its first step (stats().device_mallocs stops growing). Every use of a block is on
// the allocator's stream, so a released block can be handed out again at once: the stream orders
// the old use before the new one. When cudaMalloc fails, the cache is returned to the driver and
// the allocation tried once more before out-of-memory is reported (cuda_check.hpp).
//
// Ownership: owns every block it handed out or cached; they are freed with it (the caller's
// DeviceBuffers must be gone first). Thread-safety: one thread at a time (one replica).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::cuda {

class DeviceAllocator {
 public:
  struct Stats {
    std::size_t in_use_bytes = 0;       // handed out, not yet released
    std::size_t cached_bytes = 0;       // released, kept for reuse
    std::size_t peak_in_use_bytes = 0;  // the most in use at once
    std::int64_t device_mallocs = 0;    // cudaMalloc calls so far
    std::int64_t allocations = 0;       // allocate() calls so far (a buffer moved when it grows)
  };

  explicit DeviceAllocator(int device);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  int device() const { return device_; }
  /// At least `bytes` (256-byte aligned); never null (throws RunError on out-of-memory).
  void* allocate(std::size_t bytes);
  /// Returns a block from allocate() to the cache; null is ignored.
  void release(void* block);
  /// Frees every cached block.
  void empty_cache();
  const Stats& stats() const { return stats_; }
  /// Who is allocating, for the out-of-memory message ("a batch of 8192 samples per replica").
  void set_context(std::string context) { context_ = std::move(context); }

  /// The size class a request is rounded up to.
  static std::size_t size_class(std::size_t bytes);

 private:
  int device_;
  std::multimap<std::size_t, void*> cache_;        // size class -> free blocks
  std::unordered_map<void*, std::size_t> in_use_;  // block -> size class
  Stats stats_;
  std::string context_;
};

/// A float array in device memory from a DeviceAllocator, released when it goes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceAllocator& allocator, std::int64_t count);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::int64_t size() const { return count_; }
  /// Grows (reallocating, contents lost) when `count` exceeds the capacity; else keeps it.
  void resize(DeviceAllocator& allocator, std::int64_t count);
  void reset();

 private:
  DeviceAllocator* allocator_ = nullptr;
  float* data_ = nullptr;
  std::int64_t count_ = 0;
  std::int64_t capacity_ = 0;
};

}  // namespace tandem::cuda
