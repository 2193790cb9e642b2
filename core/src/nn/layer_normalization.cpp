#include "nn/layer_normalization.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

LayerNormalization::LayerNormalization(std::string name, LayerNormalizationOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  gamma_.name = "gamma";
  beta_.name = "beta";
}

LayerNormalization::LayerNormalization(std::string name, std::int64_t axis, double epsilon,
                                       RootMeanSquare)
    : Layer(std::move(name)), root_mean_square_(true) {
  options_.axis = axis;
  options_.epsilon = epsilon;
  options_.center = false;
  gamma_.name = "scale";
}

AffineNormalizationOptions LayerNormalization::weights() const {
  AffineNormalizationOptions w = options_;
  w.scale = options_.scale || options_.rms_scaling;
  w.center = options_.center && !options_.rms_scaling;
  return w;
}

backend::LayerNormDesc LayerNormalization::desc() const {
  const bool rms = options_.rms_scaling || root_mean_square_;
  return {features_, options_.epsilon, !root_mean_square_, !rms};
}

Shape LayerNormalization::build(const Shape& input_shape, Rng& init) {
  const auto rank = static_cast<std::int64_t>(input_shape.size());
  if (rank == 0)
    throw ShapeError(label() + " needs inputs with at least one axis after the batch axis, got " +
                     shape_to_string(input_shape, true));
  require_last_axis(options_, input_shape, label());
  input_shape_ = input_shape;
  features_ = input_shape.back();
  build_gamma_beta(weights(), features_, gamma_, beta_, init);
  return input_shape;
}

const Tensor& LayerNormalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, label());
  input_ = x;
  const AffineNormalizationOptions w = weights();
  ops().layer_norm_forward(desc(), x, w.scale ? &gamma_.value : nullptr,
                           w.center ? &beta_.value : nullptr, ops().place(output_, x.shape()),
                           stats_);
  return output_;
}

const Tensor& LayerNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != input_.size())
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output");
  const AffineNormalizationOptions w = weights();
  Tensor* dx = need_input_grad ? &ops().place(grad_input_, input_.shape()) : nullptr;
  Tensor* d_gamma = w.scale && !gamma_.grad.empty() ? &gamma_.grad : nullptr;
  Tensor* d_beta = w.center && !beta_.grad.empty() ? &beta_.grad : nullptr;
  ops().layer_norm_backward(desc(), input_, grad_output, w.scale ? &gamma_.value : nullptr, stats_,
                            dx, d_gamma, d_beta);
  if (!need_input_grad) grad_input_ = Tensor();
  return grad_input_;
}

std::vector<Parameter*> LayerNormalization::parameters() {
  return gamma_beta(weights(), gamma_, beta_);
}

nlohmann::json LayerNormalization::config() const {
  nlohmann::json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  write_affine_normalization(options_, c);
  c["rms_scaling"] = options_.rms_scaling;
  return c;
}

RmsNormalization::RmsNormalization(std::string name, std::int64_t axis, double epsilon)
    : LayerNormalization(std::move(name), axis, epsilon, RootMeanSquare{}) {}

nlohmann::json RmsNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", options().axis},
          {"epsilon", options().epsilon}};
}

}  // namespace tandem::nn
