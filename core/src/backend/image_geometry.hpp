// Descriptors of the image operations (backend/ops.hpp: copy_image_block, upsample_*,
// flip_images, warp_images, adjust_images), shared by the CPU backend and the CUDA kernels.
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

/// A random geometric transform of each sample's image (batch, rows, cols, channels) into
/// (batch, out_rows, out_cols, channels): Keras' RandomTranslation, RandomRotation, RandomZoom
/// and RandomCrop, and RandomCrop's inference resize. Each output pixel (i, j) — indices, not
/// centres, as TensorFlow's ImageProjectiveTransformV3 — reads the input at the point a
/// per-sample 3x3 projective matrix maps it to (math::warp_matrix, from the sample's `draws`:
/// kDraws uniform values in [0, 1) per sample), interpolated and filled as Keras does.
struct WarpDesc {
  static constexpr int kDraws = 2;
  enum Kind : int { translate, rotate, zoom, crop, resize };
  enum Interpolation : int { bilinear, nearest };
  enum Fill : int { reflect, wrap, constant, nearest_edge };
  std::int64_t batch = 0, rows = 0, cols = 0, channels = 0, out_rows = 0, out_cols = 0;
  // The region of each input image the transform reads (fill modes apply at its edges): the
  // whole image, or for resize the centred window of the output's aspect ratio, or the image
  // centred in a larger region of that ratio (src_row, src_col negative), whose pixels outside
  // the image read fill_value.
  std::int64_t src_row = 0, src_col = 0, src_rows = 0, src_cols = 0;
  int kind = translate;
  // Factor ranges: translate, zoom (height, width); rotate (lo0, hi0) in turns; the width's
  // range is unused when width_follows_height (RandomZoom without width_factor).
  float lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
  bool width_follows_height = false;
  int interpolation = bilinear;
  int fill = reflect;
  float fill_value = 0;
};

/// A random colour adjustment of each sample's image (batch, rows, cols, channels): Keras'
/// RandomContrast (each channel's values pulled to or pushed from its mean by a factor drawn in
/// [lo, hi]) and RandomBrightness (a delta drawn in [lo, hi] times the value range added), the
/// result clipped to [value_lo, value_hi]. One draw per sample.
struct AdjustDesc {
  enum Kind : int { contrast, brightness };
  std::int64_t batch = 0, rows = 0, cols = 0, channels = 0;
  int kind = contrast;
  float lo = 0, hi = 0;
  float value_lo = 0, value_hi = 255;
};

}  // namespace tandem::backend
