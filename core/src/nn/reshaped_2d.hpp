// Layers computed by a 2-D layer on a view of their input with other axes, so that each sliding
// window is written once (Conv2D, Pooling2D) and these layers are shapes and names around it:
//   Conv1D             (steps, channels) seen as (1, steps, channels); kernel (k, in, filters),
//                      the memory of Conv2D's (1, k, in, filters)
//   Conv1DTranspose    the same view, a Conv2DTranspose of kernel (1, k); kernel (k, filters,
//                      in), the memory of Conv2DTranspose's (1, k, filters, in)
//   DepthwiseConv1D,   the same view, a DepthwiseConv2D (SeparableConv2D) of kernel (1, k);
//   SeparableConv1D    their kernels' memory as Conv1D's
//   MaxPooling1D,      (steps, channels) as (1, steps, channels), windows (1, pool)
//   AveragePooling1D
//   GlobalMaxPooling1D one window over every step (a Pooling2D of (1, steps));
//   GlobalMaxPooling2D one over every cell (rows, cols); keepdims keeps the pooled axes as 1
//   GlobalMaxPooling3D a volume's cells as one row (1, depth · rows · cols)
//   ZeroPadding1D,     (steps, channels) as (1, steps, channels), a ZeroPadding2D (Cropping2D)
//   Cropping1D         of (0, 0) rows and (left, right) columns
//   UpSampling1D       (steps, channels) as (1, steps, channels), an UpSampling2D of (1, size)
//   RepeatVector       (features) as (1, 1, features), an UpSampling2D of (n, 1): (n, features)
// (CenterCrop, nn/resizing.hpp, is a Cropping2D or a Resizing on the same axes.)
// Each answers to its Keras class name and config (1-D sizes as one-element lists); the inner
// layer has the same name, and a shape error it raises says which 2-D view it saw. The views
// share storage (no copies). Ownership and threads: as every layer's; the inner layer is owned
// and runs on this layer's backend.
#pragma once

#include <memory>
#include <string>

#include "nn/activation_fn.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv2d_transpose.hpp"
#include "nn/image_layers.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/pooling.hpp"
#include "nn/separable_conv2d.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// The kernel and bias rules of a 1-D convolution computed by a 2-D one (Conv1D,
/// Conv1DTranspose, DepthwiseConv1D and SeparableConv1D's two kernels): taken out of the inner
/// layer's options, built for Keras' own kernel shape (so a constraint's `axis` means what it
/// means in Keras), and that kernel shape given to the inner layer's kernel (the same memory).
struct OneDimensionalRules {
  /// Moves the rules out of `options` (the inner layer then has none): its kernel's, whose keys
  /// Keras names `kernel_key` + "_constraint" ("kernel", "depthwise", "pointwise"), and with
  /// `with_bias` its bias'.
  explicit OneDimensionalRules(Conv2DOptions& options, std::string kernel_key = "kernel",
                               bool with_bias = true);
  /// Views `kernel` (an inner layer's) as `kernel_shape` and builds the rules for it and a bias
  /// of `filters`; a shape error names `label`.
  void build(Parameter& kernel, const Shape& kernel_shape, std::int64_t filters,
             const std::string& label);
  /// `kernel` and, when given (use_bias), `bias` with their rules.
  std::vector<RuledWeight> ruled_weights(Parameter* kernel, Parameter* bias) const;
  /// The rules' config entries written into `config`.
  void write(nlohmann::json& config) const;

  std::string kernel_key;
  bool with_bias;
  WeightConstraint kernel_constraint, bias_constraint;
  WeightRegularizer kernel_regularizer, bias_regularizer;
};

class Reshaped2D : public Layer {
 public:
  using Layer::Layer;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override {
    return inner_ ? inner_->parameters() : std::vector<Parameter*>{};
  }
  /// After build: the 2-D layer (owned by this one) and the per-sample view it computes on.
  Layer& inner() { return *inner_; }
  const Shape& inner_input_shape() const { return inner_input_; }
  const Shape& inner_output_shape() const { return inner_output_; }

 protected:
  /// Builds `inner` on the per-sample view `inner_input` of `input_shape`; its output is seen
  /// as `output_shape` (nullopt: the inner output without its leading 1, a 1-D layer's).
  /// Returns the per-sample output shape.
  Shape build_inner(std::unique_ptr<Layer> inner, const Shape& input_shape,
                    const Shape& inner_input, std::optional<Shape> output_shape, Rng& init);
  /// The inner layer's config with its 2-D sizes (kernel_size, strides, dilation_rate,
  /// pool_size) as Keras' 1-D one-element lists (the second of each pair).
  nlohmann::json one_dimensional_config(nlohmann::json inner_config) const;
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }

  std::unique_ptr<Layer> inner_;

 private:
  Shape input_shape_, inner_input_, inner_output_, output_shape_;
  Tensor output_, grad_input_;
};

/// What the 1-D convolutions (Conv1D, DepthwiseConv1D, SeparableConv1D) share: with `causal`
/// padding the steps are padded on the left by (k - 1) * dilation zeros and convolved without
/// padding, so output step t sees input steps up to t only (Keras'); the convolution itself is
/// the subclass' 2-D layer on the view of one row, with its constraints and regularizers built
/// for Keras' kernel shapes (OneDimensionalRules; the inner layer has none), so a constraint's
/// `axis` means what it means in Keras.
class Convolution1D : public Reshaped2D, public WeightRules, public KerasTwoDefinitions {
 public:
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;

 protected:
  /// `window` as the inner layer's options: kernel (1, k), strides (1, s), dilation (1, d).
  Convolution1D(std::string name, const Conv2DOptions& window, bool causal);
  /// Builds inner_ on `seen` (steps, channels: the input after any causal padding) and the rules
  /// for Keras' kernels of `channels` inputs; returns the per-sample output shape.
  virtual Shape build_convolution(const Shape& seen, Rng& init) = 0;
  /// `inner_config` (the 2-D layer's) in Keras' 1-D form, with this layer's trainable and
  /// padding ("causal" where it pads so).
  nlohmann::json convolution_config(nlohmann::json inner_config) const;

 private:
  /// The block of the input's steps inside the left-padded sequence, for a batch.
  backend::ImageBlock steps_block(std::int64_t batch) const;

  bool causal_;
  std::int64_t left_pad_ = 0;   // causal: (k - 1) * dilation
  Shape input_shape_;           // (steps, channels), before any causal padding
  Tensor padded_, grad_input_;  // causal: the padded input, the input's gradient
};

/// Conv1D: kernel (k, in, filters), the memory of Conv2D's (1, k, in, filters).
class Conv1D : public Convolution1D {
 public:
  /// `options` as a Conv2D's of kernel (1, k), strides (1, s), dilation (1, d).
  Conv1D(std::string name, Conv2DOptions options, bool causal)
      : Conv1D(std::move(name), std::move(options), causal, false) {}
  std::string class_name() const override { return "Conv1D"; }
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override {
    options_.activation = keras2_definition(options_.activation);
  }

 protected:
  /// With `depthwise`, a DepthwiseConv2D on the row (DepthwiseConv1D), as DepthwiseConv2D is a
  /// Conv2D.
  Conv1D(std::string name, Conv2DOptions options, bool causal, bool depthwise);

 private:
  Shape build_convolution(const Shape& seen, Rng& init) override;

  bool depthwise_;
  Conv2DOptions options_;  // the inner layer's: without the rules below
  OneDimensionalRules rules_;
};

/// DepthwiseConv1D: each channel convolved with its own depth_multiplier filters; kernel (k, in,
/// depth_multiplier), the memory of DepthwiseConv2D's (1, k, in, depth_multiplier).
class DepthwiseConv1D : public Conv1D {
 public:
  /// `options` as a DepthwiseConv2D's of kernel (1, k), strides (1, s), dilation (1, d).
  DepthwiseConv1D(std::string name, Conv2DOptions options, bool causal)
      : Conv1D(std::move(name), std::move(options), causal, true) {}
  std::string class_name() const override { return "DepthwiseConv1D"; }
};

/// SeparableConv1D: a DepthwiseConv1D then a pointwise Conv1D of kernel 1; depthwise_kernel (k,
/// in, depth_multiplier), pointwise_kernel (1, in · depth_multiplier, filters), bias (filters):
/// the memory of SeparableConv2D's.
class SeparableConv1D : public Convolution1D {
 public:
  /// `options` as a SeparableConv2D's of kernel (1, k), strides (1, s), dilation (1, d).
  SeparableConv1D(std::string name, SeparableConv2DOptions options, bool causal);
  std::string class_name() const override { return "SeparableConv1D"; }
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;

  void use_keras2_definitions() override {
    options_.pointwise.activation = keras2_definition(options_.pointwise.activation);
  }

 private:
  Shape build_convolution(const Shape& seen, Rng& init) override;

  SeparableConv2DOptions options_;  // the inner SeparableConv2D's: without the rules below
  OneDimensionalRules depthwise_rules_, pointwise_rules_;
};

/// Conv1DTranspose: Keras' transposed 1-D convolution (the gradient of a Conv1D with respect to
/// its input), Conv2DTranspose's arithmetic and output lengths along the steps. Its constraints
/// and regularizers are its own, built for Keras' kernel (k, filters, in), as Conv1D's.
class Conv1DTranspose : public Reshaped2D, public WeightRules, public KerasTwoDefinitions {
 public:
  /// `options` as a Conv2DTranspose's of kernel (1, k), strides (1, s), dilation (1, d),
  /// output_padding (0, p).
  Conv1DTranspose(std::string name, Conv2DTransposeOptions options);
  std::string class_name() const override { return "Conv1DTranspose"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;
  void use_keras2_definitions() override {
    options_.conv.activation = keras2_definition(options_.conv.activation);
  }

 private:
  Conv2DTransposeOptions options_;  // the inner layer's: without the rules below
  OneDimensionalRules rules_;
};

/// MaxPooling1D / AveragePooling1D.
class Pooling1D : public Reshaped2D {
 public:
  /// `options` as a Pooling2D's of windows (1, pool), strides (1, s).
  Pooling1D(std::string name, Pooling2DOptions options)
      : Reshaped2D(std::move(name)), options_(options) {}
  std::string class_name() const override {
    return options_.kind == PoolKind::max ? "MaxPooling1D" : "AveragePooling1D";
  }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  Pooling2DOptions options_;
};

/// GlobalMaxPooling1D (spatial_axes 1), GlobalMaxPooling2D (2), GlobalMaxPooling3D (3).
class GlobalMaxPooling : public Reshaped2D {
 public:
  GlobalMaxPooling(std::string name, int spatial_axes, bool keepdims)
      : Reshaped2D(std::move(name)), spatial_axes_(spatial_axes), keepdims_(keepdims) {}
  std::string class_name() const override {
    return "GlobalMaxPooling" + std::to_string(spatial_axes_) + "D";
  }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  int spatial_axes_;
  bool keepdims_;
};

/// ZeroPadding1D (pad) or Cropping1D: `left` and `right` steps added as zeros or cut away.
class SequenceBorder : public Reshaped2D {
 public:
  SequenceBorder(std::string name, bool pad, std::int64_t left, std::int64_t right)
      : Reshaped2D(std::move(name)), pad_(pad), left_(left), right_(right) {}
  std::string class_name() const override { return pad_ ? "ZeroPadding1D" : "Cropping1D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  bool pad_;
  std::int64_t left_, right_;
};

/// UpSampling1D: each step repeated `size` times.
class UpSampling1D : public Reshaped2D {
 public:
  UpSampling1D(std::string name, std::int64_t size) : Reshaped2D(std::move(name)), size_(size) {}
  std::string class_name() const override { return "UpSampling1D"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  std::int64_t size_;
};

/// RepeatVector: a vector (features) repeated as `n` steps, (n, features); its gradient the sum
/// over the steps.
class RepeatVector : public Reshaped2D {
 public:
  RepeatVector(std::string name, std::int64_t n) : Reshaped2D(std::move(name)), n_(n) {}
  std::string class_name() const override { return "RepeatVector"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  nlohmann::json config() const override;

 private:
  std::int64_t n_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
