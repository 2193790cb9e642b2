#include "backend/cpu/gemm.hpp"

#include <dnnl.h>

#include <string>

#include "tandem/error.hpp"

namespace tandem::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                    lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw RunError("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) +
                   ") for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k));
}

}  // namespace tandem::cpu
