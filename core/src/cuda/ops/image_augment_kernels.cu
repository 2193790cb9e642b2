// Private (CUDA module): the random image transforms of Keras' preprocessing layers. Warps: one
// thread per output value (kernel_math's warp_value); their gradient one thread per (sample,
// channel), walking the output pixels in the CPU's order, so both give the same bits without
// atomics. Colour adjustments: one thread per (sample, channel) (its mean, then its values).
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

namespace math = backend::math;

__global__ void warp_kernel(backend::WarpDesc d, const float* draws, const float* x, float* y) {
  const std::int64_t n = d.batch * d.out_rows * d.out_cols * d.channels;
  for (std::int64_t e = grid_first(); e < n; e += grid_step())
    y[e] = math::warp_value(d, draws, x, e);
}

__global__ void warp_backward_kernel(backend::WarpDesc d, const float* draws, const float* dy,
                                     float* dx) {
  const std::int64_t image = d.rows * d.cols * d.channels;
  for (std::int64_t t = grid_first(); t < d.batch * d.channels; t += grid_step()) {
    const std::int64_t n = t / d.channels, c = t % d.channels;
    float* dimage = dx + n * image;
    for (std::int64_t p = 0; p < d.rows * d.cols; ++p) dimage[p * d.channels + c] = 0.0f;
    float m[8];
    math::warp_matrix(d, draws, n, m);
    for (std::int64_t i = 0; i < d.out_rows; ++i)
      for (std::int64_t j = 0; j < d.out_cols; ++j) {
        const math::WarpTaps taps = math::warp_taps(d, m, i, j);
        const float g = dy[((n * d.out_rows + i) * d.out_cols + j) * d.channels + c];
        for (int k = 0; k < taps.count; ++k) {
          if (taps.at[k] < 0) continue;
          float& to = dimage[taps.at[k] * d.channels + c];
          to = math::fadd(to, math::fmul(taps.weight[k], g));
        }
      }
  }
}

__global__ void adjust_kernel(backend::AdjustDesc d, const float* draws, const float* x,
                              float* means, float* y) {
  const std::int64_t cells = d.rows * d.cols, image = cells * d.channels;
  for (std::int64_t t = grid_first(); t < d.batch * d.channels; t += grid_step()) {
    const std::int64_t n = t / d.channels, c = t % d.channels;
    const float* in = x + n * image;
    const float amount = math::adjust_amount(d, draws, n);
    const float mean = d.kind == backend::AdjustDesc::contrast
                           ? math::adjust_channel_mean(cells, d.channels, in, c)
                           : 0.0f;
    means[t] = mean;
    for (std::int64_t p = 0; p < cells; ++p) {
      const std::int64_t e = p * d.channels + c;
      y[n * image + e] = math::adjust_clip(d, math::adjust_unclipped(d, amount, in[e], mean));
    }
  }
}

__global__ void adjust_backward_kernel(backend::AdjustDesc d, const float* draws, const float* x,
                                       const float* means, const float* dy, float* dx) {
  const std::int64_t cells = d.rows * d.cols, image = cells * d.channels;
  for (std::int64_t t = grid_first(); t < d.batch * d.channels; t += grid_step()) {
    const std::int64_t n = t / d.channels, c = t % d.channels;
    const float amount = math::adjust_amount(d, draws, n);
    float* out = dx + n * image;
    for (std::int64_t p = 0; p < cells; ++p) {
      const std::int64_t e = p * d.channels + c;
      out[e] = math::adjust_passes(d, math::adjust_unclipped(d, amount, x[n * image + e], means[t]))
                   ? dy[n * image + e]
                   : 0.0f;
    }
    if (d.kind != backend::AdjustDesc::contrast) continue;
    const float passed_mean = math::adjust_channel_mean(cells, d.channels, out, c);
    for (std::int64_t p = 0; p < cells; ++p) {
      float& v = out[p * d.channels + c];
      v = math::adjust_input_grad(amount, v, passed_mean);
    }
  }
}

}  // namespace

void warp_images(const backend::WarpDesc& d, const float* draws, const float* x, float* y,
                 cudaStream_t stream) {
  const std::int64_t n = d.batch * d.out_rows * d.out_cols * d.channels;
  if (n <= 0) return;
  warp_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, draws, x, y);
  check_launch("warp_images");
}

void warp_images_backward(const backend::WarpDesc& d, const float* draws, const float* dy,
                          float* dx, cudaStream_t stream) {
  const std::int64_t n = d.batch * d.channels;
  if (n <= 0) return;
  warp_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, draws, dy, dx);
  check_launch("warp_images_backward");
}

void adjust_images(const backend::AdjustDesc& d, const float* draws, const float* x, float* means,
                   float* y, cudaStream_t stream) {
  const std::int64_t n = d.batch * d.channels;
  if (n <= 0) return;
  adjust_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, draws, x, means, y);
  check_launch("adjust_images");
}

void adjust_images_backward(const backend::AdjustDesc& d, const float* draws, const float* x,
                            const float* means, const float* dy, float* dx, cudaStream_t stream) {
  const std::int64_t n = d.batch * d.channels;
  if (n <= 0) return;
  adjust_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, draws, x, means, dy, dx);
  check_launch("adjust_images_backward");
}

}  // namespace tandem::cuda
