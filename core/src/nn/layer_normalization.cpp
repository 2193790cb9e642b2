#include "nn/layer_normalization.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

LayerNormalization::LayerNormalization(std::string name, LayerNormalizationOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  gamma_.name = "gamma";
  beta_.name = "beta";
}

Shape LayerNormalization::build(const Shape& input_shape, Rng& init) {
  const auto rank = static_cast<std::int64_t>(input_shape.size());
  if (rank == 0)
    throw ShapeError("layer '" + name() +
                     "' (LayerNormalization) needs inputs with at least one axis after the "
                     "batch axis, got " + shape_to_string(input_shape, true));
  require_last_axis(options_, input_shape, "layer '" + name() + "' (LayerNormalization)");
  input_shape_ = input_shape;
  features_ = input_shape.back();
  build_gamma_beta(options_, features_, gamma_, beta_, init);
  return input_shape;
}

const Tensor& LayerNormalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (LayerNormalization)");
  input_ = x;
  ops().layer_norm_forward(desc(), x, options_.scale ? &gamma_.value : nullptr,
                           options_.center ? &beta_.value : nullptr,
                           ops().place(output_, x.shape()), stats_);
  return output_;
}

const Tensor& LayerNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != input_.size())
    throw ShapeError("layer '" + name() + "' (LayerNormalization): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  Tensor* dx = need_input_grad ? &ops().place(grad_input_, input_.shape()) : nullptr;
  Tensor* d_gamma = options_.scale && !gamma_.grad.empty() ? &gamma_.grad : nullptr;
  Tensor* d_beta = options_.center && !beta_.grad.empty() ? &beta_.grad : nullptr;
  ops().layer_norm_backward(desc(), input_, grad_output,
                            options_.scale ? &gamma_.value : nullptr, stats_, dx, d_gamma, d_beta);
  if (!need_input_grad) grad_input_ = Tensor();
  return grad_input_;
}

std::vector<Parameter*> LayerNormalization::parameters() {
  return gamma_beta(options_, gamma_, beta_);
}

nlohmann::json LayerNormalization::config() const {
  nlohmann::json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  write_affine_normalization(options_, c);
  c["rms_scaling"] = false;
  return c;
}

}  // namespace tandem::nn
