// The CPU backend's image block copies (ZeroPadding2D, Cropping2D), nearest-neighbour
// upsampling (UpSampling2D) and random flips (RandomFlip), split across threads by output rows.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"
#include "backend/kernel_math.hpp"

namespace tandem::backend {

void CpuBackend::copy_image_block(const ImageBlock& b, const Tensor& src, Tensor& dst) {
  require_device(*this, src, "copy_image_block");
  require_device(*this, dst, "copy_image_block");
  check_image_block(b, src, dst);
  const float* in = src.data();
  float* out = dst.data();
  const auto bytes = static_cast<std::size_t>(b.cols * b.channels) * sizeof(float);
  // One (sample, block row) at a time: cols x channels contiguous values on both sides.
  cpu::parallel_for(b.batch * b.rows, 64, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / std::max<std::int64_t>(b.rows, 1), i = r % b.rows;
      const float* from = in + ((n * b.src_rows + b.src_row + i) * b.src_cols + b.src_col) * b.channels;
      float* to = out + ((n * b.dst_rows + b.dst_row + i) * b.dst_cols + b.dst_col) * b.channels;
      std::memcpy(to, from, bytes);
    }
  });
}

void CpuBackend::upsample_forward(const UpsampleDesc& d, const Tensor& x, Tensor& y) {
  require_device(*this, x, "upsample_forward");
  require_device(*this, y, "upsample_forward");
  check_upsample(d, x, y);
  const float* in = x.data();
  float* out = y.data();
  const std::int64_t out_rows = d.rows * d.row_factor, out_cols = d.cols * d.col_factor;
  const auto bytes = static_cast<std::size_t>(d.channels) * sizeof(float);
  cpu::parallel_for(d.batch * out_rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / out_rows, i = (r % out_rows) / d.row_factor;
      for (std::int64_t j = 0; j < out_cols; ++j)
        std::memcpy(out + (r * out_cols + j) * d.channels,
                    in + ((n * d.rows + i) * d.cols + j / d.col_factor) * d.channels, bytes);
    }
  });
}

void CpuBackend::upsample_backward(const UpsampleDesc& d, const Tensor& dy, Tensor& dx) {
  require_device(*this, dy, "upsample_backward");
  require_device(*this, dx, "upsample_backward");
  check_upsample(d, dx, dy);
  const float* g = dy.data();
  float* gx = dx.data();
  const std::int64_t out_cols = d.cols * d.col_factor;
  // One input row per task: each of its cells sums its block, rows then columns in order.
  cpu::parallel_for(d.batch * d.rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / d.rows, i = r % d.rows;
      for (std::int64_t j = 0; j < d.cols; ++j) {
        float* cell = gx + (r * d.cols + j) * d.channels;
        std::fill(cell, cell + d.channels, 0.0f);
        for (std::int64_t a = 0; a < d.row_factor; ++a)
          for (std::int64_t b = 0; b < d.col_factor; ++b) {
            const float* from = g + (((n * d.rows + i) * d.row_factor + a) * out_cols +
                                     j * d.col_factor + b) * d.channels;
            for (std::int64_t c = 0; c < d.channels; ++c) cell[c] += from[c];
          }
      }
    }
  });
}

void CpuBackend::flip_images(const FlipDesc& d, const Tensor& draws, const Tensor& x,
                             Tensor& y) {
  require_device(*this, draws, "flip_images");
  require_device(*this, x, "flip_images");
  require_device(*this, y, "flip_images");
  check_flip(d, draws, x, y);
  const float* in = x.data();
  const float* u = draws.data();
  float* out = y.data();
  const std::int64_t row = d.cols * d.channels;
  // flip_source's map, a row at a time: the source row, then each cell forwards or mirrored.
  cpu::parallel_for(d.batch * d.rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t first = math::flip_source(d, u, r * row);  // cell 0 of the output row
      const std::int64_t last = math::flip_source(d, u, r * row + row - d.channels);
      float* to = out + r * row;
      if (first <= last) {
        std::memcpy(to, in + first, static_cast<std::size_t>(row) * sizeof(float));
        continue;
      }
      for (std::int64_t j = 0; j < d.cols; ++j)
        std::memcpy(to + j * d.channels, in + first - j * d.channels,
                    static_cast<std::size_t>(d.channels) * sizeof(float));
    }
  });
}

}  // namespace tandem::backend
