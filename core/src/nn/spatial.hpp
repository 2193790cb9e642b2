// Sliding-window geometry shared by Conv2D and the pooling layers: output sizes and paddings
// exactly as Keras (TensorFlow) computes them, channels_last.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

enum class Padding { valid, same };

/// Checks a per-sample image shape (rows, cols, channels) with positive sizes; `who` names the
/// layer in the ShapeError ("layer 'conv2d' (Conv2D)").
inline void check_image_shape(const Shape& input_shape, const std::string& who) {
  if (input_shape.size() != 3)
    throw ShapeError(who + " expects inputs (None, rows, cols, channels), got " +
                     shape_to_string(input_shape, true));
  for (std::int64_t d : input_shape)
    if (d <= 0)
      throw ShapeError(who + " needs positive input sizes, got " +
                       shape_to_string(input_shape, true));
}

/// Checks a per-sample volume shape (depth, rows, cols, channels) with positive sizes (Conv3D,
/// the 3-D pooling layers); `who` as check_image_shape's.
inline void check_volume_shape(const Shape& input_shape, const std::string& who) {
  if (input_shape.size() != 4)
    throw ShapeError(who + " expects inputs (None, depth, rows, cols, channels), got " +
                     shape_to_string(input_shape, true));
  for (std::int64_t d : input_shape)
    if (d <= 0)
      throw ShapeError(who + " needs positive input sizes, got " +
                       shape_to_string(input_shape, true));
}

/// The input a layer over `axes` spatial axes takes, for its errors: "(None, steps, channels)",
/// "(None, rows, cols, channels)", "(None, depth, rows, cols, channels)".
inline std::string spatial_axes_shape(int axes) {
  if (axes == 1) return "(None, steps, channels)";
  if (axes == 2) return "(None, rows, cols, channels)";
  return "(None, depth, rows, cols, channels)";
}

/// Checks the per-sample input of a sliding window: an image's (check_image_shape) or, with
/// `volume`, a volume's (check_volume_shape). Returns the rows' axis: 0, or 1 after the depth.
inline std::size_t check_window_input(const Shape& input_shape, bool volume,
                                      const std::string& who) {
  if (volume) {
    check_volume_shape(input_shape, who);
    return 1;
  }
  check_image_shape(input_shape, who);
  return 0;
}

inline std::string padding_name(Padding p) {
  return p == Padding::valid ? "valid" : "same";
}

/// A pair of sizes along (rows, cols), Keras' `(kh, kw)` tuples.
using Pair = std::array<std::int64_t, 2>;

inline nlohmann::json pair_json(const Pair& p) {
  return nlohmann::json::array({p[0], p[1]});
}

/// A window along a volume's depth axis, the first of its three spatial axes (Conv3D's
/// kernel_size[0], strides[0] and dilation_rate[0]; the 3-D pooling layers'): the image layers
/// have none.
struct DepthWindow {
  std::int64_t size = 1;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t output_padding = 0;  // Conv3DTranspose's along depth, where it has one
};

/// Keras' triple for a volume's window, (depth, rows, cols), from its depth part and its pair.
inline nlohmann::json triple_json(std::int64_t depth, const Pair& p) {
  return nlohmann::json::array({depth, p[0], p[1]});
}

/// A window's sizes in messages: "(rows, cols)", or a volume's "(depth, rows, cols)".
inline std::string sizes_string(const Pair& p, bool volume, std::int64_t depth_value) {
  return volume ? shape_to_string({depth_value, p[0], p[1]}) : shape_to_string({p[0], p[1]});
}

/// One axis of a sliding window: output length and the zero padding before and after.
struct Window {
  std::int64_t out = 0;
  std::int64_t pad_before = 0;
  std::int64_t pad_after = 0;
};

/// Keras/TensorFlow geometry along one axis of length `in`, window `k` with `dilation`, `stride`.
/// valid: out = floor((in - span) / stride) + 1 (0 when the window is larger than the input,
/// span = (k - 1) * dilation + 1). same (TensorFlow's SAME): out = ceil(in / stride),
/// pad_total = max((out - 1) * stride + span - in, 0), pad_before = pad_total / 2 and the extra
/// one, if any, after.
inline Window window_along(std::int64_t in, std::int64_t k, std::int64_t stride,
                           std::int64_t dilation, Padding padding) {
  const std::int64_t span = (k - 1) * dilation + 1;
  if (padding == Padding::valid) return {in >= span ? (in - span) / stride + 1 : 0, 0, 0};
  const std::int64_t out = (in + stride - 1) / stride;
  const std::int64_t total = std::max<std::int64_t>((out - 1) * stride + span - in, 0);
  return {out, total / 2, total - total / 2};
}

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
