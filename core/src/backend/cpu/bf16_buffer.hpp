// A reusable host buffer of bfloat16 bits for the CPU's bf16 products: the rounded operands
// oneDNN's matmul reads.
//
// Aligned as Tensor's blocks are (allocate_huge_page_block: 64 bytes, 2 MiB and huge pages from
// 2 MiB on). A std::vector's block starts 16 bytes into a page, so every 64-byte row an AMX tile
// load reads from a packed operand straddled two cache lines: seed-mlp's kernel-gradient product
// took 251 ms reading such a buffer against 69 ms from an aligned one (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tensor/huge_page_block.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// Owns its block; one thread at a time. Contents are unspecified after it grows.
class Bf16Buffer {
 public:
  Bf16Buffer() = default;
  ~Bf16Buffer() { std::free(data_); }
  Bf16Buffer(const Bf16Buffer&) = delete;
  Bf16Buffer& operator=(const Bf16Buffer&) = delete;

  /// The data, after growing the buffer to at least n values (it keeps its largest size); valid
  /// until the next call that grows it. Throws std::bad_alloc when no memory is left.
  std::uint16_t* grown_to(std::int64_t n) {
    if (n > capacity_) {
      std::free(data_);
      data_ = nullptr;
      capacity_ = 0;
      data_ = static_cast<std::uint16_t*>(
          allocate_huge_page_block(static_cast<std::size_t>(n) * sizeof(std::uint16_t)));
      if (!data_) throw std::bad_alloc();
      capacity_ = n;
    }
    return data_;
  }

  std::uint16_t* data() { return data_; }
  const std::uint16_t* data() const { return data_; }

 private:
  std::uint16_t* data_ = nullptr;
  std::int64_t capacity_ = 0;
};

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
