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

/// Why this CPU cannot run bfloat16 products at full speed (the missing instruction set, as a
/// sentence), or "" when it can: oneDNN's effective ISA must include AVX-512 BF16 (which
/// ONEDNN_MAX_CPU_ISA may lower).
std::string bf16_unavailable();

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
