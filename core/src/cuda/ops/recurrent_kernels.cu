// Private (CUDA module): the LSTM and GRU steps' kernels, one thread per unit of a row, each
// calling recurrent_math.hpp's per-unit function (the CPU backend's very arithmetic); the
// sequence masks' (a thread per row, a thread per value). Ownership:
// none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/recurrent_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

using backend::RecurrentCellDesc;

__global__ void lstm_forward_kernel(RecurrentCellDesc d, const float* xw, const float* rec,
                                    const float* c_prev, float* pre, float* c, float* h,
                                    std::int64_t n) {
  const std::int64_t u = d.units;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t r = e / u, j = e % u;
    backend::math::lstm_unit_forward(d, xw + r * 4 * u, rec + r * 4 * u, c_prev + r * u,
                                     pre + r * 4 * u, c + r * u, h + r * u, j);
  }
}

__global__ void lstm_backward_kernel(RecurrentCellDesc d, const float* pre, const float* c_prev,
                                     const float* c, const float* dh, float* dc, float* d_pre,
                                     std::int64_t n) {
  const std::int64_t u = d.units;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t r = e / u, j = e % u;
    backend::math::lstm_unit_backward(d, pre + r * 4 * u, c_prev + r * u, c + r * u, dh + r * u,
                                      dc + r * u, d_pre + r * 4 * u, j);
  }
}

__global__ void gru_forward_kernel(RecurrentCellDesc d, const float* xw, const float* rec,
                                   const float* h_prev, float* pre, float* h, std::int64_t n) {
  const std::int64_t u = d.units;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t r = e / u, j = e % u;
    backend::math::gru_unit_forward(d, xw + r * 3 * u, rec + r * 3 * u, h_prev + r * u,
                                    pre + r * 4 * u, h + r * u, j);
  }
}

__global__ void gru_backward_kernel(RecurrentCellDesc d, const float* pre, const float* h_prev,
                                    const float* dh, float* d_xw, float* d_rec, float* dh_prev,
                                    std::int64_t n) {
  const std::int64_t u = d.units;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t r = e / u, j = e % u;
    backend::math::gru_unit_backward(d, pre + r * 4 * u, h_prev + r * u, dh + r * u,
                                     d_xw + r * 3 * u, d_rec + r * 3 * u, dh_prev + r * u, j);
  }
}

__global__ void sequence_mask_kernel(const float* x, float value, std::int64_t features,
                                     float* mask, std::int64_t rows) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step())
    mask[r] = backend::math::row_differs(x + r * features, features, value) ? 1.0f : 0.0f;
}

__global__ void select_rows_kernel(const float* mask, const float* a, const float* b, float* out,
                                   std::int64_t cols, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    out[i] = mask[i / cols] != 0.0f ? a[i] : b ? b[i] : 0.0f;
}

__global__ void masked_average_kernel(const float* x, const float* mask, float* y,
                                      std::int64_t steps, std::int64_t channels, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const std::int64_t b = i / channels, c = i % channels;
    y[i] = backend::math::masked_step_mean(x + b * steps * channels, mask + b * steps, steps,
                                           channels, c);
  }
}

__global__ void masked_average_backward_kernel(const float* dy, const float* mask, float* dx,
                                               std::int64_t steps, std::int64_t channels,
                                               std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const std::int64_t row = i / channels, c = i % channels, b = row / steps;
    const float kept = backend::math::masked_step_count(mask + b * steps, steps);
    dx[i] = backend::math::masked_step_mean_gradient(dy[b * channels + c], mask[row], kept);
  }
}

}  // namespace

void lstm_step_forward(const RecurrentCellDesc& d, const float* xw, const float* rec,
                       const float* c_prev, float* pre, float* c, float* h, std::int64_t rows,
                       cudaStream_t stream) {
  const std::int64_t n = rows * d.units;
  if (n <= 0) return;
  lstm_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, xw, rec, c_prev, pre, c, h, n);
  check_launch("lstm_step_forward");
}

void lstm_step_backward(const RecurrentCellDesc& d, const float* pre, const float* c_prev,
                        const float* c, const float* dh, float* dc, float* d_pre, std::int64_t rows,
                        cudaStream_t stream) {
  const std::int64_t n = rows * d.units;
  if (n <= 0) return;
  lstm_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, pre, c_prev, c, dh, dc, d_pre, n);
  check_launch("lstm_step_backward");
}

void gru_step_forward(const RecurrentCellDesc& d, const float* xw, const float* rec,
                      const float* h_prev, float* pre, float* h, std::int64_t rows,
                      cudaStream_t stream) {
  const std::int64_t n = rows * d.units;
  if (n <= 0) return;
  gru_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, xw, rec, h_prev, pre, h, n);
  check_launch("gru_step_forward");
}

void gru_step_backward(const RecurrentCellDesc& d, const float* pre, const float* h_prev,
                       const float* dh, float* d_xw, float* d_rec, float* dh_prev,
                       std::int64_t rows, cudaStream_t stream) {
  const std::int64_t n = rows * d.units;
  if (n <= 0) return;
  gru_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, pre, h_prev, dh, d_xw, d_rec,
                                                              dh_prev, n);
  check_launch("gru_step_backward");
}

void sequence_mask(const float* x, float value, std::int64_t features, float* mask,
                   std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  sequence_mask_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, value, features, mask, rows);
  check_launch("sequence_mask");
}

void select_rows(const float* mask, const float* a, const float* b, float* out, std::int64_t rows,
                 std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  select_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(mask, a, b, out, cols, n);
  check_launch("select_rows");
}

void masked_average_steps(const float* x, const float* mask, float* y, std::int64_t samples,
                          std::int64_t steps, std::int64_t channels, cudaStream_t stream) {
  const std::int64_t n = samples * channels;
  if (n <= 0) return;
  masked_average_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, mask, y, steps, channels, n);
  check_launch("masked_average_steps");
}

void masked_average_steps_backward(const float* dy, const float* mask, float* dx,
                                   std::int64_t samples, std::int64_t steps, std::int64_t channels,
                                   cudaStream_t stream) {
  const std::int64_t n = samples * steps * channels;
  if (n <= 0) return;
  masked_average_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, mask, dx, steps,
                                                                         channels, n);
  check_launch("masked_average_steps_backward");
}

}  // namespace tandem::cuda
