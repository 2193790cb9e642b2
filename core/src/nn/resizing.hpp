// Keras' Resizing layer: each image (rows, cols, channels) resized to (height, width) as
// tf.image.resize does (half-pixel centres, no antialiasing), bilinear or nearest; with
// crop_to_aspect_ratio the largest centred window of the target's aspect ratio is resized
// (Keras' smart_resize, which RandomCrop's inference also is). Computed by the backend's
// warp_images (backend/image_geometry.hpp, WarpDesc::resize), so it runs on every backend and
// its gradient flows back through the same weights. Keras 3's pad_to_aspect_ratio pads each
// image to the target's aspect ratio with fill_value (centred) and resizes that. The other
// interpolations (bicubic, area, lanczos, gaussian, mitchellcubic) are refused where the config
// is read. Ownership and threads: as every layer's (tandem/layer.hpp).
//
// Keras' CenterCrop: the centred (height, width) window of each image (its first row
// floor((rows - height) / 2), as Keras takes it), or where the image is smaller than the target
// along an axis, Keras' smart_resize to it (Resizing's bilinear crop_to_aspect_ratio). The image
// size is known at build (a model built for its data), so the layer is one or the other: a
// Cropping2D or a Resizing, computed on the same axes (nn/reshaped_2d.hpp's delegation).
#pragma once

#include <string>

#include "backend/image_geometry.hpp"
#include "nn/reshaped_2d.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// What of an image a resize reads: all of it, the largest centred window of the target's
/// aspect ratio (Keras' crop_to_aspect_ratio, smart_resize), or the image centred in the
/// smallest region of that ratio that holds it, the rest `fill_value` (pad_to_aspect_ratio).
enum class ResizeWindow { whole, crop_to_aspect_ratio, pad_to_aspect_ratio };

/// The warp that resizes `batch` images (rows, cols, channels) to (out_rows, out_cols) with
/// `interpolation` (WarpDesc::bilinear or nearest) from `window` (`fill_value` where it pads).
/// Edges clamp.
backend::WarpDesc resize_warp(std::int64_t batch, const Shape& image, std::int64_t out_rows,
                              std::int64_t out_cols, ResizeWindow window, int interpolation,
                              float fill_value = 0);

class Resizing : public Layer {
 public:
  Resizing(std::string name, std::int64_t height, std::int64_t width, int interpolation,
           ResizeWindow window, float fill_value = 0);
  std::string class_name() const override { return "Resizing"; }
  /// Throws ShapeError naming the layer unless input_shape is (rows, cols, channels).
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::int64_t height_, width_;
  int interpolation_;
  ResizeWindow window_;
  float fill_value_;
  Shape input_shape_;
  backend::WarpDesc last_;
  Tensor draws_, output_, grad_input_;
};

class CenterCrop : public Reshaped2D {
 public:
  CenterCrop(std::string name, std::int64_t height, std::int64_t width);
  std::string class_name() const override { return "CenterCrop"; }
  /// Throws ShapeError naming the layer unless input_shape is (rows, cols, channels).
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  std::int64_t height_, width_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
