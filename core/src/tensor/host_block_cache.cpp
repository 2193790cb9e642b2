#include "tensor/host_block_cache.hpp"

#include <algorithm>

#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_ASAN 1
#endif
#endif
#ifdef TANDEM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tandem {

namespace {

void poison(void* block, std::int64_t bytes) {
#ifdef TANDEM_ASAN
  ASAN_POISON_MEMORY_REGION(block, static_cast<std::size_t>(bytes));
#else
  (void)block, (void)bytes;
#endif
}

void unpoison(void* block, std::int64_t bytes) {
#ifdef TANDEM_ASAN
  ASAN_UNPOISON_MEMORY_REGION(block, static_cast<std::size_t>(bytes));
#else
  (void)block, (void)bytes;
#endif
}

}  // namespace

HostBlockCache::HostBlockCache(HostBlockLimits limits, Free free) : limits_(limits), free_(free) {}

HostBlockCache::~HostBlockCache() {
  release();
}

void* HostBlockCache::take(std::int64_t bytes) {
  const std::lock_guard lock(mutex_);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (it->bytes != bytes) continue;
    void* data = it->data;
    held_ -= bytes;
    blocks_.erase(std::next(it).base());
    unpoison(data, bytes);
    return data;
  }
  return nullptr;
}

bool HostBlockCache::keep(void* block, std::int64_t bytes) {
  if (bytes < limits_.min_block_bytes || bytes > limits_.capacity_bytes) return false;
  const std::lock_guard lock(mutex_);
  const auto same_size = std::count_if(blocks_.begin(), blocks_.end(),
                                       [bytes](const Block& b) { return b.bytes == bytes; });
  if (same_size >= limits_.max_blocks_per_size) return false;
  poison(block, bytes);
  while (held_ + bytes > limits_.capacity_bytes) free_oldest();
  blocks_.push_back({block, bytes});
  held_ += bytes;
  return true;
}

void HostBlockCache::give_back(void* block, std::int64_t bytes) {
  if (!keep(block, bytes)) free_(block);
}

void HostBlockCache::release() {
  const std::lock_guard lock(mutex_);
  while (!blocks_.empty()) free_oldest();
}

std::int64_t HostBlockCache::held_bytes() const {
  const std::lock_guard lock(mutex_);
  return held_;
}

std::int64_t HostBlockCache::held_blocks() const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(blocks_.size());
}

void HostBlockCache::free_oldest() {
  const Block oldest = blocks_.front();
  blocks_.pop_front();
  held_ -= oldest.bytes;
  unpoison(oldest.data, oldest.bytes);
  free_(oldest.data);
}

}  // namespace tandem
