#include "nn/prelu.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

PReLU::PReLU(std::string name, Initializer alpha_initializer,
             std::vector<std::int64_t> shared_axes)
    : Layer(std::move(name)),
      alpha_initializer_(std::move(alpha_initializer)),
      shared_axes_(std::move(shared_axes)) {
  alpha_.name = "alpha";
}

Shape PReLU::build(const Shape& input_shape, Rng& init) {
  const auto rank = static_cast<int>(input_shape.size());
  const std::string who = "layer '" + name() + "' (PReLU)";
  if (rank == 0 || rank > backend::AxisGroups::kMaxRank)
    throw ShapeError(who + " takes inputs of 1 to " +
                     std::to_string(backend::AxisGroups::kMaxRank) +
                     " axes after the batch axis, got " + shape_to_string(input_shape, true));
  backend::PreluDesc d;
  d.rank = rank;
  Shape alpha_shape;
  for (int a = 0; a < rank; ++a) d.dims[a] = input_shape[static_cast<std::size_t>(a)];
  for (std::int64_t axis : shared_axes_) {
    if (axis < 1 || axis > rank)
      throw ShapeError(who + ": shared axis " + std::to_string(axis) + " is not an axis of inputs " +
                       shape_to_string(input_shape, true) + " (1 to " + std::to_string(rank) +
                       ", the batch axis being 0)");
    d.grouped[axis - 1] = true;
  }
  backend::count_groups(d);
  for (int a = 0; a < rank; ++a) alpha_shape.push_back(d.grouped[a] ? 1 : d.dims[a]);
  desc_ = d;
  input_shape_ = input_shape;
  alpha_.value = Tensor(alpha_shape);
  alpha_.grad = Tensor(alpha_shape);
  alpha_initializer_.fill(alpha_.value, init);
  return input_shape;
}

const Tensor& PReLU::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (PReLU)");
  input_ = x;
  ops().prelu_forward(desc_, x, alpha_.value, ops().place(output_, x.shape()));
  return output_;
}

const Tensor& PReLU::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != input_.size())
    throw ShapeError("layer '" + name() + "' (PReLU): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  Tensor* dx = need_input_grad ? &ops().place(grad_input_, input_.shape()) : nullptr;
  Tensor* d_alpha = trainable() && alpha_.trainable && !alpha_.grad.empty() ? &alpha_.grad : nullptr;
  ops().prelu_backward(desc_, input_, alpha_.value, grad_output, dx, d_alpha);
  if (!need_input_grad) grad_input_ = Tensor();
  return grad_input_;
}

nlohmann::json PReLU::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"alpha_initializer", alpha_initializer_.config()},
          {"alpha_regularizer", nullptr},
          {"alpha_constraint", nullptr},
          {"shared_axes", shared_axes_.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json(shared_axes_)}};
}

}  // namespace tandem::nn
