// Conv2D: y = activation(conv(x, kernel) + bias), Keras semantics, channels_last:
// (batch, rows, cols, in) -> (batch, out_rows, out_cols, filters), kernel (kh, kw, in, filters),
// bias (filters,). padding "valid" or "same" (TensorFlow's SAME), strides, dilation_rate, and
// Keras' `groups`: channels and filters in G groups, kernel (kh, kw, in / G, filters).
// DepthwiseConv2D (below) is the grouped convolution with one group per channel. With a depth
// window (Conv3D, below) the same layer convolves volumes: (batch, depth, rows, cols, in) ->
// (batch, out_depth, out_rows, out_cols, filters), kernel (kd, kh, kw, in / G, filters).
//
// Computes on its backend's Convolution2D (oneDNN on the CPU), made once per backend for the
// layer's geometry; the activation runs as one operation after it (a relu in place, on its
// output, or handed to the next layer).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/constraint.hpp"
#include "nn/initializer.hpp"
#include "nn/regularizer.hpp"
#include "nn/spatial.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct Conv2DOptions {
  std::int64_t filters = 0;
  Pair kernel_size{1, 1};
  Pair strides{1, 1};
  Padding padding = Padding::valid;
  Pair dilation_rate{1, 1};
  ActivationKind activation = ActivationKind::linear;
  bool use_bias = true;
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
  WeightConstraint kernel_constraint, bias_constraint;
  WeightRegularizer kernel_regularizer, bias_regularizer;
  std::int64_t groups = 1;            // divides the input channels and the filters
  std::int64_t depth_multiplier = 0;  // > 0: depthwise (groups = channels, filters = in · it)
  std::optional<DepthWindow> depth;   // a volume's first axis (Conv3D); none for images
};

class Conv2D : public Layer, public ReluProducer, public WeightRules, public KerasTwoDefinitions {
 public:
  Conv2D(std::string name, Conv2DOptions options);
  ~Conv2D() override;
  std::string class_name() const override { return "Conv2D"; }
  /// input_shape is (rows, cols, channels), or (depth, rows, cols, channels) with a depth
  /// window. Throws ShapeError naming the layer for another rank, or a kernel larger than the
  /// (unpadded) input with "valid" padding.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  /// A relu Conv2D lets the next layer apply its relu (nn/layer_extensions.hpp).
  bool has_output_relu() const override { return options_.activation == ActivationKind::relu; }
  void set_output_relu_external(bool external) override { relu_external_ = external; }
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override {
    options_.activation = keras2_definition(options_.activation);
  }

 protected:
  /// The keys Conv2D, Conv3D and DepthwiseConv2D share in their Keras configs.
  nlohmann::json common_config() const;
  /// Keras' size key: the pair, or with a depth window the triple (depth first).
  nlohmann::json spatial_json(const Pair& p, std::int64_t depth_value) const;
  DepthWindow depth_window() const { return options_.depth.value_or(DepthWindow{}); }
  Conv2DOptions options_;

 private:
  /// The backend's convolution for this layer's geometry (made again after a backend change).
  backend::Convolution2D& convolution();

  Shape input_shape_;   // ([depth,] rows, cols, in)
  Shape output_shape_;  // ([out_depth,] out_rows, out_cols, filters)
  Window depth_{1, 0, 0}, rows_, cols_;
  Parameter kernel_, bias_;
  Tensor input_;                // the last forward's input (shared storage, not a copy)
  Tensor pre_;                  // conv + bias, kept only for activations other than linear and relu
  bool relu_external_ = false;  // outputs z; backward() receives dL/dz (the next layer's job)
  Tensor output_;               // activation(pre_)
  Tensor grad_pre_, grad_input_;
  backend::window::Geometry geometry_;
  std::unique_ptr<backend::Convolution2D> convolution_;
  const backend::Backend* convolution_backend_ = nullptr;  // the backend that made it
};

/// Keras' DepthwiseConv2D: each input channel convolved with its own depth_multiplier filters,
/// output channel c · multiplier + m; weights depthwise_kernel (kh, kw, in, multiplier) and bias
/// (in · multiplier).
class DepthwiseConv2D : public Conv2D {
 public:
  /// options.depth_multiplier > 0; filters and groups follow from the input at build().
  DepthwiseConv2D(std::string name, Conv2DOptions options);
  std::string class_name() const override { return "DepthwiseConv2D"; }
  nlohmann::json config() const override;
};

/// Keras' Conv3D: the convolution with a depth window (options.depth set), channels_last.
class Conv3D : public Conv2D {
 public:
  /// options.depth must be set.
  Conv3D(std::string name, Conv2DOptions options);
  std::string class_name() const override { return "Conv3D"; }
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
