// The CPU backend's random image transforms (Keras' preprocessing layers): warps (translation,
// rotation, zoom, crop, resize) through kernel_math's warp_value / warp_taps, and colour
// adjustments (contrast, brightness) through adjust_*. Forwards split across threads by output
// rows; gradients by sample, so that no two threads add into the same input image.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"
#include "backend/kernel_math.hpp"

namespace tandem::backend {

void CpuBackend::warp_images(const WarpDesc& d, const Tensor& draws, const Tensor& x, Tensor& y) {
  require_device(*this, draws, "warp_images");
  require_device(*this, x, "warp_images");
  require_device(*this, y, "warp_images");
  check_warp(d, draws, x, y);
  const float* in = x.data();
  const float* u = draws.data();
  float* out = y.data();
  if (math::warp_separable(d)) {
    // The same taps as warp_value, their axes computed once per column and per row of a sample.
    cpu::parallel_for(d.batch, 1, [&](std::int64_t n0, std::int64_t n1) {
      std::vector<math::WarpAxis> rows(static_cast<std::size_t>(d.out_rows)),
          cols(static_cast<std::size_t>(d.out_cols));
      for (std::int64_t n = n0; n < n1; ++n) {
        float m[8];
        math::warp_matrix(d, u, n, m);
        for (std::int64_t j = 0; j < d.out_cols; ++j)
          cols[j] = math::warp_axis(d, math::warp_source_x(d, m, static_cast<float>(j), 0.0f));
        for (std::int64_t i = 0; i < d.out_rows; ++i)
          rows[i] = math::warp_axis(d, math::warp_source_y(d, m, 0.0f, static_cast<float>(i)));
        const float* image = in + n * d.rows * d.cols * d.channels;
        float* to = out + n * d.out_rows * d.out_cols * d.channels;
        for (std::int64_t i = 0; i < d.out_rows; ++i)
          for (std::int64_t j = 0; j < d.out_cols; ++j) {
            const math::WarpTaps t = math::warp_taps_of(d, rows[i], cols[j]);
            for (std::int64_t c = 0; c < d.channels; ++c) *to++ = math::warp_tap_sum(d, t, image, c);
          }
      }
    });
    return;
  }
  // Rotations: warp_value's arithmetic, the matrix once per output row, the taps per pixel.
  cpu::parallel_for(d.batch * d.out_rows, 4, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / d.out_rows, i = r % d.out_rows;
      float m[8];
      math::warp_matrix(d, u, n, m);
      const float* image = in + n * d.rows * d.cols * d.channels;
      float* to = out + r * d.out_cols * d.channels;
      for (std::int64_t j = 0; j < d.out_cols; ++j) {
        const math::WarpTaps t = math::warp_taps(d, m, i, j);
        for (std::int64_t c = 0; c < d.channels; ++c) *to++ = math::warp_tap_sum(d, t, image, c);
      }
    }
  });
}

void CpuBackend::warp_images_backward(const WarpDesc& d, const Tensor& draws, const Tensor& dy,
                                      Tensor& dx) {
  require_device(*this, draws, "warp_images_backward");
  require_device(*this, dy, "warp_images_backward");
  require_device(*this, dx, "warp_images_backward");
  check_warp(d, draws, dx, dy);
  const float* g = dy.data();
  const float* u = draws.data();
  float* out = dx.data();
  const std::int64_t image = d.rows * d.cols * d.channels;
  cpu::parallel_for(d.batch, 1, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      float* dimage = out + n * image;
      std::fill(dimage, dimage + image, 0.0f);
      float m[8];
      math::warp_matrix(d, u, n, m);
      for (std::int64_t i = 0; i < d.out_rows; ++i)
        for (std::int64_t j = 0; j < d.out_cols; ++j) {
          const math::WarpTaps t = math::warp_taps(d, m, i, j);
          const float* gp = g + ((n * d.out_rows + i) * d.out_cols + j) * d.channels;
          for (int k = 0; k < t.count; ++k) {
            if (t.at[k] < 0) continue;
            float* to = dimage + t.at[k] * d.channels;
            for (std::int64_t c = 0; c < d.channels; ++c)
              to[c] = math::fadd(to[c], math::fmul(t.weight[k], gp[c]));
          }
        }
    }
  });
}

namespace {

float channel_mean(const AdjustDesc& d, const float* image, std::int64_t c) {
  return math::adjust_channel_mean(d.rows * d.cols, d.channels, image, c);
}

// Every channel's mean in one pass over the pixels: each channel's sum still runs in pixel
// order, so each equals adjust_channel_mean's.
void channel_means(const AdjustDesc& d, const float* image, float* means) {
  std::vector<double> sums(static_cast<std::size_t>(d.channels), 0.0);
  const std::int64_t cells = d.rows * d.cols;
  for (std::int64_t p = 0; p < cells; ++p)
    for (std::int64_t c = 0; c < d.channels; ++c)
      sums[c] = math::dadd(sums[c], math::f2d(image[p * d.channels + c]));
  for (std::int64_t c = 0; c < d.channels; ++c)
    means[c] = static_cast<float>(math::ddiv(sums[c], math::i2d(cells)));
}

}  // namespace

void CpuBackend::adjust_images(const AdjustDesc& d, const Tensor& draws, const Tensor& x,
                               Tensor& means, Tensor& y) {
  require_device(*this, draws, "adjust_images");
  require_device(*this, x, "adjust_images");
  require_device(*this, means, "adjust_images");
  require_device(*this, y, "adjust_images");
  check_adjust(d, draws, x, means, y);
  const std::int64_t cells = d.rows * d.cols, image = cells * d.channels;
  cpu::parallel_for(d.batch, 1, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      const float* in = x.data() + n * image;
      float* out = y.data() + n * image;
      float* mean = means.data() + n * d.channels;
      const float amount = math::adjust_amount(d, draws.data(), n);
      if (d.kind == AdjustDesc::contrast)
        channel_means(d, in, mean);
      else
        std::fill(mean, mean + d.channels, 0.0f);
      for (std::int64_t p = 0; p < cells; ++p)
        for (std::int64_t c = 0; c < d.channels; ++c) {
          const std::int64_t e = p * d.channels + c;
          out[e] = math::adjust_clip(d, math::adjust_unclipped(d, amount, in[e], mean[c]));
        }
    }
  });
}

void CpuBackend::adjust_images_backward(const AdjustDesc& d, const Tensor& draws, const Tensor& x,
                                        const Tensor& means, const Tensor& dy, Tensor& dx) {
  require_device(*this, draws, "adjust_images_backward");
  require_device(*this, x, "adjust_images_backward");
  require_device(*this, dy, "adjust_images_backward");
  require_device(*this, dx, "adjust_images_backward");
  check_adjust(d, draws, x, means, dy);
  check_adjust(d, draws, x, means, dx);
  const std::int64_t cells = d.rows * d.cols, image = cells * d.channels;
  cpu::parallel_for(d.batch, 1, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      const float* in = x.data() + n * image;
      const float* g = dy.data() + n * image;
      const float* mean = means.data() + n * d.channels;
      float* out = dx.data() + n * image;
      const float amount = math::adjust_amount(d, draws.data(), n);
      // The gradient that passes the clip; for contrast each value also moves its channel's mean.
      for (std::int64_t e = 0; e < image; ++e)
        out[e] =
            math::adjust_passes(d, math::adjust_unclipped(d, amount, in[e], mean[e % d.channels]))
                ? g[e]
                : 0.0f;
      if (d.kind != AdjustDesc::contrast) continue;
      for (std::int64_t c = 0; c < d.channels; ++c) {
        const float passed_mean = channel_mean(d, out, c);
        for (std::int64_t p = 0; p < cells; ++p) {
          float& v = out[p * d.channels + c];
          v = math::adjust_input_grad(amount, v, passed_mean);
        }
      }
    }
  });
}

}  // namespace tandem::backend
