#include "nn/conv2d_transpose.hpp"

#include <algorithm>

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// Keras' deconv_output_length along one axis.
std::int64_t transposed_length(std::int64_t in, std::int64_t k, std::int64_t stride,
                               std::int64_t dilation, Padding padding,
                               std::optional<std::int64_t> output_padding) {
  const std::int64_t span = (k - 1) * dilation + 1;
  if (!output_padding)
    return padding == Padding::valid ? in * stride + std::max<std::int64_t>(span - stride, 0)
                                     : in * stride;
  const std::int64_t pad = padding == Padding::valid ? 0 : span / 2;
  return (in - 1) * stride + span - 2 * pad + *output_padding;
}

}  // namespace

Conv2DTranspose::Conv2DTranspose(std::string name, Conv2DTransposeOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  kernel_.name = "kernel";
  bias_.name = "bias";
}

Conv2DTranspose::~Conv2DTranspose() = default;

Shape Conv2DTranspose::build(const Shape& input_shape, Rng& init) {
  const std::string who = "layer '" + name() + "' (Conv2DTranspose)";
  check_image_shape(input_shape, who);
  const Conv2DOptions& o = options_.conv;
  const Pair &k = o.kernel_size, &s = o.strides, &d = o.dilation_rate;
  if (o.filters <= 0 || k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0 || d[0] <= 0 || d[1] <= 0)
    throw ShapeError(who + " needs positive filters, kernel_size, strides and dilation_rate");
  Pair out{};
  backend::window::Axis axes[2];
  for (int a = 0; a < 2; ++a) {
    const auto extra = options_.output_padding
                           ? std::optional<std::int64_t>((*options_.output_padding)[a])
                           : std::nullopt;
    out[a] = transposed_length(input_shape[a], k[a], s[a], d[a], o.padding, extra);
    const Window w = window_along(out[a], k[a], s[a], d[a], o.padding);
    const std::string geometry = "kernel " + shape_to_string({k[0], k[1]}) + ", strides " +
                                 shape_to_string({s[0], s[1]}) + ", dilation_rate " +
                                 shape_to_string({d[0], d[1]}) + " and " + padding_name(o.padding) +
                                 " padding";
    if (out[a] <= 0)
      throw ShapeError(who + ": " + geometry + " give no output for the input " +
                       shape_to_string(input_shape, true));
    // Only an output_padding can make an output length that the convolution this layer
    // transposes would not map back to the input's (TensorFlow's conv2d_transpose refuses it).
    if (w.out != input_shape[a])
      throw ShapeError(who + ": output_padding " + std::to_string(extra.value_or(0)) + " along " +
                       (a == 0 ? "the height" : "the width") + " with " + geometry +
                       " makes an output of " + std::to_string(out[a]) +
                       ", which that convolution maps to " + std::to_string(w.out) +
                       ", not to the input's " + std::to_string(input_shape[a]) +
                       " (TensorFlow refuses it too)");
    axes[a] = {out[a], input_shape[a], k[a], s[a], d[a], w.pad_before};
  }
  input_shape_ = input_shape;
  const std::int64_t in = input_shape[2], filters = o.filters;
  output_shape_ = {out[0], out[1], filters};
  kernel_.value = Tensor({k[0], k[1], filters, in});
  kernel_.grad = Tensor({k[0], k[1], filters, in});
  options_.conv.kernel_initializer.fill(kernel_.value, init);
  options_.conv.kernel_constraint.build(kernel_.value.shape());
  if (o.use_bias) {
    bias_.value = Tensor({filters});
    bias_.grad = Tensor({filters});
    options_.conv.bias_initializer.fill(bias_.value, init);
    options_.conv.bias_constraint.build(bias_.value.shape());
  }
  geometry_ = {axes[0], axes[1], filters};
  convolution_.reset();
  return output_shape_;
}

backend::Convolution2D& Conv2DTranspose::convolution() {
  if (!convolution_ || convolution_backend_ != &ops()) {
    backend::ConvolutionDesc desc;
    desc.label = "layer '" + name() + "' (Conv2DTranspose)";
    desc.geometry = geometry_;
    desc.filters = input_shape_[2];
    desc.use_bias = false;
    convolution_ = ops().convolution(desc);
    convolution_backend_ = &ops();
  }
  return *convolution_;
}

const Tensor& Conv2DTranspose::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() != 4 || x.dim(1) != input_shape_[0] || x.dim(2) != input_shape_[1] ||
      x.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (Conv2DTranspose) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  backend::Backend& ops = this->ops();
  input_ = x;
  const ActivationKind act = options_.conv.activation;
  const bool keep_pre = act != ActivationKind::linear && act != ActivationKind::relu;
  Tensor& z = keep_pre ? pre_ : output_;
  convolution().backward_data(x, kernel_.value, z);
  const std::int64_t filters = options_.conv.filters;
  if (options_.conv.use_bias && x.dim(0) > 0) {
    ops.fill(ops.place(ones_, {filters}), 1.0f);
    ops.column_affine(z, ones_, &bias_.value, z, filters);
  }
  ops.place(output_, z.shape());
  if (x.dim(0) > 0 && act != ActivationKind::linear) ops.activation_forward(act, z, output_, filters);
  return output_;
}

const Tensor& Conv2DTranspose::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = input_.rank() == 4 ? input_.dim(0) : 0;
  const std::int64_t filters = options_.conv.filters;
  const Shape expected{batch, output_shape_[0], output_shape_[1], filters};
  if (input_.rank() != 4 || grad_output.shape() != expected)
    throw ShapeError("layer '" + name() + "' (Conv2DTranspose): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(expected));
  backend::Backend& ops = this->ops();
  const Tensor* dz = &grad_output;
  const ActivationKind act = options_.conv.activation;
  if (batch > 0 && act != ActivationKind::linear) {
    const Tensor& pre = act == ActivationKind::relu ? output_ : pre_;
    ops.activation_backward(act, pre, output_, grad_output,
                            ops.place(grad_pre_, grad_output.shape()), filters);
    dz = &grad_pre_;
  }
  if (!kernel_.grad.empty()) {  // a frozen layer on a device replica has no gradients
    convolution().backward_weights(*dz, input_, kernel_.grad, nullptr);
    if (options_.conv.use_bias) {
      if (batch > 0)
        ops.column_sums(*dz, filters, bias_.grad);
      else
        ops.fill(bias_.grad, 0.0f);
    }
  }
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  convolution().forward(*dz, kernel_.value, nullptr, grad_input_);
  return grad_input_;
}

std::vector<Parameter*> Conv2DTranspose::parameters() {
  if (options_.conv.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json Conv2DTranspose::config() const {
  const Conv2DOptions& o = options_.conv;
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"filters", o.filters},
          {"kernel_size", pair_json(o.kernel_size)},
          {"strides", pair_json(o.strides)},
          {"padding", padding_name(o.padding)},
          {"output_padding", options_.output_padding ? pair_json(*options_.output_padding)
                                                     : nlohmann::json(nullptr)},
          {"data_format", "channels_last"},
          {"dilation_rate", pair_json(o.dilation_rate)},
          {"activation", activation_name(o.activation)},
          {"use_bias", o.use_bias},
          {"kernel_initializer", o.kernel_initializer.config()},
          {"bias_initializer", o.bias_initializer.config()},
          {"kernel_regularizer", o.kernel_regularizer.config()},
          {"bias_regularizer", o.bias_regularizer.config()},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", o.kernel_constraint.config()},
          {"bias_constraint", o.bias_constraint.config()}};
}

std::vector<RuledWeight> Conv2DTranspose::ruled_weights() {
  Conv2DOptions& o = options_.conv;
  std::vector<RuledWeight> out{{&kernel_, &o.kernel_constraint, &o.kernel_regularizer}};
  if (o.use_bias) out.push_back({&bias_, &o.bias_constraint, &o.bias_regularizer});
  return out;
}

}  // namespace tandem::nn
