#include "nn/elementwise_merge.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape ElementwiseMerge::build_inputs(const std::vector<Shape>& input_shapes, Rng&) {
  require_several(input_shapes.size());
  if (input_shapes.size() > max_inputs())
    throw ShapeError("layer '" + name() + "' (" + class_name() + ") takes exactly " +
                     std::to_string(max_inputs()) + " inputs, got " +
                     std::to_string(input_shapes.size()));
  for (std::size_t i = 1; i < input_shapes.size(); ++i)
    if (input_shapes[i] != input_shapes[0])
      throw ShapeError("layer '" + name() + "' (" + class_name() +
                       ") merges inputs of one shape, got " +
                       shape_to_string(input_shapes[0], true) + " and " +
                       shape_to_string(input_shapes[i], true) + " (input " + std::to_string(i) +
                       ")");
  shape_ = input_shapes[0];
  inputs_ = input_shapes.size();
  return shape_;
}

const Tensor& ElementwiseMerge::forward_inputs(const std::vector<const Tensor*>& inputs, bool) {
  if (inputs.size() != inputs_)
    throw ShapeError("layer '" + name() + "' (" + class_name() + ") was built for " +
                     std::to_string(inputs_) + " inputs, got " + std::to_string(inputs.size()));
  for (const Tensor* x : inputs) check_input(*x, shape_);
  last_inputs_ = inputs;
  ops().place(output_, inputs[0]->shape());
  merge(inputs);
  return output_;
}

std::vector<const Tensor*> ElementwiseMerge::backward_inputs(const Tensor& grad_output,
                                                             bool need_input_grad) {
  if (!need_input_grad) return {};
  grads_.resize(inputs_);
  return gradients(grad_output);
}

void Add::merge(const std::vector<const Tensor*>& inputs) {
  // (((x0 + x1) + x2) ...), the absorbed relu applied with the last addition.
  const Tensor* sum = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (output_relu_ && i + 1 == inputs.size())
      ops().add_relu(*sum, *inputs[i], output_);
    else
      ops().add(*sum, *inputs[i], output_);
    sum = &output_;
  }
}

std::vector<const Tensor*> Add::gradients(const Tensor& dy) {
  if (!output_relu_) return std::vector<const Tensor*>(inputs_, &dy);
  // The relu's gradient (its own arithmetic: y > 0 exactly where its input was), shared by all.
  ops().activation_backward(backend::ActivationKind::relu, output_, output_, dy,
                            ops().place(grads_[0], dy.shape()), 1);
  return std::vector<const Tensor*>(inputs_, &grads_[0]);
}

void Subtract::merge(const std::vector<const Tensor*>& inputs) {
  ops().subtract(*inputs[0], *inputs[1], output_);
}

std::vector<const Tensor*> Subtract::gradients(const Tensor& dy) {
  ops().affine(dy, -1.0f, 0.0f, ops().place(grads_[1], dy.shape()));
  return {&dy, &grads_[1]};
}

void Multiply::merge(const std::vector<const Tensor*>& inputs) {
  ops().multiply(*inputs[0], *inputs[1], output_);
  for (std::size_t i = 2; i < inputs.size(); ++i) ops().multiply(output_, *inputs[i], output_);
}

std::vector<const Tensor*> Multiply::gradients(const Tensor& dy) {
  std::vector<const Tensor*> out;
  for (std::size_t i = 0; i < inputs_; ++i) {
    Tensor& g = ops().place(grads_[i], dy.shape());
    const Tensor* acc = &dy;  // dy times every other input, in input order
    for (std::size_t j = 0; j < inputs_; ++j) {
      if (j == i) continue;
      ops().multiply(*acc, *last_inputs_[j], g);
      acc = &g;
    }
    out.push_back(&g);
  }
  return out;
}

void Average::merge(const std::vector<const Tensor*>& inputs) {
  ops().add(*inputs[0], *inputs[1], output_);
  for (std::size_t i = 2; i < inputs.size(); ++i) ops().add(output_, *inputs[i], output_);
  ops().affine(output_, 1.0f / static_cast<float>(inputs.size()), 0.0f, output_);
}

std::vector<const Tensor*> Average::gradients(const Tensor& dy) {
  ops().affine(dy, 1.0f / static_cast<float>(inputs_), 0.0f, ops().place(grads_[0], dy.shape()));
  return std::vector<const Tensor*>(inputs_, &grads_[0]);
}

void Extremum::merge(const std::vector<const Tensor*>& inputs) {
  ops().place(winner_, output_.shape());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    ops().extreme_update(maximum_, *inputs[i], static_cast<int>(i), output_, winner_);
}

std::vector<const Tensor*> Extremum::gradients(const Tensor& dy) {
  std::vector<const Tensor*> out;
  for (std::size_t i = 0; i < inputs_; ++i) {
    ops().route_gradient(winner_, static_cast<int>(i), dy, ops().place(grads_[i], dy.shape()));
    out.push_back(&grads_[i]);
  }
  return out;
}

}  // namespace tandem::nn
