// Tensor: a dense float32 array with a shape, in host memory or in a device's memory.
//
// A tensor knows its device: host tensors (the default) are plain aligned host memory; a tensor
// made with a DeviceMemory (a backend's, e.g. a GPU's caching allocator) keeps its elements
// there, and its data() is a device pointer that only that backend's operations may touch.
// Element access (values(), operator[]), fill(), clone() and copy_from() are for host tensors;
// the last three throw for device tensors (use the backend's copy and fill).
//
// Ownership: the storage is reference-counted and shared between copies of a Tensor, like a
// shared_ptr; `clone()` makes an independent deep copy. A Tensor never owns more than one buffer.
// A device tensor also shares ownership of its DeviceMemory, which therefore outlives it.
// Thread-safety: distinct Tensors may be used from distinct threads; concurrent writes to shared
// storage are the caller's to order.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/export.hpp"

namespace tandem {

using Shape = std::vector<std::int64_t>;

/// Where a tensor's elements live.
enum class MemoryKind { host, cuda };

struct TANDEM_EXPORT Device {
  MemoryKind kind = MemoryKind::host;
  int index = 0;  // the CUDA ordinal for cuda
  bool operator==(const Device&) const = default;
  /// "host", "cuda:1"
  std::string name() const;
};

/// Allocates a device's memory for tensors. Implemented by backends (the CUDA module's caching
/// allocator); shared by every tensor it allocated. Thread-safety: the implementation's.
class TANDEM_EXPORT DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual Device device() const = 0;
  /// Storage for `count` floats (contents unspecified), released through its deleter.
  virtual std::shared_ptr<float[]> allocate(std::int64_t count) = 0;
};

/// Number of elements of a shape (1 for a scalar shape {}).
TANDEM_EXPORT std::int64_t shape_size(const Shape& shape);
/// A dimension a Keras config leaves null (any length) before the data gives it (a config's
/// declared input shape only: a tensor's dimensions are never negative; nn/input_lengths.hpp).
inline constexpr std::int64_t kAnyLength = -1;
/// "(128, 784)" — the way Keras prints shapes; `batch_dim` prints a leading "None".
TANDEM_EXPORT std::string shape_to_string(const Shape& shape, bool batch_dim = false);

class TANDEM_EXPORT Tensor {
 public:
  /// An empty tensor: no storage, shape {0}.
  Tensor();
  /// A zero-filled tensor of the given shape (64-byte aligned storage).
  explicit Tensor(Shape shape);
  Tensor(std::initializer_list<std::int64_t> shape) : Tensor(Shape(shape)) {}
  /// A tensor of the given shape in `memory`'s device (host memory when null; contents
  /// unspecified on a device).
  Tensor(Shape shape, std::shared_ptr<DeviceMemory> memory);

  static Tensor from_vector(Shape shape, const std::vector<float>& values);
  /// A tensor of `shape` over `storage`, which the caller allocated (at least shape_size(shape)
  /// floats, 64-byte aligned; its contents are kept) — e.g. pinned host memory that a GPU copies
  /// from at full speed. The tensor shares ownership of the storage.
  static Tensor adopt(Shape shape, std::shared_ptr<float[]> storage);
  /// A tensor of `shape` over base's storage from element `offset` on (no copy; keeps base's
  /// storage alive). Resizing it beyond its size detaches it onto its own storage.
  static Tensor view(const Tensor& base, std::int64_t offset, Shape shape);

  const Shape& shape() const { return shape_; }
  std::int64_t dim(int axis) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Where the elements live.
  Device device() const { return memory_ ? memory_->device() : Device{}; }
  bool on_host() const { return memory_ == nullptr; }
  /// The allocator of a device tensor (null for host tensors): resize() allocates from it.
  const std::shared_ptr<DeviceMemory>& memory() const { return memory_; }

  float* data() { return storage_.get(); }
  const float* data() const { return storage_.get(); }
  std::span<float> values() { return {data(), static_cast<std::size_t>(size_)}; }
  std::span<const float> values() const { return {data(), static_cast<std::size_t>(size_)}; }
  float& operator[](std::int64_t i) { return data()[i]; }
  float operator[](std::int64_t i) const { return data()[i]; }

  /// Changes the shape, reusing the storage when it is large enough (no reallocation when the
  /// element count shrinks, e.g. for the last partial batch). Contents are unspecified afterwards.
  void resize(const Shape& shape);
  /// A view with another shape of the same element count, sharing storage.
  Tensor reshaped(const Shape& shape) const;
  /// A deep copy.
  Tensor clone() const;
  void fill(float value);
  void copy_from(const Tensor& other);  // shapes must hold the same number of elements

 private:
  Shape shape_;
  std::int64_t size_ = 0;
  std::int64_t capacity_ = 0;
  std::shared_ptr<float[]> storage_;
  std::shared_ptr<DeviceMemory> memory_;  // null: host memory
  void require_host(const char* operation) const;
};

}  // namespace tandem
