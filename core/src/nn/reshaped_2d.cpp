#include "nn/reshaped_2d.hpp"

#include <algorithm>
#include <utility>

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Reshaped2D::build_inner(std::unique_ptr<Layer> inner, const Shape& input_shape,
                              const Shape& inner_input, std::optional<Shape> output_shape,
                              Rng& init) {
  inner_ = std::move(inner);
  input_shape_ = input_shape;
  inner_input_ = inner_input;
  try {
    inner_output_ = inner_->build(inner_input, init);
  } catch (const ShapeError& e) {
    throw ShapeError(label() + " on inputs " + shape_to_string(input_shape, true) +
                     ", computed as a " + inner_->class_name() + " on " +
                     shape_to_string(inner_input, true) + ": " + e.what());
  }
  output_shape_ = output_shape ? *output_shape
                               : Shape(inner_output_.begin() + 1, inner_output_.end());
  return output_shape_;
}

const Tensor& Reshaped2D::forward(const Tensor& x, bool training) {
  require_batch_of(x, input_shape_, label());
  const std::int64_t batch = x.dim(0);
  inner_->set_backend(ops());
  inner_->set_sample_offset(sample_offset());
  const Tensor& y = inner_->forward(x.reshaped(with_batch(batch, inner_input_)), training);
  output_ = y.reshaped(with_batch(batch, output_shape_));
  return output_;
}

const Tensor& Reshaped2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  if (grad_output.size() != batch * shape_size(output_shape_))
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output");
  const Tensor& dx =
      inner_->backward(grad_output.reshaped(with_batch(batch, inner_output_)), need_input_grad);
  grad_input_ = need_input_grad ? dx.reshaped(with_batch(batch, input_shape_)) : Tensor();
  return grad_input_;
}

nlohmann::json Reshaped2D::one_dimensional_config(nlohmann::json c) const {
  for (const char* key : {"kernel_size", "strides", "dilation_rate", "pool_size"})
    if (c.contains(key) && c[key].is_array() && c[key].size() == 2)
      c[key] = nlohmann::json::array({c[key][1]});
  c.erase("groups");
  return c;
}

namespace {

void require_sequence(const Shape& input_shape, const std::string& who) {
  if (input_shape.size() != 2)
    throw ShapeError(who + " expects inputs (None, steps, channels), got " +
                     shape_to_string(input_shape, true));
}

}  // namespace

OneDimensionalRules::OneDimensionalRules(Conv2DOptions& options, std::string kernel_key,
                                         bool with_bias)
    : kernel_key(std::move(kernel_key)),
      with_bias(with_bias),
      kernel_constraint(std::exchange(options.kernel_constraint, WeightConstraint())),
      bias_constraint(with_bias ? std::exchange(options.bias_constraint, WeightConstraint())
                                : WeightConstraint()),
      kernel_regularizer(std::exchange(options.kernel_regularizer, WeightRegularizer())),
      bias_regularizer(with_bias ? std::exchange(options.bias_regularizer, WeightRegularizer())
                                 : WeightRegularizer()) {}

void OneDimensionalRules::build(Parameter& kernel, const Shape& kernel_shape, std::int64_t filters,
                                const std::string& label) {
  kernel.value = kernel.value.reshaped(kernel_shape);
  kernel.grad = kernel.grad.reshaped(kernel_shape);
  try {
    kernel_constraint.build(kernel_shape);
    if (with_bias) bias_constraint.build({filters});
  } catch (const ShapeError& e) {
    throw ShapeError(label + ": " + e.what());
  }
}

std::vector<RuledWeight> OneDimensionalRules::ruled_weights(Parameter* kernel,
                                                            Parameter* bias) const {
  std::vector<RuledWeight> out{{kernel, &kernel_constraint, &kernel_regularizer}};
  if (bias && with_bias) out.push_back({bias, &bias_constraint, &bias_regularizer});
  return out;
}

void OneDimensionalRules::write(nlohmann::json& config) const {
  config[kernel_key + "_constraint"] = kernel_constraint.config();
  config[kernel_key + "_regularizer"] = kernel_regularizer.config();
  if (!with_bias) return;
  config["bias_constraint"] = bias_constraint.config();
  config["bias_regularizer"] = bias_regularizer.config();
}

Convolution1D::Convolution1D(std::string name, const Conv2DOptions& window, bool causal)
    : Reshaped2D(std::move(name)),
      causal_(causal),
      left_pad_(causal ? (window.kernel_size[1] - 1) * window.dilation_rate[1] : 0) {}

Shape Convolution1D::build(const Shape& input_shape, Rng& init) {
  require_sequence(input_shape, label());
  input_shape_ = input_shape;
  return build_convolution({input_shape[0] + left_pad_, input_shape[1]}, init);
}

nlohmann::json Convolution1D::convolution_config(nlohmann::json inner_config) const {
  nlohmann::json c = one_dimensional_config(std::move(inner_config));
  c["trainable"] = trainable();
  if (causal_) c["padding"] = "causal";
  return c;
}

backend::ImageBlock Convolution1D::steps_block(std::int64_t batch) const {
  const std::int64_t steps = input_shape_[0];
  backend::ImageBlock b;
  b.batch = batch;
  b.channels = input_shape_[1];
  b.src_rows = b.dst_rows = b.rows = 1;
  b.src_cols = steps;
  b.dst_cols = steps + left_pad_;
  b.dst_col = left_pad_;
  b.cols = steps;
  return b;
}

const Tensor& Convolution1D::forward(const Tensor& x, bool training) {
  if (!causal_) return Reshaped2D::forward(x, training);
  require_batch_of(x, input_shape_, label());
  const std::int64_t batch = x.dim(0);
  Tensor& padded = ops().place(padded_, {batch, input_shape_[0] + left_pad_, input_shape_[1]});
  ops().fill(padded, 0.0f);
  ops().copy_image_block(steps_block(batch), x, padded);
  return Reshaped2D::forward(padded, training);
}

const Tensor& Convolution1D::backward(const Tensor& grad_output, bool need_input_grad) {
  const Tensor& dx = Reshaped2D::backward(grad_output, need_input_grad);
  if (!causal_ || !need_input_grad) return dx;
  const std::int64_t batch = grad_output.dim(0);
  backend::ImageBlock back = steps_block(batch);  // the input's steps out of the padded gradient
  std::swap(back.src_cols, back.dst_cols);
  std::swap(back.src_col, back.dst_col);
  ops().copy_image_block(back, dx, ops().place(grad_input_, with_batch(batch, input_shape_)));
  return grad_input_;
}

Conv1D::Conv1D(std::string name, Conv2DOptions options, bool causal, bool depthwise)
    : Convolution1D(std::move(name), options, causal),
      depthwise_(depthwise),
      options_(std::move(options)),
      rules_(options_, depthwise ? "depthwise" : "kernel") {}

Shape Conv1D::build_convolution(const Shape& seen, Rng& init) {
  std::unique_ptr<Layer> inner;
  if (depthwise_)
    inner = std::make_unique<DepthwiseConv2D>(name(), options_);
  else
    inner = std::make_unique<Conv2D>(name(), options_);
  const Shape out = build_inner(std::move(inner), seen, {1, seen[0], seen[1]}, std::nullopt, init);
  // Keras' kernel (k, in, filters), or (k, in, multiplier) depthwise: the inner layer's
  // (1, k, in, ...) memory. The bias: one per output channel.
  const std::int64_t last = depthwise_ ? options_.depth_multiplier : options_.filters;
  rules_.build(*inner_->parameters()[0], {options_.kernel_size[1], seen[1], last},
               depthwise_ ? seen[1] * last : last, label());
  return out;
}

std::vector<RuledWeight> Conv1D::ruled_weights() {
  const std::vector<Parameter*> weights = inner_->parameters();
  return rules_.ruled_weights(weights[0], options_.use_bias ? weights[1] : nullptr);
}

nlohmann::json Conv1D::config() const {
  nlohmann::json c = convolution_config(depthwise_ ? DepthwiseConv2D(name(), options_).config()
                                                   : Conv2D(name(), options_).config());
  if (!depthwise_) c["groups"] = 1;
  rules_.write(c);
  return c;
}

SeparableConv1D::SeparableConv1D(std::string name, SeparableConv2DOptions options, bool causal)
    : Convolution1D(std::move(name), options.depthwise, causal),
      options_(std::move(options)),
      depthwise_rules_(options_.depthwise, "depthwise", false),
      pointwise_rules_(options_.pointwise, "pointwise") {}

Shape SeparableConv1D::build_convolution(const Shape& seen, Rng& init) {
  const Shape out = build_inner(std::make_unique<SeparableConv2D>(name(), options_), seen,
                                {1, seen[0], seen[1]}, std::nullopt, init);
  // Keras' depthwise_kernel (k, in, multiplier) and pointwise_kernel (1, in · multiplier,
  // filters): SeparableConv2D's (1, k, in, multiplier) and (1, 1, in · multiplier, filters).
  const std::int64_t multiplier = options_.depthwise.depth_multiplier;
  const std::vector<Parameter*> weights = inner_->parameters();
  depthwise_rules_.build(*weights[0], {options_.depthwise.kernel_size[1], seen[1], multiplier},
                         seen[1] * multiplier, label());
  pointwise_rules_.build(*weights[1], {1, seen[1] * multiplier, options_.pointwise.filters},
                         options_.pointwise.filters, label());
  return out;
}

std::vector<RuledWeight> SeparableConv1D::ruled_weights() {
  const std::vector<Parameter*> weights = inner_->parameters();
  std::vector<RuledWeight> out = depthwise_rules_.ruled_weights(weights[0], nullptr);
  for (const RuledWeight& w : pointwise_rules_.ruled_weights(
           weights[1], options_.pointwise.use_bias ? weights[2] : nullptr))
    out.push_back(w);
  return out;
}

nlohmann::json SeparableConv1D::config() const {
  nlohmann::json c = convolution_config(SeparableConv2D(name(), options_).config());
  depthwise_rules_.write(c);
  pointwise_rules_.write(c);
  return c;
}

Conv1DTranspose::Conv1DTranspose(std::string name, Conv2DTransposeOptions options)
    : Reshaped2D(std::move(name)), options_(std::move(options)), rules_(options_.conv) {}

Shape Conv1DTranspose::build(const Shape& input_shape, Rng& init) {
  require_sequence(input_shape, label());
  const Shape out = build_inner(std::make_unique<Conv2DTranspose>(name(), options_), input_shape,
                                {1, input_shape[0], input_shape[1]}, std::nullopt, init);
  // Keras' Conv1DTranspose kernel is (k, filters, in): Conv2DTranspose's (1, k, filters, in).
  rules_.build(*inner_->parameters()[0],
               {options_.conv.kernel_size[1], options_.conv.filters, input_shape[1]},
               options_.conv.filters, label());
  return out;
}

std::vector<RuledWeight> Conv1DTranspose::ruled_weights() {
  const std::vector<Parameter*> weights = inner_->parameters();
  return rules_.ruled_weights(weights[0], options_.conv.use_bias ? weights[1] : nullptr);
}

nlohmann::json Conv1DTranspose::config() const {
  nlohmann::json c = one_dimensional_config(Conv2DTranspose(name(), options_).config());
  c["trainable"] = trainable();
  c["output_padding"] = options_.output_padding
                            ? nlohmann::json::array({(*options_.output_padding)[1]})
                            : nlohmann::json();
  rules_.write(c);
  return c;
}

Shape Pooling1D::build(const Shape& input_shape, Rng& init) {
  require_sequence(input_shape, label());
  return build_inner(std::make_unique<Pooling2D>(name(), options_), input_shape,
                     {1, input_shape[0], input_shape[1]}, std::nullopt, init);
}

nlohmann::json Pooling1D::config() const {
  return one_dimensional_config(Pooling2D(name(), options_).config());
}

Shape GlobalMaxPooling::build(const Shape& input_shape, Rng& init) {
  const bool fits = static_cast<int>(input_shape.size()) == spatial_axes_ + 1;
  if (!fits)
    throw ShapeError(label() + " expects inputs " + spatial_axes_shape(spatial_axes_) + ", got " +
                     shape_to_string(input_shape, true));
  // An image pools as it is; the steps of a sequence, or a volume's cells in their order, as
  // one row.
  const std::int64_t channels = input_shape.back();
  const Shape image =
      spatial_axes_ == 2
          ? input_shape
          : Shape{1, shape_size(input_shape) / std::max<std::int64_t>(channels, 1), channels};
  Pooling2DOptions o;
  o.kind = PoolKind::max;
  o.pool_size = o.strides = {image[0], image[1]};
  Shape out(keepdims_ ? static_cast<std::size_t>(spatial_axes_) : 0, 1);
  out.push_back(channels);
  return build_inner(std::make_unique<Pooling2D>(name(), o), input_shape, image, out, init);
}

nlohmann::json GlobalMaxPooling::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"data_format", "channels_last"},
          {"keepdims", keepdims_}};
}

namespace {

nlohmann::json base_config(const Layer& layer) {
  return {{"name", layer.name()}, {"trainable", layer.trainable()}, {"dtype", "float32"}};
}

}  // namespace

Shape SequenceBorder::build(const Shape& input_shape, Rng& init) {
  require_sequence(input_shape, label());
  return build_inner(std::make_unique<ImageBorder>(name(), pad_, Borders{0, 0, left_, right_}),
                     input_shape, {1, input_shape[0], input_shape[1]}, std::nullopt, init);
}

nlohmann::json SequenceBorder::config() const {
  nlohmann::json c = base_config(*this);
  c[pad_ ? "padding" : "cropping"] = {left_, right_};
  return c;
}

Shape UpSampling1D::build(const Shape& input_shape, Rng& init) {
  require_sequence(input_shape, label());
  return build_inner(std::make_unique<UpSampling2D>(name(), 1, size_), input_shape,
                     {1, input_shape[0], input_shape[1]}, std::nullopt, init);
}

nlohmann::json UpSampling1D::config() const {
  nlohmann::json c = base_config(*this);
  c["size"] = size_;
  return c;
}

Shape RepeatVector::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 1)
    throw ShapeError(label() + " expects vectors (None, features), got " +
                     shape_to_string(input_shape, true));
  return build_inner(std::make_unique<UpSampling2D>(name(), n_, 1), input_shape,
                     {1, 1, input_shape[0]}, Shape{n_, input_shape[0]}, init);
}

nlohmann::json RepeatVector::config() const {
  nlohmann::json c = base_config(*this);
  c["n"] = n_;
  return c;
}

}  // namespace tandem::nn
