// Descriptors of the image operations that move whole cells (backend/ops.hpp: copy_image_block,
// upsample_*), shared by the CPU backend and the CUDA kernels.
//
// Header rules: no includes beyond the standard library's; compiles with nvcc -std=c++17.
#pragma once

#include <cstdint>

namespace tandem::backend {

/// A block of `rows` x `cols` cells (all channels) of each sample's image: from (src_row,
/// src_col) of src (batch, src_rows, src_cols, channels) to (dst_row, dst_col) of dst (batch,
/// dst_rows, dst_cols, channels): ZeroPadding2D's forward (into a zeroed dst) and its gradient
/// (the block back out), Cropping2D's the other way round.
struct ImageBlock {
  std::int64_t batch = 0, channels = 0;
  std::int64_t src_rows = 0, src_cols = 0, dst_rows = 0, dst_cols = 0;
  std::int64_t src_row = 0, src_col = 0, dst_row = 0, dst_col = 0;
  std::int64_t rows = 0, cols = 0;
};

/// Nearest-neighbour upsampling of images (batch, rows, cols, channels) by (row_factor,
/// col_factor): UpSampling2D.
struct UpsampleDesc {
  std::int64_t batch = 0, rows = 0, cols = 0, channels = 0;
  std::int64_t row_factor = 1, col_factor = 1;
};

/// Random flips of images (batch, rows, cols, channels), RandomFlip: sample n is mirrored
/// left-right when `horizontal` and its first draw is <= 0.5, upside down when `vertical` and
/// its second draw is <= 0.5 (the draws: two uniform values per sample, Backend::uniform_noise).
struct FlipDesc {
  std::int64_t batch = 0, rows = 0, cols = 0, channels = 0;
  bool horizontal = false, vertical = false;
};

}  // namespace tandem::backend
