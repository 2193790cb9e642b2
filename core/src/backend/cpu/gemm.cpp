#include "backend/cpu/gemm.hpp"

#include "backend/cpu/parallel.hpp"

#include <dnnl.h>

#include <string>

#include "tandem/error.hpp"

namespace tandem::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C (a replica with no samples has zero gradients)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  compute_threads();  // thread set-up (flush-to-zero) before the first GEMM
  // With the passive wait policy, waking a second thread costs tens of microseconds: a small
  // GEMM is faster on one (fashion-mlp, all on two threads: 142k samples/s; GEMMs under 32 MFLOP on
  // one: 194k).
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = compute_threads();
  const bool single = flops < kParallelGemmFlops && threads > 1;
  dnnl_status_t status;
  {
    const OneThread one_thread(single ? threads : 0);
    status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                        beta, c, ldc);
  }
  if (status != dnnl_success)
    throw RunError("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) +
                   ") for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k));
}

}  // namespace tandem::cpu
