#include "nn/conv2d_transpose.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
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
  const std::string who = label();
  const Conv2DOptions& o = options_.conv;
  const bool volume = o.depth.has_value();
  const std::size_t first = check_window_input(input_shape, volume, who);  // the rows' axis
  const Pair &k = o.kernel_size, &s = o.strides, &d = o.dilation_rate;
  const DepthWindow z = o.depth.value_or(DepthWindow{});
  if (o.filters <= 0 ||
      std::min({k[0], k[1], s[0], s[1], d[0], d[1], z.size, z.stride, z.dilation}) <= 0)
    throw ShapeError(who + " needs positive filters, kernel_size, strides and dilation_rate");
  // The transposed axes in order: (depth,) rows, cols.
  struct Along {
    std::int64_t in, kernel, stride, dilation, extra;
    const char* name;
  };
  std::vector<Along> along;
  const Pair extra = options_.output_padding.value_or(Pair{0, 0});
  if (volume)
    along.push_back({input_shape[0], z.size, z.stride, z.dilation, z.output_padding, "the depth"});
  along.push_back({input_shape[first], k[0], s[0], d[0], extra[0], "the height"});
  along.push_back({input_shape[first + 1], k[1], s[1], d[1], extra[1], "the width"});
  const std::string geometry = "kernel " + sizes_string(k, volume, z.size) + ", strides " +
                               sizes_string(s, volume, z.stride) + ", dilation_rate " +
                               sizes_string(d, volume, z.dilation) + " and " +
                               padding_name(o.padding) + " padding";
  std::vector<backend::window::Axis> axes;
  Shape out;
  for (const Along& a : along) {
    const auto padded =
        options_.output_padding ? std::optional<std::int64_t>(a.extra) : std::nullopt;
    const std::int64_t length =
        transposed_length(a.in, a.kernel, a.stride, a.dilation, o.padding, padded);
    if (length <= 0)
      throw ShapeError(who + ": " + geometry + " give no output for the input " +
                       shape_to_string(input_shape, true));
    const Window w = window_along(length, a.kernel, a.stride, a.dilation, o.padding);
    // Only an output_padding can make an output length that the convolution this layer
    // transposes would not map back to the input's (TensorFlow's conv2d_transpose refuses it).
    if (w.out != a.in)
      throw ShapeError(who + ": output_padding " + std::to_string(a.extra) + " along " + a.name +
                       " with " + geometry + " makes an output of " + std::to_string(length) +
                       ", which that convolution maps to " + std::to_string(w.out) +
                       ", not to the input's " + std::to_string(a.in) +
                       " (TensorFlow refuses it too)");
    axes.push_back({length, a.in, a.kernel, a.stride, a.dilation, w.pad_before});
    out.push_back(length);
  }
  input_shape_ = input_shape;
  const std::int64_t in = input_shape.back(), filters = o.filters;
  output_shape_ = out;
  output_shape_.push_back(filters);
  Shape kernel_shape{k[0], k[1], filters, in};
  if (volume) kernel_shape.insert(kernel_shape.begin(), z.size);
  kernel_.value = Tensor(kernel_shape);
  kernel_.grad = Tensor(kernel_shape);
  options_.conv.kernel_initializer.fill(kernel_.value, init);
  options_.conv.kernel_constraint.build(kernel_.value.shape());
  if (o.use_bias) {
    bias_.value = Tensor({filters});
    bias_.grad = Tensor({filters});
    options_.conv.bias_initializer.fill(bias_.value, init);
    options_.conv.bias_constraint.build(bias_.value.shape());
  }
  geometry_ = {axes[first], axes[first + 1], filters};
  if (volume) {
    geometry_.depth = axes[0];
    geometry_.volume = true;
  }
  convolution_.reset();
  return output_shape_;
}

nlohmann::json Conv2DTranspose::spatial_json(const Pair& p, std::int64_t depth_value) const {
  return options_.conv.depth ? triple_json(depth_value, p) : pair_json(p);
}

backend::Convolution2D& Conv2DTranspose::convolution() {
  if (!convolution_ || convolution_backend_ != &ops()) {
    backend::ConvolutionDesc desc;
    desc.label = label();
    desc.geometry = geometry_;
    desc.filters = input_shape_.back();
    desc.use_bias = false;
    convolution_ = ops().convolution(desc);
    convolution_backend_ = &ops();
  }
  return *convolution_;
}

const Tensor& Conv2DTranspose::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, label());
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
  const int rank = static_cast<int>(input_shape_.size()) + 1;
  const std::int64_t batch = input_.rank() == rank ? input_.dim(0) : 0;
  const std::int64_t filters = options_.conv.filters;
  const Shape expected = with_batch(batch, output_shape_);
  if (input_.rank() != rank || grad_output.shape() != expected)
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output " + shape_to_string(expected));
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
  const DepthWindow depth = o.depth.value_or(DepthWindow{});
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"filters", o.filters},
          {"kernel_size", spatial_json(o.kernel_size, depth.size)},
          {"strides", spatial_json(o.strides, depth.stride)},
          {"padding", padding_name(o.padding)},
          {"output_padding", options_.output_padding
                                 ? spatial_json(*options_.output_padding, depth.output_padding)
                                 : nlohmann::json(nullptr)},
          {"data_format", "channels_last"},
          {"dilation_rate", spatial_json(o.dilation_rate, depth.dilation)},
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

Conv3DTranspose::Conv3DTranspose(std::string name, Conv2DTransposeOptions options)
    : Conv2DTranspose(std::move(name), std::move(options)) {
  if (!options_.conv.depth) throw std::logic_error("Conv3DTranspose needs a depth window");
}

std::vector<RuledWeight> Conv2DTranspose::ruled_weights() {
  Conv2DOptions& o = options_.conv;
  std::vector<RuledWeight> out{{&kernel_, &o.kernel_constraint, &o.kernel_regularizer}};
  if (o.use_bias) out.push_back({&bias_, &o.bias_constraint, &o.bias_regularizer});
  return out;
}

}  // namespace tandem::nn
