// The CPU backend's layer normalization: rows split by threads for the statistics, the output
// and dx; columns split for the gamma and beta gradients, each summed over the rows in order.
#include <algorithm>
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

std::int64_t rows_per_part(std::int64_t cols) {
  return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1));
}

}  // namespace

void CpuBackend::layer_norm_forward(const LayerNormDesc& d, const Tensor& x, const Tensor* gamma,
                                    const Tensor* beta, Tensor& y, Tensor& stats) {
  require_device(*this, x, "layer_norm_forward");
  require_device(*this, y, "layer_norm_forward");
  const std::int64_t rows = layer_norm_rows(d, x);
  place(stats, {2 * rows});
  const float* xp = x.data();
  float* yp = y.data();
  float* mean = stats.data();
  float* inv_std = mean + rows;
  const float* g = gamma ? gamma->data() : nullptr;
  const float* b = beta ? beta->data() : nullptr;
  cpu::parallel_for(rows, rows_per_part(d.cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = xp + r * d.cols;
      math::layer_norm_row_stats(row, d.cols, d.epsilon, mean + r, inv_std + r);
      math::layer_norm_row(row, yp + r * d.cols, d.cols, mean[r], inv_std[r], g, b);
    }
  });
}

void CpuBackend::layer_norm_backward(const LayerNormDesc& d, const Tensor& x, const Tensor& dy,
                                     const Tensor* gamma, const Tensor& stats, Tensor* dx,
                                     Tensor* d_gamma, Tensor* d_beta) {
  require_device(*this, x, "layer_norm_backward");
  require_device(*this, dy, "layer_norm_backward");
  const std::int64_t rows = layer_norm_rows(d, x);
  const float* xp = x.data();
  const float* g = dy.data();
  const float* mean = stats.data();
  const float* inv_std = mean + rows;
  const std::int64_t cols = d.cols;
  if (d_gamma || d_beta) {
    float* dg = d_gamma ? d_gamma->data() : nullptr;
    float* db = d_beta ? d_beta->data() : nullptr;
    cpu::parallel_for(cols, 64, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t c = c0; c < c1; ++c) {
        if (dg) dg[c] = 0.0f;
        if (db) db[c] = 0.0f;
      }
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const float gy = g[r * cols + c];
          if (dg) dg[c] += gy * math::layer_norm_hat(xp[r * cols + c], mean[r], inv_std[r]);
          if (db) db[c] += gy;
        }
    });
  }
  if (!dx) return;
  require_device(*this, *dx, "layer_norm_backward");
  const float* gm = gamma ? gamma->data() : nullptr;
  float* gx = dx->data();
  cpu::parallel_for(rows, rows_per_part(cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      math::layer_norm_row_backward(xp + r * cols, g + r * cols, gm, mean[r], inv_std[r], cols,
                                    gx + r * cols);
  });
}

}  // namespace tandem::backend
