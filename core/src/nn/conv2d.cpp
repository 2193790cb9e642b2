#include "nn/conv2d.hpp"

#include <algorithm>
#include <stdexcept>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Conv2D::Conv2D(std::string name, Conv2DOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  kernel_.name = "kernel";
  bias_.name = "bias";
}

Conv2D::~Conv2D() = default;

Shape Conv2D::build(const Shape& input_shape, Rng& init) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  const bool volume = options_.depth.has_value();
  const std::size_t first = check_window_input(input_shape, volume, who);  // the rows' axis
  const std::int64_t in = input_shape.back();
  if (options_.depth_multiplier > 0) {
    options_.groups = in;
    options_.filters = in * options_.depth_multiplier;
  }
  const Pair& k = options_.kernel_size;
  const Pair& s = options_.strides;
  const Pair& d = options_.dilation_rate;
  const DepthWindow z = options_.depth.value_or(DepthWindow{});
  if (options_.filters <= 0 ||
      std::min({k[0], k[1], s[0], s[1], d[0], d[1], z.size, z.stride, z.dilation}) <= 0)
    throw ShapeError(who + " needs positive filters, kernel_size, strides and dilation_rate");
  const std::int64_t groups = options_.groups;
  if (groups <= 0 || in % groups != 0 || options_.filters % groups != 0)
    throw ShapeError(who + ": groups " + std::to_string(groups) +
                     " must divide the input channels (" + std::to_string(in) +
                     ") and the filters (" + std::to_string(options_.filters) + ")");
  if (volume) depth_ = window_along(input_shape[0], z.size, z.stride, z.dilation, options_.padding);
  rows_ = window_along(input_shape[first], k[0], s[0], d[0], options_.padding);
  cols_ = window_along(input_shape[first + 1], k[1], s[1], d[1], options_.padding);
  if (depth_.out <= 0 || rows_.out <= 0 || cols_.out <= 0) {
    const bool dilated = d[0] > 1 || d[1] > 1 || z.dilation > 1;
    throw ShapeError(who + ": kernel " + sizes_string(k, volume, z.size) +
                     (dilated ? " with dilation " + sizes_string(d, volume, z.dilation) : "") +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  }
  input_shape_ = input_shape;
  const std::int64_t filters = options_.filters;
  output_shape_ = volume ? Shape{depth_.out, rows_.out, cols_.out, filters}
                         : Shape{rows_.out, cols_.out, filters};
  // Keras' shape; DepthwiseConv2D's (kh, kw, in, multiplier) holds the grouped kernel's
  // (kh, kw, 1, in · multiplier) in the same order.
  Shape kernel_shape = options_.depth_multiplier > 0
                           ? Shape{k[0], k[1], in, options_.depth_multiplier}
                           : Shape{k[0], k[1], in / groups, filters};
  if (volume) kernel_shape.insert(kernel_shape.begin(), z.size);
  kernel_.value = Tensor(kernel_shape);
  kernel_.grad = Tensor(kernel_shape);
  options_.kernel_initializer.fill(kernel_.value, init);
  options_.kernel_constraint.build(kernel_.value.shape());
  if (options_.use_bias) {
    bias_.value = Tensor({filters});
    bias_.grad = Tensor({filters});
    options_.bias_initializer.fill(bias_.value, init);
    options_.bias_constraint.build(bias_.value.shape());
  }
  geometry_ = {{input_shape[first], rows_.out, k[0], s[0], d[0], rows_.pad_before},
               {input_shape[first + 1], cols_.out, k[1], s[1], d[1], cols_.pad_before},
               in};
  if (volume) {
    geometry_.depth = {input_shape[0], depth_.out, z.size, z.stride, z.dilation, depth_.pad_before};
    geometry_.volume = true;
  }
  convolution_.reset();
  return output_shape_;
}

nlohmann::json Conv2D::spatial_json(const Pair& p, std::int64_t depth_value) const {
  return options_.depth ? triple_json(depth_value, p) : pair_json(p);
}

backend::Convolution2D& Conv2D::convolution() {
  if (!convolution_ || convolution_backend_ != &ops()) {
    backend::ConvolutionDesc desc;
    desc.label = "layer '" + name() + "' (" + class_name() + ")";
    desc.geometry = geometry_;
    desc.filters = options_.filters;
    desc.use_bias = options_.use_bias;
    desc.groups = options_.groups;
    convolution_ = ops().convolution(desc);
    convolution_backend_ = &ops();
  }
  return *convolution_;
}

const Tensor& Conv2D::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  backend::Backend& ops = this->ops();
  input_ = x;
  const ActivationKind act = options_.activation;
  // relu's derivative reads only the sign, which its output keeps: it runs in place.
  const bool keep_pre = act != ActivationKind::linear && act != ActivationKind::relu;
  Tensor& z = keep_pre ? pre_ : output_;
  convolution().forward(x, kernel_.value, options_.use_bias ? &bias_.value : nullptr, z);
  ops.place(output_, z.shape());
  if (x.dim(0) > 0 && act != ActivationKind::linear &&
      !(act == ActivationKind::relu && relu_external_))
    ops.activation_forward(act, z, output_, options_.filters);
  return output_;
}

const Tensor& Conv2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const int rank = static_cast<int>(input_shape_.size()) + 1;
  const std::int64_t batch = input_.rank() == rank ? input_.dim(0) : 0;
  const std::int64_t filters = options_.filters;
  if (input_.rank() != rank || grad_output.shape() != with_batch(batch, output_shape_))
    throw ShapeError("layer '" + name() + "' (" + class_name() + "): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(with_batch(batch, output_shape_)));
  backend::Backend& ops = this->ops();
  const Tensor* dz = &grad_output;
  const ActivationKind act = options_.activation;
  if (batch > 0 && act != ActivationKind::linear &&
      !(act == ActivationKind::relu && relu_external_)) {
    const Tensor& pre = act == ActivationKind::relu ? output_ : pre_;
    ops.activation_backward(act, pre, output_, grad_output,
                            ops.place(grad_pre_, grad_output.shape()), filters);
    dz = &grad_pre_;
  }
  if (!need_input_grad) grad_input_ = Tensor();
  Tensor* dx = need_input_grad ? &grad_input_ : nullptr;
  if (!kernel_.grad.empty())  // a frozen layer on a device replica has no gradients
    convolution().backward(input_, *dz, kernel_.value, kernel_.grad,
                           options_.use_bias ? &bias_.grad : nullptr, dx);
  else if (dx)
    convolution().backward_data(*dz, kernel_.value, *dx);
  return grad_input_;
}

std::vector<Parameter*> Conv2D::parameters() {
  if (options_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

nlohmann::json Conv2D::common_config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"kernel_size", spatial_json(options_.kernel_size, depth_window().size)},
          {"strides", spatial_json(options_.strides, depth_window().stride)},
          {"padding", padding_name(options_.padding)},
          {"data_format", "channels_last"},
          {"dilation_rate", spatial_json(options_.dilation_rate, depth_window().dilation)},
          {"activation", activation_name(options_.activation)},
          {"use_bias", options_.use_bias},
          {"bias_initializer", options_.bias_initializer.config()},
          {"bias_regularizer", options_.bias_regularizer.config()},
          {"activity_regularizer", nullptr},
          {"bias_constraint", options_.bias_constraint.config()}};
}

nlohmann::json Conv2D::config() const {
  nlohmann::json c = common_config();
  c["filters"] = options_.filters;
  c["groups"] = options_.groups;
  c["kernel_initializer"] = options_.kernel_initializer.config();
  c["kernel_regularizer"] = options_.kernel_regularizer.config();
  c["kernel_constraint"] = options_.kernel_constraint.config();
  return c;
}

Conv3D::Conv3D(std::string name, Conv2DOptions options)
    : Conv2D(std::move(name), std::move(options)) {
  if (!options_.depth) throw std::logic_error("Conv3D needs a depth window");
}

DepthwiseConv2D::DepthwiseConv2D(std::string name, Conv2DOptions options)
    : Conv2D(std::move(name), std::move(options)) {
  parameters()[0]->name = "depthwise_kernel";
}

nlohmann::json DepthwiseConv2D::config() const {
  nlohmann::json c = common_config();
  c["depth_multiplier"] = options_.depth_multiplier;
  c["depthwise_initializer"] = options_.kernel_initializer.config();
  c["depthwise_regularizer"] = options_.kernel_regularizer.config();
  c["depthwise_constraint"] = options_.kernel_constraint.config();
  return c;
}

std::vector<RuledWeight> Conv2D::ruled_weights() {
  std::vector<RuledWeight> out{{&kernel_, &options_.kernel_constraint, &options_.kernel_regularizer}};
  if (options_.use_bias) out.push_back({&bias_, &options_.bias_constraint, &options_.bias_regularizer});
  return out;
}

}  // namespace tandem::nn
