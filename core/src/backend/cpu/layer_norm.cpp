// The CPU backend's layer normalization: rows split by threads for the statistics, the output
// and dx; blocks of rows and ranges of columns for the gamma and beta gradients, whose sums add
// the blocks in order (kernel_math's kLayerNormRowBlock).
// The row loops are compiled for AVX-512 as well (avx512_copy.hpp): kernel_math's row sums add
// a vector of 8 doubles at a time there, in the order the baseline and the CUDA kernels add them.
#include <algorithm>
#include <vector>

#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

std::int64_t rows_per_part(std::int64_t cols) {
  return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1));
}

// What the row loops read and write; gamma, beta, d_gamma and d_beta may be null.
struct LayerNormRows {
  const float *x, *dy, *gamma, *beta, *mean, *inv_std;
  float *y, *mean_out, *inv_std_out, *dx, *d_gamma, *d_beta;
  std::int64_t cols;
  double epsilon;
  bool centred_variance, centred_output;
};

[[gnu::always_inline]] inline void forward_rows(const LayerNormRows* t, std::int64_t r0,
                                                std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* row = t->x + r * t->cols;
    math::layer_norm_row_stats(row, t->cols, t->epsilon, t->centred_variance, t->mean_out + r,
                               t->inv_std_out + r);
    math::layer_norm_row(row, t->y + r * t->cols, t->cols,
                         math::layer_norm_output_shift(t->mean_out[r], t->centred_output),
                         t->inv_std_out[r], t->gamma, t->beta);
  }
}

[[gnu::always_inline]] inline void input_gradient_rows(const LayerNormRows* t, std::int64_t r0,
                                                       std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r)
    math::layer_norm_row_backward(t->x + r * t->cols, t->dy + r * t->cols, t->gamma, t->mean[r],
                                  t->inv_std[r], t->centred_output, t->cols, t->dx + r * t->cols);
}

// The gamma and beta gradients' sums over rows [r0, r1) (one of kernel_math's row blocks) for
// columns [c0, c1), in row order, into block_g and block_b (indexed by column; either may be
// null).
[[gnu::always_inline]] inline void parameter_gradient_block(const LayerNormRows* t, std::int64_t r0,
                                                            std::int64_t r1, std::int64_t c0,
                                                            std::int64_t c1, float* block_g,
                                                            float* block_b) {
  const std::int64_t cols = t->cols;
  for (std::int64_t c = c0; c < c1; ++c) {
    if (block_g) block_g[c] = 0.0f;
    if (block_b) block_b[c] = 0.0f;
  }
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* g = t->dy + r * cols;
    const float* x = t->x + r * cols;
    const float shift = math::layer_norm_output_shift(t->mean[r], t->centred_output);
    const float inv_std = t->inv_std[r];
    if (block_g)
      for (std::int64_t c = c0; c < c1; ++c)
        block_g[c] =
            math::fadd(block_g[c], math::layer_norm_gamma_term(g[c], x[c], shift, inv_std));
    if (block_b)
      for (std::int64_t c = c0; c < c1; ++c) block_b[c] = math::fadd(block_b[c], g[c]);
  }
}

// total[c] = the blocks' sums of column c added in block order, for columns [c0, c1).
[[gnu::always_inline]] inline void add_blocks(const float* blocks, std::int64_t block_count,
                                              std::int64_t cols, std::int64_t c0, std::int64_t c1,
                                              float* total) {
  for (std::int64_t c = c0; c < c1; ++c) total[c] = 0.0f;
  for (std::int64_t b = 0; b < block_count; ++b)
    for (std::int64_t c = c0; c < c1; ++c) total[c] = math::fadd(total[c], blocks[b * cols + c]);
}

constexpr std::int64_t kColumnsPerPart = 256;

// d_gamma and d_beta: each (row block, column range) on its own part, the blocks' sums then
// added in block order (kernel_math's kLayerNormRowBlock): the same bits on any thread count.
void parameter_gradients(const LayerNormRows& t, std::int64_t rows) {
  const std::int64_t cols = t.cols, block_rows = math::kLayerNormRowBlock;
  const std::int64_t blocks = (rows + block_rows - 1) / block_rows;
  const std::int64_t column_parts = (cols + kColumnsPerPart - 1) / kColumnsPerPart;
  std::vector<float> block_g(t.d_gamma ? blocks * cols : 0), block_b(t.d_beta ? blocks * cols : 0);
  cpu::parallel_for(blocks * column_parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t b = p / column_parts, c0 = p % column_parts * kColumnsPerPart;
      const std::int64_t c1 = std::min(cols, c0 + kColumnsPerPart);
      cpu::run_loop<&parameter_gradient_block>(&t, b * block_rows,
                                               std::min(rows, (b + 1) * block_rows), c0, c1,
                                               t.d_gamma ? block_g.data() + b * cols : nullptr,
                                               t.d_beta ? block_b.data() + b * cols : nullptr);
    }
  });
  cpu::parallel_for(cols, 64, [&](std::int64_t c0, std::int64_t c1) {
    if (t.d_gamma) cpu::run_loop<&add_blocks>(block_g.data(), blocks, cols, c0, c1, t.d_gamma);
    if (t.d_beta) cpu::run_loop<&add_blocks>(block_b.data(), blocks, cols, c0, c1, t.d_beta);
  });
}

}  // namespace

void CpuBackend::layer_norm_forward(const LayerNormDesc& d, const Tensor& x, const Tensor* gamma,
                                    const Tensor* beta, Tensor& y, Tensor& stats) {
  require_device(*this, x, "layer_norm_forward");
  require_device(*this, y, "layer_norm_forward");
  const std::int64_t rows = layer_norm_rows(d, x);
  place(stats, {2 * rows});
  LayerNormRows t{};
  t.x = x.data();
  t.gamma = gamma ? gamma->data() : nullptr;
  t.beta = beta ? beta->data() : nullptr;
  t.y = y.data();
  t.mean_out = stats.data();
  t.inv_std_out = t.mean_out + rows;
  t.cols = d.cols;
  t.epsilon = d.epsilon;
  t.centred_variance = d.centred_variance;
  t.centred_output = d.centred_output;
  cpu::parallel_for(rows, rows_per_part(d.cols), [&](std::int64_t r0, std::int64_t r1) {
    cpu::run_loop<&forward_rows>(&t, r0, r1);
  });
}

void CpuBackend::layer_norm_backward(const LayerNormDesc& d, const Tensor& x, const Tensor& dy,
                                     const Tensor* gamma, const Tensor& stats, Tensor* dx,
                                     Tensor* d_gamma, Tensor* d_beta) {
  require_device(*this, x, "layer_norm_backward");
  require_device(*this, dy, "layer_norm_backward");
  const std::int64_t rows = layer_norm_rows(d, x);
  LayerNormRows t{};
  t.x = x.data();
  t.dy = dy.data();
  t.gamma = gamma ? gamma->data() : nullptr;
  t.mean = stats.data();
  t.inv_std = t.mean + rows;
  t.d_gamma = d_gamma ? d_gamma->data() : nullptr;
  t.d_beta = d_beta ? d_beta->data() : nullptr;
  t.cols = d.cols;
  t.centred_output = d.centred_output;
  if (d_gamma || d_beta) parameter_gradients(t, rows);
  if (!dx) return;
  require_device(*this, *dx, "layer_norm_backward");
  t.dx = dx->data();
  cpu::parallel_for(rows, rows_per_part(d.cols), [&](std::int64_t r0, std::int64_t r1) {
    cpu::run_loop<&input_gradient_rows>(&t, r0, r1);
  });
}

}  // namespace tandem::backend
