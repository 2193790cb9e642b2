// Decoding and resizing of image files for the "images" dataset: JPEG through libjpeg-turbo's
// TurboJPEG API, PNG through libpng's simplified API, chosen by the file's first bytes (not its
// name). Pixels are 8-bit, rows top to bottom, channels interleaved (grayscale, RGB or RGBA).
//
// Stateless functions; any thread may call them at once (each call uses its own decoder, a
// TurboJPEG handle kept per thread). Errors are DataError naming `name` (the file).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::data {

enum class ColorMode { grayscale, rgb, rgba };
/// 1, 3 or 4.
int channels_of(ColorMode mode);

enum class ImageFormat { jpeg, png };

/// Which format `bytes` start like; throws DataError naming `name` for anything else (saying
/// what the bytes look like when Tandem knows: GIF, BMP, WebP, TIFF).
ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes, const std::string& name);

struct DecodedImage {
  int rows = 0, cols = 0, channels = 0;
  std::vector<std::uint8_t> pixels;  // rows * cols * channels
};

/// Decodes a whole JPEG or PNG file held in `bytes` into `mode`'s channels (colour images
/// become grayscale by ITU-R 601 luma; alpha is dropped, or opaque where the file has none).
/// A JPEG is decoded smaller by its DCT scaling, 1/n for the largest n of 8, 4 and 2 for which
/// the window a resize to target_rows x target_cols reads (centred_window) is at least n times
/// the target each way — PIL's draft mode's rule — so the resize reads fewer pixels; a target of
/// 0 decodes full size.
/// A truncated or corrupt file is a DataError, also where libjpeg would only warn and fill the
/// rest with grey.
DecodedImage decode_image(std::span<const std::uint8_t> bytes, ColorMode mode,
                          const std::string& name, int target_rows = 0, int target_cols = 0,
                          bool keep_aspect = false);

/// The region of an image a resize reads: the whole image, or its largest centred window of the
/// target's aspect ratio (Keras' crop_to_aspect_ratio).
struct CropWindow {
  int row = 0, col = 0, rows = 0, cols = 0;
};
CropWindow centred_window(int rows, int cols, int target_rows, int target_cols, bool keep_aspect);

/// Resizes `window` of `image` to rows x cols by bilinear interpolation with half-pixel centres
/// (TensorFlow's resize without antialiasing, PyTorch's interpolate with align_corners=False),
/// writing rows * cols * channels floats, each pixel value times `scale`, to `out`.
void resize_bilinear(const DecodedImage& image, CropWindow window, int rows, int cols, float scale,
                     float* out);

}  // namespace tandem::data

TANDEM_INTERNAL_API_END
