#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/metrics.hpp"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void metric_rows_kernel(backend::MetricDesc metric, const float* pred,
                                   const float* target, backend::math::RowWeights weights,
                                   std::int64_t rows, std::int64_t cols, float* row_sum) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    row_sum[r] = backend::math::d2f(
        backend::math::weighted_metric_row(metric, pred, target, weights, r, cols));
  }
}

// One thread per bin, each adding its values over the rows (then elements) in order: the CPU's
// order of additions, so the same bits, without atomics.
__global__ void metric_histogram_kernel(backend::MetricDesc metric, const float* pred,
                                        const float* target, backend::math::RowWeights weights,
                                        std::int64_t rows, std::int64_t cols, std::int64_t bins,
                                        double* out) {
  const std::int64_t bin = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (bin >= bins) return;
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    backend::math::histogram_row(metric, pred, target, weights, r, cols,
                                 [&](std::int64_t b, double v) {
                                   if (b == bin) total = backend::math::dadd(total, v);
                                 });
  out[bin] = total;
}

}  // namespace

void metric_histogram(const backend::MetricDesc& metric, const float* pred, const float* target,
                      backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols,
                      double* out, cudaStream_t stream) {
  const std::int64_t bins = backend::math::histogram_bins(metric);
  if (bins <= 0) return;
  const std::int64_t blocks = (bins + kThreads - 1) / kThreads;
  metric_histogram_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      metric, pred, target, weights, rows, cols, bins, out);
  check(cudaGetLastError(), "metric_histogram");
}

void metric_rows(const backend::MetricDesc& metric, const float* pred, const float* target,
                 backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols,
                 float* row_sum, cudaStream_t stream) {
  if (rows <= 0) return;
  const std::int64_t blocks = (rows + kThreads - 1) / kThreads;
  metric_rows_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0,
                       stream>>>(metric, pred, target, weights, rows, cols, row_sum);
  check(cudaGetLastError(), "metric_rows");
}

}  // namespace tandem::cuda
