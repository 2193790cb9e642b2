// A bfloat16 matmul of one shape whose operands may be packed: stored in the blocked layout that
// oneDNN's matmul picks for that shape, rather than as plain matrices.
//
// With plain operands, oneDNN's AMX matmul copies B (and for some shapes A) into its tile layout
// inside every call. Given B already in that layout, seed-mlp's kernel-gradient product
// (8000 x 2048 x 4000) ran in about half the time on the AMX VM (docs/benchmarks.md, "Mixed
// precision"). Packing is a oneDNN reorder of bits already rounded to bfloat16, so the packed
// operand holds the same values and the product sums the same terms.
#pragma once

#include <cstdint>
#include <memory>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// How an operand of a PackedBf16Matmul is stored.
enum class Bf16Layout {
  row_major,   ///< the matrix's rows one after the other
  transposed,  ///< its columns one after the other (the transpose, row-major)
  packed,      ///< the layout oneDNN picks for the product (pack() writes it)
};

/// Which operand of C = A · B.
enum class Bf16Operand { a, b };

/// What a PackedBf16Matmul computes: C (m x n float32, row-major) = A (m x k) · B (k x n)
/// (+ bias, n float32 values, when with_bias; + C's old values, when accumulate), the operands
/// bfloat16 bits in the given layouts. With batch > 1, `batch` such products at once, each of A,
/// B and C holding the matrices one after the other (no bias then).
struct Bf16MatmulDesc {
  std::int64_t m = 0, n = 0, k = 0;
  Bf16Layout a = Bf16Layout::row_major, b = Bf16Layout::row_major;
  bool with_bias = false;
  bool accumulate = false;
  std::int64_t batch = 1;
};

/// One bfloat16 product planned by oneDNN. One object is used by one thread at a time; it plans
/// the product for that thread's team as it was when the object was made (a single thread for
/// products under kParallelGemmFlops) and keeps its primitives and a rounding buffer for its
/// life. Methods throw RunError when oneDNN fails, std::logic_error for a desc it cannot take
/// (a batched product with a bias).
class PackedBf16Matmul {
 public:
  explicit PackedBf16Matmul(const Bf16MatmulDesc& desc);
  ~PackedBf16Matmul();
  PackedBf16Matmul(const PackedBf16Matmul&) = delete;
  PackedBf16Matmul& operator=(const PackedBf16Matmul&) = delete;

  /// The bfloat16 values an operand takes in its layout (at least batch*m*k or batch*k*n: blocks
  /// pad).
  std::int64_t values(Bf16Operand which) const;

  /// Writes into `to` (values(which) of them) the operand `from` holds plainly (row-major, or
  /// transposed when `transposed`), in this product's layout for it.
  void pack(Bf16Operand which, const std::uint16_t* from, bool transposed, std::uint16_t* to);

  /// Writes into `to` (values(which) of them) the float32 operand `from` (row-major, or
  /// transposed when `transposed`) rounded to bfloat16, in this product's layout for it: in one
  /// pass when that layout is AMX's (round_to_bf16_ba16a64b2a), else rounded and then packed.
  void round_and_pack(Bf16Operand which, const float* from, bool transposed, std::uint16_t* to);

  /// Runs the product. a and b are in this object's layouts; the caller keeps them, bias and c
  /// alive for the call. bias must be given exactly when the desc says with_bias.
  void run(const std::uint16_t* a, const std::uint16_t* b, const float* bias, float* c);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
