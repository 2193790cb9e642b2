#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/metrics.hpp"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void metric_rows_kernel(backend::MetricDesc metric, const float* pred, const float* target,
                                   const float* weights, std::int64_t rows, std::int64_t cols,
                                   float* row_sum) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    row_sum[r] = backend::math::d2f(
        backend::math::weighted_metric_row(metric, pred, target, weights, r, cols));
  }
}

}  // namespace

void metric_rows(const backend::MetricDesc& metric, const float* pred, const float* target,
                 const float* weights, std::int64_t rows, std::int64_t cols, float* row_sum,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  const std::int64_t blocks = (rows + kThreads - 1) / kThreads;
  metric_rows_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0,
                       stream>>>(metric, pred, target, weights, rows, cols, row_sum);
  check(cudaGetLastError(), "metric_rows");
}

}  // namespace tandem::cuda
