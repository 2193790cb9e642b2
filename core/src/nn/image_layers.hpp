// The layers that move whole cells of images (batch, rows, cols, channels), no arithmetic but
// the upsampling gradient's sums, as Keras defines them:
//   ZeroPadding2D  zeros around each image: (top, bottom) rows and (left, right) columns
//   Cropping2D     the same amounts cut away
//   UpSampling2D   each cell repeated over a (rows, cols) block (nearest neighbour)
// Their gradients: the block back out (padding), into zeros (cropping), block sums
// (upsampling). Computed on the backend (copy_image_block, upsample_*). Ownership and threads:
// as every layer's.
#pragma once

#include <array>

#include "backend/ops.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// (top, bottom, left, right).
using Borders = std::array<std::int64_t, 4>;

/// ZeroPadding2D (pad = true) or Cropping2D.
class ImageBorder : public Layer {
 public:
  ImageBorder(std::string name, bool pad, Borders borders)
      : Layer(std::move(name)), pad_(pad), borders_(borders) {}
  std::string class_name() const override { return pad_ ? "ZeroPadding2D" : "Cropping2D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  /// The block shared by the input and the output image, from input to output.
  backend::ImageBlock block(std::int64_t batch) const;

  bool pad_;
  Borders borders_;
  Shape input_shape_, output_shape_;
  Tensor output_, grad_input_;
};

class UpSampling2D : public Layer {
 public:
  UpSampling2D(std::string name, std::int64_t row_factor, std::int64_t col_factor)
      : Layer(std::move(name)), factors_{row_factor, col_factor} {}
  std::string class_name() const override { return "UpSampling2D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  backend::UpsampleDesc desc(std::int64_t batch) const;

  std::array<std::int64_t, 2> factors_;
  Shape input_shape_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
