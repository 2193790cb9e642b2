// Private (CUDA module): ZeroPadding2D's and Cropping2D's block copies, UpSampling2D's and
// RandomFlip's kernels, one thread per value; the upsampling gradient sums each block in
// row-major order, as the CPU backend does, so both give the same bits.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void block_kernel(backend::ImageBlock b, const float* src, float* dst) {
  const std::int64_t n = b.batch * b.rows * b.cols * b.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % b.channels, j = (e / b.channels) % b.cols,
                       i = (e / (b.channels * b.cols)) % b.rows,
                       s = e / (b.channels * b.cols * b.rows);
    dst[((s * b.dst_rows + b.dst_row + i) * b.dst_cols + b.dst_col + j) * b.channels + c] =
        src[((s * b.src_rows + b.src_row + i) * b.src_cols + b.src_col + j) * b.channels + c];
  }
}

__global__ void upsample_kernel(backend::UpsampleDesc d, const float* x, float* y) {
  const std::int64_t out_rows = d.rows * d.row_factor, out_cols = d.cols * d.col_factor;
  const std::int64_t n = d.batch * out_rows * out_cols * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % d.channels, j = (e / d.channels) % out_cols,
                       i = (e / (d.channels * out_cols)) % out_rows,
                       s = e / (d.channels * out_cols * out_rows);
    y[e] = x[((s * d.rows + i / d.row_factor) * d.cols + j / d.col_factor) * d.channels + c];
  }
}

__global__ void upsample_backward_kernel(backend::UpsampleDesc d, const float* dy, float* dx) {
  const std::int64_t out_cols = d.cols * d.col_factor;
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t c = e % d.channels, j = (e / d.channels) % d.cols,
                       i = (e / (d.channels * d.cols)) % d.rows,
                       s = e / (d.channels * d.cols * d.rows);
    float sum = 0.0f;
    for (std::int64_t a = 0; a < d.row_factor; ++a)
      for (std::int64_t b = 0; b < d.col_factor; ++b)
        sum = backend::math::fadd(
            sum, dy[(((s * d.rows + i) * d.row_factor + a) * out_cols + j * d.col_factor + b) *
                        d.channels +
                    c]);
    dx[e] = sum;
  }
}

__global__ void flip_kernel(backend::FlipDesc d, const float* draws, const float* x, float* y) {
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    y[e] = x[backend::math::flip_source(d, draws, e)];
}

}  // namespace

void copy_image_block(const backend::ImageBlock& block, const float* src, float* dst,
                      cudaStream_t stream) {
  const std::int64_t n = block.batch * block.rows * block.cols * block.channels;
  if (n <= 0) return;
  block_kernel<<<blocks_for(n), kThreads, 0, stream>>>(block, src, dst);
  check_launch("copy_image_block");
}

void upsample_forward(const backend::UpsampleDesc& d, const float* x, float* y,
                      cudaStream_t stream) {
  const std::int64_t n = d.batch * d.rows * d.row_factor * d.cols * d.col_factor * d.channels;
  if (n <= 0) return;
  upsample_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, x, y);
  check_launch("upsample_forward");
}

void upsample_backward(const backend::UpsampleDesc& d, const float* dy, float* dx,
                       cudaStream_t stream) {
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  if (n <= 0) return;
  upsample_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, dy, dx);
  check_launch("upsample_backward");
}

void flip_images(const backend::FlipDesc& d, const float* draws, const float* x, float* y,
                 cudaStream_t stream) {
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  if (n <= 0) return;
  flip_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, draws, x, y);
  check_launch("flip_images");
}

}  // namespace tandem::cuda
