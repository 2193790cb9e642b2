#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/losses.hpp"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void loss_rows_kernel(backend::LossDesc loss, const float* pred, const float* target,
                                 backend::math::RowWeights weights, std::int64_t rows,
                                 std::int64_t cols, float scale, float* row_loss, float* grad) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    row_loss[r] = backend::math::d2f(
        backend::math::weighted_loss_row(loss, pred, target, weights, grad, r, cols, scale));
}

}  // namespace

void loss_rows(const backend::LossDesc& loss, const float* pred, const float* target,
               backend::math::RowWeights weights, std::int64_t rows, std::int64_t cols, float scale,
               float* row_loss, float* grad, cudaStream_t stream) {
  if (rows <= 0) return;
  const std::int64_t blocks = (rows + kThreads - 1) / kThreads;
  loss_rows_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      loss, pred, target, weights, rows, cols, scale, row_loss, grad);
  check(cudaGetLastError(), "loss_rows");
}

}  // namespace tandem::cuda
