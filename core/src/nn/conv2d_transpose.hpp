// Conv2DTranspose: Keras' transposed convolution (TensorFlow's conv2d_transpose), channels_last:
// (batch, rows, cols, in) -> (batch, out_rows, out_cols, filters), kernel (kh, kw, filters, in),
// bias (filters,). The forward is the gradient of a Conv2D with respect to its input: the
// Conv2D from the output image (filters channels) to this layer's input (`in` channels), with
// the same kernel, strides, dilation and padding. So the layer is written on its backend's
// Convolution2D with the roles turned around:
//   forward           y  = conv.backward_data(x, kernel) + bias
//   kernel gradient   dK = conv.backward_weights(input = dz, output gradient = x)
//   input gradient    dx = conv.forward(dz, kernel)
// and the CPU (oneDNN) and CUDA (cuDNN or im2col) backends compute it with no code of its own.
// With a depth window (Conv3DTranspose, below) the same layer over volumes: (batch, depth, rows,
// cols, in) -> (batch, out_depth, out_rows, out_cols, filters), kernel (kd, kh, kw, filters, in).
// Output size along an axis of length n, window span s_k = (k - 1)·dilation + 1 (Keras'
// deconv_output_length): without output_padding, n·stride + max(s_k - stride, 0) for "valid"
// and n·stride for "same"; with it, (n - 1)·stride + s_k - 2·pad + output_padding, pad 0 for
// "valid" and s_k / 2 for "same".
#pragma once

#include <memory>
#include <optional>

#include "backend/ops.hpp"
#include "nn/conv2d.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct Conv2DTransposeOptions {
  Conv2DOptions conv;                 // filters, kernel_size, strides, padding, dilation, ...
  std::optional<Pair> output_padding;  // each < its stride (a volume's depth: conv.depth's)
};

class Conv2DTranspose : public Layer, public WeightRules, public KerasTwoDefinitions {
 public:
  Conv2DTranspose(std::string name, Conv2DTransposeOptions options);
  ~Conv2DTranspose() override;
  std::string class_name() const override { return "Conv2DTranspose"; }
  /// input_shape is (rows, cols, channels), or (depth, rows, cols, channels) with a depth
  /// window. Throws ShapeError naming the layer for another rank or a geometry whose output
  /// would be empty.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override {
    options_.conv.activation = keras2_definition(options_.conv.activation);
  }

 protected:
  Conv2DTransposeOptions options_;

 private:
  /// The backend's convolution from this layer's output image to its input (made again after a
  /// backend change).
  backend::Convolution2D& convolution();

  /// Keras' size key: the pair, or with a depth window the triple (depth first).
  nlohmann::json spatial_json(const Pair& p, std::int64_t depth_value) const;
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }

  Shape input_shape_;   // ([depth,] rows, cols, in)
  Shape output_shape_;  // ([out_depth,] out_rows, out_cols, filters)
  Parameter kernel_, bias_;
  Tensor input_;   // the last forward's input (shared storage, not a copy)
  Tensor pre_;     // before the activation, kept for activations other than linear and relu
  Tensor output_;  // activation(pre_)
  Tensor ones_;    // `filters` ones: the bias is added as y·1 + bias
  Tensor grad_pre_, grad_input_;
  backend::window::Geometry geometry_;  // of the Conv2D output image -> input
  std::unique_ptr<backend::Convolution2D> convolution_;
  const backend::Backend* convolution_backend_ = nullptr;  // the backend that made it
};

/// Keras' Conv3DTranspose: the transposed convolution with a depth window (options.conv.depth).
class Conv3DTranspose : public Conv2DTranspose {
 public:
  /// options.conv.depth must be set.
  Conv3DTranspose(std::string name, Conv2DTransposeOptions options);
  std::string class_name() const override { return "Conv3DTranspose"; }
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
