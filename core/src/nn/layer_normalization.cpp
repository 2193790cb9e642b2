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
  if (options_.axis != -1 && options_.axis != rank)
    throw ShapeError("layer '" + name() + "' (LayerNormalization): axis " +
                     std::to_string(options_.axis) + " is not the last axis of inputs " +
                     shape_to_string(input_shape, true) +
                     " (Tandem normalises over the last axis only)");
  input_shape_ = input_shape;
  features_ = input_shape.back();
  if (options_.scale) {
    gamma_.value = Tensor({features_});
    gamma_.grad = Tensor({features_});
    options_.gamma_initializer.fill(gamma_.value, init);
  }
  if (options_.center) {
    beta_.value = Tensor({features_});
    beta_.grad = Tensor({features_});
    options_.beta_initializer.fill(beta_.value, init);
  }
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
  std::vector<Parameter*> out;
  if (options_.scale) out.push_back(&gamma_);
  if (options_.center) out.push_back(&beta_);
  return out;
}

nlohmann::json LayerNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", options_.axis},
          {"epsilon", options_.epsilon},
          {"center", options_.center},
          {"scale", options_.scale},
          {"rms_scaling", false},
          {"beta_initializer", options_.beta_initializer.config()},
          {"gamma_initializer", options_.gamma_initializer.config()},
          {"beta_regularizer", nullptr},
          {"gamma_regularizer", nullptr},
          {"beta_constraint", nullptr},
          {"gamma_constraint", nullptr}};
}

}  // namespace tandem::nn
