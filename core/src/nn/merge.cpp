#include "nn/merge.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

void MergeLayer::refuse_one_input() const {
  throw ShapeError("layer '" + name() + "' (" + class_name() +
                   ") merges several inputs: it belongs in a functional model, where its "
                   "inbound_nodes name them, not in a Sequential stack");
}

Shape MergeLayer::build(const Shape&, Rng&) {
  refuse_one_input();
}

const Tensor& MergeLayer::forward(const Tensor&, bool) {
  refuse_one_input();
}

const Tensor& MergeLayer::backward(const Tensor&, bool) {
  refuse_one_input();
}

nlohmann::json MergeLayer::config() const {
  return {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
}

void MergeLayer::require_several(std::size_t inputs) const {
  if (inputs < 2)
    throw ShapeError("layer '" + name() + "' (" + class_name() + ") needs at least 2 inputs, got " +
                     std::to_string(inputs));
}

void MergeLayer::check_input(const Tensor& x, const Shape& shape) const {
  require_batch_of(x, shape, "layer '" + name() + "' (" + class_name() + ")");
}

Shape Concatenate::build_inputs(const std::vector<Shape>& input_shapes, Rng&) {
  require_several(input_shapes.size());
  const auto rank = static_cast<int>(input_shapes[0].size());
  // Keras' axis counts the batch axis: -1 is the last, 1 the first per-sample axis.
  const int axis = axis_ < 0 ? rank + axis_ : axis_ - 1;
  if (axis < 0 || axis >= rank)
    throw ShapeError("layer '" + name() + "' (Concatenate): axis " + std::to_string(axis_) +
                     " is not an axis of its inputs " + shape_to_string(input_shapes[0], true) +
                     " (the batch axis 0 cannot be concatenated)");
  output_shape_ = input_shapes[0];
  output_shape_[static_cast<std::size_t>(axis)] = 0;
  std::int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= input_shapes[0][static_cast<std::size_t>(d)];
  widths_.clear();
  for (std::size_t i = 0; i < input_shapes.size(); ++i) {
    const Shape& s = input_shapes[i];
    bool fits = static_cast<int>(s.size()) == rank;
    for (int d = 0; fits && d < rank; ++d)
      fits = d == axis ||
             s[static_cast<std::size_t>(d)] == input_shapes[0][static_cast<std::size_t>(d)];
    if (!fits)
      throw ShapeError("layer '" + name() +
                       "' (Concatenate) joins inputs that differ only along "
                       "axis " +
                       std::to_string(axis_) + ", got " + shape_to_string(input_shapes[0], true) +
                       " and " + shape_to_string(s, true) + " (input " + std::to_string(i) + ")");
    output_shape_[static_cast<std::size_t>(axis)] += s[static_cast<std::size_t>(axis)];
    widths_.push_back(s[static_cast<std::size_t>(axis)] * inner);
  }
  total_width_ = output_shape_[static_cast<std::size_t>(axis)] * inner;
  joined_axis_ = axis;
  input_shapes_ = input_shapes;
  grad_inputs_.resize(input_shapes.size());
  return output_shape_;
}

const Tensor& Concatenate::forward_inputs(const std::vector<const Tensor*>& inputs, bool) {
  if (inputs.size() != input_shapes_.size())
    throw ShapeError("layer '" + name() + "' (Concatenate) was built for " +
                     std::to_string(input_shapes_.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) check_input(*inputs[i], input_shapes_[i]);
  ops().place(output_, with_batch(inputs[0]->dim(0), output_shape_));
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ops().copy_columns(*inputs[i], widths_[i], 0, output_, total_width_, offset, widths_[i]);
    offset += widths_[i];
  }
  return output_;
}

std::vector<const Tensor*> Concatenate::backward_inputs(const Tensor& grad_output,
                                                        bool need_input_grad) {
  if (!need_input_grad) return {};
  std::vector<const Tensor*> grads;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < input_shapes_.size(); ++i) {
    Tensor& g = ops().place(grad_inputs_[i], with_batch(grad_output.dim(0), input_shapes_[i]));
    ops().copy_columns(grad_output, total_width_, offset, g, widths_[i], 0, widths_[i]);
    offset += widths_[i];
    grads.push_back(&g);
  }
  return grads;
}

nlohmann::json Concatenate::config() const {
  nlohmann::json c = MergeLayer::config();
  c["axis"] = axis_;
  return c;
}

}  // namespace tandem::nn
