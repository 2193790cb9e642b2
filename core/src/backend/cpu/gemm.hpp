// Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C, through oneDNN's
// dnnl_sgemm (it picks AVX-512 kernels on its own; measured in docs/benchmarks.md).
#pragma once

#include <cstdint>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// GEMMs of fewer floating-point operations than this run on one thread.
inline constexpr double kParallelGemmFlops = 32e6;

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
