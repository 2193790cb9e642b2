// Row-major GEMMs through oneDNN: single precision (dnnl_sgemm, which picks AVX-512 kernels on
// its own; measured in docs/benchmarks.md), and bfloat16 products with float32 sums (a oneDNN
// matmul primitive on AVX-512 BF16, the "bf16" precision of util/precision.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// GEMMs of fewer floating-point operations than this run on one thread.
inline constexpr double kParallelGemmFlops = 32e6;

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);

/// C = op(A) op(B) (+ bias, one value per column of C, when `bias` is not null) with A and B
/// rounded to bfloat16 (backend/bfloat16.hpp) and the products summed in float32. The matrices
/// are contiguous row-major as stored (A m x k, or k x m when trans_a; B k x n, or n x k when
/// trans_b); with batch > 1 each of A, B and C holds `batch` matrices one after the other and
/// every product is taken alike (no bias then). Needs a CPU with AVX-512 BF16
/// (bf16_unavailable()); throws RunError if oneDNN fails. Any thread; it rounds into buffers of
/// its own thread, which keep the size of the largest operands it has seen (seed-mlp at batch
/// 2048: 100 MB) for the thread's life, as do its primitives.
void gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               std::int64_t batch, const float* a, const float* b, const float* bias, float* c);

/// Rounds n floats to bfloat16 bits (backend/bfloat16.hpp) into `to`, element by element, on the
/// calling thread's team.
void round_to_bf16(const float* from, std::int64_t n, std::uint16_t* to);

/// `to` (cols x rows, row-major) = the bfloat16 bits of `from` (rows x cols, row-major)
/// transposed, on the calling thread's team.
void round_to_bf16_transposed(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to);

/// `to` (rows x (c1 - c0), row-major) = the bfloat16 bits of columns [c0, c1) of `from`
/// (rows x cols, row-major), on the calling thread's team: one K-slice of a product's A.
void round_columns_to_bf16(const float* from, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                           std::int64_t c1, std::uint16_t* to);

/// The bfloat16 bits of `from` (rows x cols, row-major) in oneDNN's BA16a64b2a layout, the one
/// its AMX matmul picks for a weights operand, on the calling thread's team. The matrix is cut
/// into blocks of 32 rows by 64 columns (zero-padded at the edges), stored column-block by
/// column-block and, within one, row-block by row-block; a block holds its 16 row pairs one
/// after the other, each as 64 pairs (row 2i, row 2i + 1) of one column. `to` holds
/// ceil(cols / 64) * ceil(rows / 32) * 2048 values.
void round_to_bf16_ba16a64b2a(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to);

/// Why this CPU cannot run bfloat16 products at full speed (the missing instruction set, as a
/// sentence), or "" when it can: oneDNN's effective ISA must include AVX-512 BF16 (which
/// ONEDNN_MAX_CPU_ISA may lower).
std::string bf16_unavailable();

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
