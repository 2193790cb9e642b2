#include "nn/masking_layer.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Shape Masking::build(const Shape& input_shape, Rng& /*init*/) {
  if (input_shape.size() < 2)
    throw ShapeError("layer '" + name() +
                     "' (Masking) expects sequences (None, steps, ..., "
                     "features), got " +
                     shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  features_ = input_shape.back();
  return input_shape;
}

const Tensor& Masking::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Masking)");
  backend::Backend& ops = this->ops();
  Shape steps = x.shape();
  steps.pop_back();
  ops.sequence_mask(x, mask_value_, features_, ops.place(mask_, steps));
  ops.select_rows(mask_, x, nullptr, ops.place(output_, x.shape()), features_);
  return output_;
}

const Tensor& Masking::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (grad_output.size() != output_.size())
    throw ShapeError("layer '" + name() + "' (Masking): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  backend::Backend& ops = this->ops();
  ops.select_rows(mask_, grad_output, nullptr, ops.place(grad_input_, grad_output.shape()),
                  features_);
  return grad_input_;
}

nlohmann::json Masking::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"mask_value", mask_value_}};
}

}  // namespace tandem::nn
