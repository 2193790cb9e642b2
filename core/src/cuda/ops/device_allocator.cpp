#include "cuda/ops/device_allocator.hpp"

#include <utility>

#include "cuda/ops/cuda_check.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

namespace {

constexpr std::size_t kSmallStep = 512;
constexpr std::size_t kLargeStep = std::size_t{2} << 20;
constexpr std::size_t kSmallLimit = std::size_t{1} << 20;

std::size_t round_up(std::size_t n, std::size_t step) {
  return (n + step - 1) / step * step;
}

}  // namespace

std::size_t DeviceAllocator::size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return bytes <= kSmallLimit ? round_up(bytes, kSmallStep) : round_up(bytes, kLargeStep);
}

DeviceAllocator::DeviceAllocator(int device) : device_(device) {}

DeviceAllocator::~DeviceAllocator() {
  cudaSetDevice(device_);
  for (auto& [block, size] : in_use_) cudaFree(block);
  for (auto& [size, block] : cache_) cudaFree(block);
}

void* DeviceAllocator::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  ++stats_.allocations;
  void* block = nullptr;
  if (auto it = cache_.find(size); it != cache_.end()) {
    block = it->second;
    cache_.erase(it);
    stats_.cached_bytes -= size;
  } else {
    check(cudaSetDevice(device_), "cudaSetDevice");
    cudaError_t e = cudaMalloc(&block, size);
    if (e == cudaErrorMemoryAllocation && !cache_.empty()) {
      cudaGetLastError();
      empty_cache();
      e = cudaMalloc(&block, size);
    }
    ++stats_.device_mallocs;
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw_out_of_memory(device_, size, stats_.in_use_bytes + stats_.cached_bytes, context_);
    }
    check(e, "cudaMalloc");
  }
  in_use_.emplace(block, size);
  stats_.in_use_bytes += size;
  if (stats_.in_use_bytes > stats_.peak_in_use_bytes)
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
  return block;
}

void DeviceAllocator::release(void* block) {
  if (!block) return;
  auto it = in_use_.find(block);
  if (it == in_use_.end())
    throw RunError("DeviceAllocator::release: a block this allocator did not hand out");
  const std::size_t size = it->second;
  in_use_.erase(it);
  stats_.in_use_bytes -= size;
  cache_.emplace(size, block);
  stats_.cached_bytes += size;
}

void DeviceAllocator::empty_cache() {
  if (cache_.empty()) return;
  // Blocks may still be read by queued work on the stream: wait for the device first.
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (auto& [size, block] : cache_) cudaFree(block);
  cache_.clear();
  stats_.cached_bytes = 0;
}

DeviceBuffer::DeviceBuffer(DeviceAllocator& allocator, std::int64_t count) {
  resize(allocator, count);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void DeviceBuffer::resize(DeviceAllocator& allocator, std::int64_t count) {
  if (count > capacity_ || &allocator != allocator_) {
    reset();
    allocator_ = &allocator;
    data_ = static_cast<float*>(
        allocator.allocate(static_cast<std::size_t>(count > 0 ? count : 1) * sizeof(float)));
    capacity_ = count;
  }
  count_ = count;
}

void DeviceBuffer::reset() {
  if (allocator_ && data_) allocator_->release(data_);
  data_ = nullptr;
  count_ = capacity_ = 0;
}

}  // namespace tandem::cuda
