#include "nn/permute.hpp"

#include "backend/ops.hpp"
#include "nn/axis_permutation.hpp"
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
  for (int axis : order_) output_shape_.push_back(input_shape[static_cast<std::size_t>(axis)]);
  inverse_ = inverse_order(order_);
  return output_shape_;
}

void Permute::permute(const Tensor& from, const Shape& shape, const std::vector<int>& order,
                      Tensor& to, Tensor& scratch) {
  // The batch axis stays first.
  std::vector<int> whole{0};
  for (int axis : order) whole.push_back(axis + 1);
  permute_axes(ops(), from, with_batch(from.rank() > 0 ? from.dim(0) : 0, shape), whole, to,
               scratch);
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
