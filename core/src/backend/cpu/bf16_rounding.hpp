// float32 matrices rounded to bfloat16 bits (backend/bfloat16.hpp: to nearest, ties to even) in
// the layouts the CPU's bf16 products read: plain, transposed, a K-slice of columns, and the
// blocked layout oneDNN's AMX matmul reads its weights in.
//
// Every function works on the calling thread's team (backend/cpu/parallel.hpp), reads `from`
// and writes `to` (caller-owned, not overlapping) and nothing else; results are bf16_bits value
// by value, on any x86-64 CPU. On a CPU with AVX-512 the transposed and blocked roundings run
// hand-written AVX-512 loops (measured in docs/benchmarks.md).
#pragma once

#include <cstdint>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// Rounds n floats to bfloat16 bits into `to`, element by element.
void round_to_bf16(const float* from, std::int64_t n, std::uint16_t* to);

/// `to` (cols x rows, row-major) = the bfloat16 bits of `from` (rows x cols, row-major)
/// transposed.
void round_to_bf16_transposed(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to);

/// `to` (rows x (c1 - c0), row-major) = the bfloat16 bits of columns [c0, c1) of `from`
/// (rows x cols, row-major): one K-slice of a product's A.
void round_columns_to_bf16(const float* from, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                           std::int64_t c1, std::uint16_t* to);

/// The bfloat16 bits of a rows x cols matrix M in oneDNN's BA16a64b2a layout, the one its AMX
/// matmul picks for a weights operand; `from` holds M row-major, or Mᵀ row-major (cols x rows)
/// when `transposed`. M is cut into blocks of 32 rows by 64 columns (zero-padded at the edges),
/// stored column-block by column-block and, within one, row-block by row-block; a block holds its
/// 16 row pairs one after the other, each as 64 pairs (row 2i, row 2i + 1) of one column. `to`
/// holds ceil(cols / 64) * ceil(rows / 32) * 2048 values.
void round_to_bf16_ba16a64b2a(const float* from, std::int64_t rows, std::int64_t cols,
                              bool transposed, std::uint16_t* to);

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
