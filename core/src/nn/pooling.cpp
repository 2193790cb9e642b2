#include "nn/pooling.hpp"

#include <algorithm>

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Pooling2D::Pooling2D(std::string name, Pooling2DOptions options)
    : Layer(std::move(name)), options_(options) {}

Pooling2D::~Pooling2D() = default;

std::string Pooling2D::class_name() const {
  const std::string rank = options_.depth ? "3D" : "2D";
  return (options_.kind == PoolKind::max ? "MaxPooling" : "AveragePooling") + rank;
}

Shape Pooling2D::build(const Shape& input_shape, Rng& /*init*/) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  const bool volume = options_.depth.has_value();
  const std::size_t first = check_window_input(input_shape, volume, who);  // the rows' axis
  const std::int64_t channels = input_shape.back();
  const Pair& k = options_.pool_size;
  const Pair& s = options_.strides;
  const DepthWindow z = options_.depth.value_or(DepthWindow{});
  if (std::min({k[0], k[1], s[0], s[1], z.size, z.stride}) <= 0)
    throw ShapeError(who + " needs positive pool_size and strides");
  if (volume) depth_ = window_along(input_shape[0], z.size, z.stride, 1, options_.padding);
  rows_ = window_along(input_shape[first], k[0], s[0], 1, options_.padding);
  cols_ = window_along(input_shape[first + 1], k[1], s[1], 1, options_.padding);
  if (depth_.out <= 0 || rows_.out <= 0 || cols_.out <= 0)
    throw ShapeError(who + ": pool_size " + sizes_string(k, volume, z.size) +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  input_shape_ = input_shape;
  geometry_ = {{input_shape[first], rows_.out, k[0], s[0], 1, rows_.pad_before},
               {input_shape[first + 1], cols_.out, k[1], s[1], 1, cols_.pad_before},
               channels};
  if (volume) {
    geometry_.depth = {input_shape[0], depth_.out, z.size, z.stride, 1, depth_.pad_before};
    geometry_.volume = true;
  }
  output_shape_ = volume ? Shape{depth_.out, rows_.out, cols_.out, channels}
                         : Shape{rows_.out, cols_.out, channels};
  pooling_.reset();
  return output_shape_;
}

nlohmann::json Pooling2D::spatial_json(const Pair& p, std::int64_t depth_value) const {
  return options_.depth ? triple_json(depth_value, p) : pair_json(p);
}

backend::Pooling2D& Pooling2D::pooling() {
  if (!pooling_ || pooling_backend_ != &ops()) {
    backend::PoolingDesc desc;
    desc.label = "layer '" + name() + "' (" + class_name() + ")";
    desc.geometry = geometry_;
    desc.kind = options_.kind;
    pooling_ = ops().pooling(desc);
    pooling_backend_ = &ops();
  }
  return *pooling_;
}

const Tensor& Pooling2D::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  last_batch_ = x.dim(0);
  pooling().forward(x, output_);
  // relu(max z) = max relu(z): the previous layer's relu, on the pooled tensor (NaN stays NaN).
  if (input_relu_ && last_batch_ > 0)
    ops().activation_forward(ActivationKind::relu, output_, output_, input_shape_.back());
  return output_;
}

const Tensor& Pooling2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = last_batch_;
  if (batch < 0 || grad_output.shape() != with_batch(batch, output_shape_))
    throw ShapeError("layer '" + name() + "' (" + class_name() + "): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(with_batch(std::max<std::int64_t>(batch, 0), output_shape_)));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const Tensor* g = &grad_output;
  if (input_relu_ && batch > 0) {
    // Each input gradient lands on its window's maximum, whose relu is the pooled output:
    // relu's derivative at the pooled output is relu's derivative at that element.
    ops().activation_backward(ActivationKind::relu, output_, output_, grad_output,
                              ops().place(masked_grad_, grad_output.shape()), input_shape_.back());
    g = &masked_grad_;
  }
  pooling().backward(*g, grad_input_);
  return grad_input_;
}

nlohmann::json Pooling2D::config() const {
  return {
      {"name", name()},
      {"trainable", trainable()},
      {"dtype", "float32"},
      {"pool_size", spatial_json(options_.pool_size, options_.depth.value_or(DepthWindow{}).size)},
      {"padding", padding_name(options_.padding)},
      {"strides", spatial_json(options_.strides, options_.depth.value_or(DepthWindow{}).stride)},
      {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
