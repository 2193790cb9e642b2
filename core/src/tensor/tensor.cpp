#include "tandem/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>

#include "tandem/error.hpp"
#include "tensor/host_block_cache.hpp"
#include "tensor/huge_page_block.hpp"
#include "tensor/host_tensor_bytes.hpp"
#include "util/memory_size.hpp"

namespace tandem {

namespace {

constexpr std::size_t kAlignment = 64;

// Bytes every live host tensor holds together (what host_memory_limit() bounds).
std::atomic<std::int64_t> g_host_bytes{0};
// This thread's share, in values' bytes: what it allocated less what it freed
// (host_tensor_bytes_on_this_thread).
thread_local std::int64_t t_thread_bytes = 0;

std::string mib_text(std::int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Where freed host blocks of 1 MiB and more wait for the next tensor of their size: up to an
// eighth of the host memory limit, 1 GiB at most. Never destroyed: tensors still alive when the
// process exits (statics, other threads) give their blocks back to it then.
HostBlockCache& block_cache(const HostMemoryLimit& limit) {
  static HostBlockCache* const cache =
      new HostBlockCache({.capacity_bytes = std::min<std::int64_t>(std::int64_t{1} << 30,
                                                                   limit.bytes / 8),
                          .min_block_bytes = std::int64_t{1} << 20});
  return *cache;
}

// `bytes` of 64-byte aligned host memory: a kept block of that size, else a new one, in huge
// pages from 2 MiB (after freeing the kept ones, when the first try fails). nullptr when there
// is none.
void* take_block(HostBlockCache& cache, std::int64_t bytes) {
  if (void* p = cache.take(bytes)) return p;
  const auto size = static_cast<std::size_t>(bytes);
  if (void* p = allocate_huge_page_block(size)) return p;
  cache.release();
  return allocate_huge_page_block(size);
}

// Host memory for `count` floats, zeroed. A tensor beyond what host memory holds — the
// machine's, or TANDEM_HOST_MEMORY_LIMIT, less what live tensors take — is a ShapeError naming
// the sizes (a model config asking for a layer of 10^12 weights is refused, not a crash or a
// run killed by the kernel later).
std::shared_ptr<float[]> allocate(std::int64_t count) {
  if (count == 0) return {};
  static const HostMemoryLimit limit = host_memory_limit();  // retried while it throws
  HostBlockCache& cache = block_cache(limit);
  constexpr std::int64_t kMaxCount = std::numeric_limits<std::int64_t>::max() / 8;
  const std::int64_t bytes =
      count < kMaxCount ? (count * std::int64_t{sizeof(float)} + kAlignment - 1) / kAlignment *
                              kAlignment
                        : std::numeric_limits<std::int64_t>::max();
  const std::int64_t held = g_host_bytes.load(std::memory_order_relaxed);
  void* p = bytes <= limit.bytes - held ? take_block(cache, bytes) : nullptr;
  if (!p)
    throw ShapeError("a tensor of " + std::to_string(count) + " values (" +
                     mib_text(count < kMaxCount ? count * 4 : bytes) +
                     ") does not fit in host memory: tensors hold " + mib_text(held) + " of " +
                     mib_text(limit.bytes) + " (" + limit.source + ")");
  std::memset(p, 0, static_cast<std::size_t>(bytes));
  g_host_bytes.fetch_add(bytes, std::memory_order_relaxed);
  const std::int64_t values_bytes = count * std::int64_t{sizeof(float)};
  t_thread_bytes += values_bytes;
  return std::shared_ptr<float[]>(static_cast<float*>(p), [bytes, values_bytes, &cache](float* q) {
    g_host_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    t_thread_bytes -= values_bytes;
    cache.give_back(q, bytes);
  });
}

}  // namespace

std::int64_t host_tensor_bytes_on_this_thread() { return t_thread_bytes; }

std::int64_t shape_size(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw ShapeError("negative dimension in shape " + shape_to_string(shape));
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape " + shape_to_string(shape) + " has more values than a tensor holds");
  }
  return n;
}

std::string shape_to_string(const Shape& shape, bool batch_dim) {
  std::ostringstream out;
  out << '(';
  bool first = true;
  if (batch_dim) {
    out << "None";
    first = false;
  }
  for (auto d : shape) {
    if (!first) out << ", ";
    out << d;
    first = false;
  }
  if (shape.size() + (batch_dim ? 1 : 0) == 1) out << ',';  // Python's one-element tuple
  out << ')';
  return out.str();
}

std::string Device::name() const {
  return kind == MemoryKind::host ? "host" : "cuda:" + std::to_string(index);
}

Tensor::Tensor() : shape_{0} {}

Tensor::Tensor(Shape shape, std::shared_ptr<DeviceMemory> memory)
    : shape_(std::move(shape)), memory_(std::move(memory)) {
  size_ = shape_size(shape_);
  capacity_ = size_;
  storage_ = memory_ ? (size_ > 0 ? memory_->allocate(size_) : nullptr) : allocate(size_);
}

void Tensor::require_host(const char* operation) const {
  if (memory_)
    throw std::logic_error(std::string("Tensor::") + operation + " on a tensor in " +
                           device().name() + " memory (host tensors only)");
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)) {
  size_ = shape_size(shape_);
  capacity_ = size_;
  storage_ = allocate(size_);
}

Tensor Tensor::from_vector(Shape shape, const std::vector<float>& values) {
  Tensor t(std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.size())
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values do not fill shape " + shape_to_string(t.shape()));
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::adopt(Shape shape, std::shared_ptr<float[]> storage) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = shape_size(t.shape_);
  t.capacity_ = t.size_;
  if (t.size_ > 0 && !storage) throw std::invalid_argument("Tensor::adopt: no storage");
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::view(const Tensor& base, std::int64_t offset, Shape shape) {
  const std::int64_t n = shape_size(shape);
  if (offset < 0 || offset + n > base.size_)
    throw ShapeError("view of " + std::to_string(n) + " elements at offset " +
                     std::to_string(offset) + " exceeds a tensor of " + std::to_string(base.size_));
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = n;
  t.capacity_ = n;
  t.memory_ = base.memory_;
  if (n > 0) t.storage_ = std::shared_ptr<float[]>(base.storage_, base.storage_.get() + offset);
  return t;
}

std::int64_t Tensor::dim(int axis) const {
  if (axis < 0) axis += rank();
  if (axis < 0 || axis >= rank())
    throw ShapeError("axis " + std::to_string(axis) + " out of range for shape " +
                     shape_to_string(shape_));
  return shape_[static_cast<std::size_t>(axis)];
}

void Tensor::resize(const Shape& shape) {
  std::int64_t n = shape_size(shape);
  if (n > capacity_ || !storage_) {
    storage_ = memory_ ? (n > 0 ? memory_->allocate(n) : nullptr) : allocate(n);
    capacity_ = n;
  }
  shape_ = shape;
  size_ = n;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  if (shape_size(shape) != size_)
    throw ShapeError("cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  require_host("clone");
  Tensor t(shape_);
  if (size_ > 0) std::memcpy(t.data(), data(), static_cast<std::size_t>(size_) * sizeof(float));
  return t;
}

void Tensor::fill(float value) {
  require_host("fill");
  std::fill(data(), data() + size_, value);
}

void Tensor::copy_from(const Tensor& other) {
  require_host("copy_from");
  other.require_host("copy_from");
  if (other.size_ != size_)
    throw ShapeError("copy_from: " + shape_to_string(other.shape_) + " into " +
                     shape_to_string(shape_));
  if (size_ > 0) std::memcpy(data(), other.data(), static_cast<std::size_t>(size_) * sizeof(float));
}

}  // namespace tandem
