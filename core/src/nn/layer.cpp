// The one-input defaults of Layer's list forms (tandem/layer.hpp): a layer that takes one input
// is called through them by a functional model exactly as a Sequential model calls it.
#include "tandem/layer.hpp"

#include <string>

#include "tandem/error.hpp"

namespace tandem {

namespace {

void require_one_input(const Layer& layer, std::size_t inputs) {
  if (inputs != 1)
    throw ShapeError("layer '" + layer.name() + "' (" + layer.class_name() +
                     ") takes one input, got " + std::to_string(inputs));
}

}  // namespace

Shape Layer::build_inputs(const std::vector<Shape>& input_shapes, Rng& init) {
  require_one_input(*this, input_shapes.size());
  return build(input_shapes[0], init);
}

const Tensor& Layer::forward_inputs(const std::vector<const Tensor*>& inputs, bool training) {
  require_one_input(*this, inputs.size());
  return forward(*inputs[0], training);
}

std::vector<const Tensor*> Layer::backward_inputs(const Tensor& grad_output, bool need_input_grad) {
  const Tensor& grad_input = backward(grad_output, need_input_grad);
  if (!need_input_grad) return {};
  return {&grad_input};
}

}  // namespace tandem
