#include "nn/group_normalization.hpp"

#include <array>

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

GroupNormalization::GroupNormalization(std::string name, GroupNormalizationOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  gamma_.name = "gamma";
  beta_.name = "beta";
}

Shape GroupNormalization::build(const Shape& input_shape, Rng& init) {
  if (input_shape.empty())
    throw ShapeError(who() + " needs inputs with a channel axis, got " +
                     shape_to_string(input_shape, true));
  require_last_axis(options_, input_shape, who());
  channels_ = input_shape.back();
  groups_ = options_.groups == -1 ? channels_ : options_.groups;
  if (groups_ > channels_ || channels_ % groups_ != 0)
    throw ShapeError(who() + ": " + std::to_string(groups_) + " groups do not divide its " +
                     std::to_string(channels_) + " channels (inputs " +
                     shape_to_string(input_shape, true) + ")");
  input_shape_ = input_shape;
  positions_ = shape_size(input_shape) / channels_;
  group_channels_ = channels_ / groups_;
  build_gamma_beta(options_, channels_, gamma_, beta_, init);
  return input_shape;
}

void GroupNormalization::swap_groups(const Tensor& from, bool back, Tensor& to) {
  const std::array<std::int64_t, 4> dims =
      back ? std::array<std::int64_t, 4>{rows_, groups_, positions_, group_channels_}
           : std::array<std::int64_t, 4>{rows_, positions_, groups_, group_channels_};
  ops().swap_middle_axes(from, dims, ops().place(to, {rows_ * positions_ * channels_}));
}

const Tensor& GroupNormalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, who());
  backend::Backend& ops = this->ops();
  rows_ = x.dim(0);
  ops.place(output_, x.shape());
  if (rows_ == 0) return output_;
  swap_groups(x, false, grouped_);  // each group's values one row of positions x group channels
  ops.layer_norm_forward({positions_ * group_channels_, options_.epsilon}, grouped_, nullptr,
                         nullptr, ops.place(scratch_, grouped_.shape()), stats_);
  swap_groups(scratch_, true, normalized_);
  if (!options_.scale) ops.fill(ops.place(ones_, {channels_}), 1.0f);
  ops.column_affine(normalized_, options_.scale ? gamma_.value : ones_,
                    options_.center ? &beta_.value : nullptr, output_, channels_);
  return output_;
}

const Tensor& GroupNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != output_.size())
    throw ShapeError(who() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output " + shape_to_string(output_.shape()));
  backend::Backend& ops = this->ops();
  if (rows_ == 0) {
    for (Parameter* p : parameters()) ops.fill(p->grad, 0.0f);
    grad_input_ = need_input_grad ? ops.place(grad_input_, output_.shape()) : Tensor();
    return grad_input_;
  }
  // gamma's gradient: the channel sums of dy times the normalised input; beta's: of dy.
  if (options_.scale && !gamma_.grad.empty()) {
    ops.multiply(grad_output, normalized_, ops.place(scratch_, normalized_.shape()));
    ops.column_sums(scratch_, channels_, gamma_.grad);
  }
  if (options_.center && !beta_.grad.empty()) ops.column_sums(grad_output, channels_, beta_.grad);
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  // dL/d(normalised) = dy · gamma, into the groups' rows, through the normalization, and back.
  ops.column_affine(grad_output, options_.scale ? gamma_.value : ones_, nullptr,
                    ops.place(scratch_, grad_output.shape()), channels_);
  swap_groups(scratch_, false, grouped_grad_);
  ops.layer_norm_backward({positions_ * group_channels_, options_.epsilon}, grouped_, grouped_grad_,
                          nullptr, stats_, &ops.place(scratch_, grouped_.shape()), nullptr,
                          nullptr);
  swap_groups(scratch_, true, grad_input_);
  grad_input_ = grad_input_.reshaped(output_.shape());
  return grad_input_;
}

std::vector<Parameter*> GroupNormalization::parameters() {
  return gamma_beta(options_, gamma_, beta_);
}

nlohmann::json GroupNormalization::config() const {
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"groups", options_.groups}};
  write_affine_normalization(options_, c);
  return c;
}

}  // namespace tandem::nn
