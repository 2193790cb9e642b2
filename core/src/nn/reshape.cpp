#include "nn/reshape.hpp"

#include <algorithm>

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

Reshape::Reshape(std::string name, Shape target_shape)
    : Layer(std::move(name)), target_shape_(std::move(target_shape)) {}

Shape Reshape::build(const Shape& input_shape, Rng& /*init*/) {
  const std::int64_t total = shape_size(input_shape);
  std::int64_t known = 1;
  int unknown = -1;
  for (std::size_t i = 0; i < target_shape_.size(); ++i) {
    if (target_shape_[i] == -1) {
      if (unknown >= 0)
        throw ShapeError("layer '" + name() + "' (Reshape): target_shape " +
                         shape_to_string(target_shape_) + " has more than one -1");
      unknown = static_cast<int>(i);
    } else if (target_shape_[i] <= 0) {
      throw ShapeError("layer '" + name() + "' (Reshape): target_shape " +
                       shape_to_string(target_shape_) + " has a dimension that is not positive");
    } else if (__builtin_mul_overflow(known, target_shape_[i], &known)) {
      throw ShapeError("layer '" + name() + "' (Reshape): target_shape " +
                       shape_to_string(target_shape_) + " has more values than a tensor can hold");
    }
  }
  const bool fits = unknown >= 0 ? total % known == 0 : total == known;
  if (!fits)
    throw ShapeError("layer '" + name() + "' (Reshape): cannot reshape inputs " +
                     shape_to_string(input_shape, true) + " (" + std::to_string(total) +
                     " values per sample) to target_shape " + shape_to_string(target_shape_) +
                     (unknown >= 0 ? " (" + std::to_string(total) + " is not a multiple of " +
                                         std::to_string(known) + ")"
                                   : " (" + std::to_string(known) + " values)"));
  output_shape_ = target_shape_;
  if (unknown >= 0) output_shape_[static_cast<std::size_t>(unknown)] = total / known;
  input_shape_ = input_shape;
  return output_shape_;
}

const Tensor& Reshape::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Reshape)");
  output_ = x.reshaped(with_batch(x.dim(0), output_shape_));
  return output_;
}

const Tensor& Reshape::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  const std::int64_t batch = grad_output.rank() > 0 ? grad_output.dim(0) : 0;
  if (grad_output.size() != batch * shape_size(output_shape_))
    throw ShapeError("layer '" + name() + "' (Reshape): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(output_shape_, true));
  grad_input_ = grad_output.reshaped(with_batch(batch, input_shape_));
  return grad_input_;
}

nlohmann::json Reshape::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"target_shape", target_shape_}};
}

}  // namespace tandem::nn
