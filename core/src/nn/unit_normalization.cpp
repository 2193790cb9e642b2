#include "nn/unit_normalization.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

UnitNormalization::UnitNormalization(std::string name, std::vector<std::int64_t> axes,
                                     bool axis_listed)
    : Layer(std::move(name)), axes_(std::move(axes)), axis_listed_(axis_listed) {}

Shape UnitNormalization::build(const Shape& input_shape, Rng&) {
  const auto rank = static_cast<int>(input_shape.size());
  if (rank == 0 || rank > backend::AxisGroups::kMaxRank)
    throw ShapeError(label() + " takes inputs of 1 to " +
                     std::to_string(backend::AxisGroups::kMaxRank) +
                     " axes after the batch axis, got " + shape_to_string(input_shape, true));
  backend::UnitNormDesc d;  // Keras' floor of the square sum, 1e-12
  d.rank = rank;
  for (int a = 0; a < rank; ++a) d.dims[a] = input_shape[static_cast<std::size_t>(a)];
  for (std::int64_t axis : axes_) {
    const std::int64_t at = axis < 0 ? axis + rank + 1 : axis;  // Keras' axes count the batch's
    if (at < 1 || at > rank)
      throw ShapeError(label() + ": axis " + std::to_string(axis) +
                       (at == 0
                            ? " is the batch axis (each sample is normalized on its own)"
                            : " is not an axis of inputs " + shape_to_string(input_shape, true)));
    d.grouped[at - 1] = true;
  }
  backend::count_groups(d);
  desc_ = d;
  input_shape_ = input_shape;
  return input_shape;
}

const Tensor& UnitNormalization::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, label());
  input_ = x;
  ops().unit_normalize(desc_, x, ops().place(output_, x.shape()));
  return output_;
}

const Tensor& UnitNormalization::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != input_.size())
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output");
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops().unit_normalize_backward(desc_, input_, grad_output,
                                ops().place(grad_input_, input_.shape()));
  return grad_input_;
}

nlohmann::json UnitNormalization::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"axis", axis_listed_ ? nlohmann::json(axes_) : nlohmann::json(axes_.front())}};
}

Shape Identity::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  return input_shape;
}

const Tensor& Identity::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Identity)");
  output_ = x;
  return output_;
}

const Tensor& Identity::backward(const Tensor& grad_output, bool need_input_grad) {
  grad_input_ = need_input_grad ? grad_output : Tensor();
  return grad_input_;
}

nlohmann::json Identity::config() const {
  return {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
}

nlohmann::json ActivityRegularization::config() const {
  nlohmann::json c = Identity::config();
  c["l1"] = l1_;
  c["l2"] = l2_;
  return c;
}

}  // namespace tandem::nn
