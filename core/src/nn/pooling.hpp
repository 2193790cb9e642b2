// MaxPooling2D and AveragePooling2D, Keras semantics, channels_last:
// (batch, rows, cols, channels) -> (batch, out_rows, out_cols, channels); with a depth window
// MaxPooling3D and AveragePooling3D, (batch, depth, rows, cols, channels) -> (batch, out_depth,
// out_rows, out_cols, channels). pool_size, strides
// (default: pool_size), padding "valid" or "same" (TensorFlow's SAME: padded cells never win a
// max and are left out of an average, as oneDNN's pooling_avg_exclude_padding does).
//
// Computes on its backend's Pooling2D (oneDNN on the CPU), made once per backend for the
// layer's geometry.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "backend/ops.hpp"
#include "nn/spatial.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

using PoolKind = backend::PoolKind;

struct Pooling2DOptions {
  PoolKind kind = PoolKind::max;
  Pair pool_size{2, 2};
  Pair strides{2, 2};  // Keras' default strides=None means pool_size; the factory resolves it
  Padding padding = Padding::valid;
  std::optional<DepthWindow> depth;  // a volume's first axis (the 3-D layers; no dilation)
};

class Pooling2D : public Layer, public ReluConsumer {
 public:
  Pooling2D(std::string name, Pooling2DOptions options);
  ~Pooling2D() override;
  /// "MaxPooling2D" or "AveragePooling2D" ("...3D" with a depth window).
  std::string class_name() const override;
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;
  /// Max pooling takes over the relu of the layer before it (nn/layer_extensions.hpp).
  bool can_apply_input_relu() const override { return options_.kind == PoolKind::max; }
  void set_apply_input_relu(bool apply) override { input_relu_ = apply; }

 private:
  /// The backend's pooling for this layer's geometry (made again after a backend change).
  backend::Pooling2D& pooling();

  Pooling2DOptions options_;
  nlohmann::json spatial_json(const Pair& p, std::int64_t depth_value) const;

  Shape input_shape_;   // ([depth,] rows, cols, channels)
  Shape output_shape_;  // ([out_depth,] out_rows, out_cols, channels)
  Window depth_{1, 0, 0}, rows_, cols_;
  std::int64_t last_batch_ = -1;  // the batch size of the last forward (-1: none yet)
  Tensor output_, grad_input_;
  Tensor masked_grad_;       // the pooled gradient masked by output > 0 (input_relu_)
  bool input_relu_ = false;  // the input is z of a relu the previous layer handed over
  backend::window::Geometry geometry_;
  std::unique_ptr<backend::Pooling2D> pooling_;
  const backend::Backend* pooling_backend_ = nullptr;  // the backend that made it
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
