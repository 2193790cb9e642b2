#include "nn/pooling.hpp"

#include "nn/activation_fn.hpp"
#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Pooling2D::Pooling2D(std::string name, Pooling2DOptions options)
    : Layer(std::move(name)), options_(options) {}

Pooling2D::~Pooling2D() = default;

std::string Pooling2D::class_name() const {
  return options_.kind == PoolKind::max ? "MaxPooling2D" : "AveragePooling2D";
}

Shape Pooling2D::build(const Shape& input_shape, Rng& /*init*/) {
  const std::string who = "layer '" + name() + "' (" + class_name() + ")";
  check_image_shape(input_shape, who);
  const Pair& k = options_.pool_size;
  const Pair& s = options_.strides;
  if (k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0)
    throw ShapeError(who + " needs positive pool_size and strides");
  rows_ = window_along(input_shape[0], k[0], s[0], 1, options_.padding);
  cols_ = window_along(input_shape[1], k[1], s[1], 1, options_.padding);
  if (rows_.out <= 0 || cols_.out <= 0)
    throw ShapeError(who + ": pool_size " + shape_to_string({k[0], k[1]}) +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  input_shape_ = input_shape;
  geometry_ = {{input_shape[0], rows_.out, k[0], s[0], 1, rows_.pad_before},
               {input_shape[1], cols_.out, k[1], s[1], 1, cols_.pad_before},
               input_shape[2]};
  pooling_.reset();
  return {rows_.out, cols_.out, input_shape[2]};
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
  if (x.rank() != 4 || x.dim(1) != input_shape_[0] || x.dim(2) != input_shape_[1] ||
      x.dim(3) != input_shape_[2])
    throw ShapeError("layer '" + name() + "' (" + class_name() + ") expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  last_batch_ = x.dim(0);
  pooling().forward(x, output_);
  // relu(max z) = max relu(z): the previous layer's relu, on the pooled tensor (NaN stays NaN).
  if (input_relu_ && last_batch_ > 0)
    ops().activation_forward(ActivationKind::relu, output_, output_, input_shape_[2]);
  return output_;
}

const Tensor& Pooling2D::backward(const Tensor& grad_output, bool need_input_grad) {
  const std::int64_t batch = last_batch_;
  if (batch < 0 || grad_output.rank() != 4 || grad_output.dim(0) != batch ||
      grad_output.dim(1) != geometry_.rows.out || grad_output.dim(2) != geometry_.cols.out ||
      grad_output.dim(3) != input_shape_[2])
    throw ShapeError(
        "layer '" + name() + "' (" + class_name() + "): gradient of shape " +
        shape_to_string(grad_output.shape()) + " does not match its output " +
        shape_to_string({batch, geometry_.rows.out, geometry_.cols.out, input_shape_[2]}));
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const Tensor* g = &grad_output;
  if (input_relu_ && batch > 0) {
    // Each input gradient lands on its window's maximum, whose relu is the pooled output:
    // relu's derivative at the pooled output is relu's derivative at that element.
    ops().activation_backward(ActivationKind::relu, output_, output_, grad_output,
                              ops().place(masked_grad_, grad_output.shape()), input_shape_[2]);
    g = &masked_grad_;
  }
  pooling().backward(*g, grad_input_);
  return grad_input_;
}

nlohmann::json Pooling2D::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"pool_size", pair_json(options_.pool_size)},
          {"padding", padding_name(options_.padding)},
          {"strides", pair_json(options_.strides)},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
