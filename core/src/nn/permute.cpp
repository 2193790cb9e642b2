#include "nn/permute.hpp"

#include <utility>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Permute::build(const Shape& input_shape, Rng&) {
  if (input_shape.size() != order_.size())
    throw ShapeError("layer '" + name() + "' (Permute) orders " + std::to_string(order_.size()) +
                     " axes, but its inputs " + shape_to_string(input_shape, true) + " have " +
                     std::to_string(input_shape.size()));
  input_shape_ = input_shape;
  output_shape_.clear();
  inverse_.assign(order_.size(), 0);
  for (std::size_t i = 0; i < order_.size(); ++i) {
    output_shape_.push_back(input_shape[static_cast<std::size_t>(order_[i])]);
    inverse_[static_cast<std::size_t>(order_[i])] = static_cast<int>(i);
  }
  return output_shape_;
}

// Axis by axis from the first, the axis that belongs there is carried in from its place by
// swaps with its left neighbour, each a swap_middle_axes of (the axes before, the two, the axes
// after).
void Permute::permute(const Tensor& from, const Shape& shape, const std::vector<int>& order,
                      Tensor& to, Tensor& scratch) {
  backend::Backend& ops = this->ops();
  const std::int64_t batch = from.rank() > 0 ? from.dim(0) : 0;
  std::vector<int> current(order.size());
  for (std::size_t i = 0; i < current.size(); ++i) current[i] = static_cast<int>(i);
  Shape dims = shape;
  const Tensor* source = &from;  // the first swap reads the input itself
  for (std::size_t target = 0; target < order.size(); ++target) {
    std::size_t at = target;
    while (current[at] != order[target]) ++at;
    for (; at > target; --at) {
      std::int64_t outer = batch, inner = 1;
      for (std::size_t k = 0; k + 1 < at; ++k) outer *= dims[k];
      for (std::size_t k = at + 1; k < dims.size(); ++k) inner *= dims[k];
      Tensor& into = source == &to ? scratch : to;
      ops.swap_middle_axes(*source, {outer, dims[at - 1], dims[at], inner},
                           ops.place(into, from.shape()));
      if (&into == &scratch) std::swap(to, scratch);
      source = &to;
      std::swap(dims[at - 1], dims[at]);
      std::swap(current[at - 1], current[at]);
    }
  }
  if (source == &from) ops.copy(from, ops.place(to, from.shape()));  // the identity order
  to = to.reshaped(with_batch(batch, dims));
}

const Tensor& Permute::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Permute)");
  permute(x, input_shape_, order_, output_, scratch_);
  return output_;
}

const Tensor& Permute::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  require_batch_of(grad_output, output_shape_, "layer '" + name() + "' (Permute) gradient");
  permute(grad_output, output_shape_, inverse_, grad_input_, scratch_);
  return grad_input_;
}

std::vector<int> Permute::dims() const {
  std::vector<int> d;
  for (int axis : order_) d.push_back(axis + 1);
  return d;
}

nlohmann::json Permute::config() const {
  return {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}, {"dims", dims()}};
}

}  // namespace tandem::nn
