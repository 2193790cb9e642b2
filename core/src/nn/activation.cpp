#include "nn/activation.hpp"

#include "backend/ops.hpp"
#include "nn/axis_permutation.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// Softmax normalises the last axis.
std::int64_t last_axis(const Tensor& x) {
  return std::max<std::int64_t>(x.rank() > 1 ? x.shape().back() : 1, 1);
}

}  // namespace

Shape Activation::build(const Shape& input_shape, Rng& /*init*/) {
  if ((kind_ == ActivationKind::softmax || kind_ == ActivationKind::log_softmax) &&
      input_shape.empty())
    throw ShapeError("layer '" + name() + "' (Activation " + activation_name(kind_) +
                     ") needs an axis to normalise over");
  // Keras' Softmax layer names its axis (nn/layer_registry.cpp): counting the batch axis as 0,
  // or negative from the end; which one it is only the input's rank says.
  input_shape_ = input_shape;
  to_last_.clear();
  from_last_.clear();
  if (keras_keys_.is_object() && keras_keys_.contains("axis")) {
    const nlohmann::json& given = keras_keys_["axis"];
    const std::int64_t axis = (given.is_array() ? given[0] : given).get<std::int64_t>();
    const auto rank = static_cast<std::int64_t>(input_shape.size());
    const std::int64_t own = axis < 0 ? axis + rank : axis - 1;  // among the sample's axes
    if (own < 0 || own >= rank)
      throw ShapeError("layer '" + name() + "' (" + keras_class_ + "): axis " +
                       std::to_string(axis) + " is not an axis of inputs " +
                       shape_to_string(input_shape, true) + " after the batch (1 to " +
                       std::to_string(rank) + ", or -1 to -" + std::to_string(rank) + ")");
    if (own != rank - 1) {
      to_last_.push_back(0);
      for (std::int64_t a = 0; a < rank; ++a)
        if (a != own) to_last_.push_back(static_cast<int>(a + 1));
      to_last_.push_back(static_cast<int>(own + 1));
      from_last_ = inverse_order(to_last_);
      moved_shape_.clear();
      for (std::size_t k = 1; k < to_last_.size(); ++k)
        moved_shape_.push_back(input_shape[static_cast<std::size_t>(to_last_[k] - 1)]);
    }
  }
  return input_shape;
}

void Activation::permute(const Tensor& from, const Shape& shape, const std::vector<int>& order,
                         Tensor& to) {
  permute_axes(ops(), from, with_batch(from.rank() > 0 ? from.dim(0) : 0, shape), order, to,
               scratch_);
}

const Tensor& Activation::forward(const Tensor& x, bool /*training*/) {
  input_ = x;
  if (relu_absorbed_) {
    output_ = x;  // shares the storage
    return output_;
  }
  if (!to_last_.empty()) {
    permute(x, input_shape_, to_last_, moved_);
    ops().activation_forward(kind_, moved_, ops().place(moved_output_, moved_.shape()),
                             last_axis(moved_));
    permute(moved_output_, moved_shape_, from_last_, output_);
    return output_;
  }
  ops().activation_forward(kind_, x, ops().place(output_, x.shape()), last_axis(x));
  return output_;
}

const Tensor& Activation::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (relu_absorbed_) {
    grad_input_ = grad_output;  // shares the storage
    return grad_input_;
  }
  if (!to_last_.empty()) {  // softmax's gradient reads only its output
    permute(grad_output, input_shape_, to_last_, moved_);
    ops().activation_backward(kind_, moved_output_, moved_output_, moved_,
                              ops().place(moved_grad_, moved_.shape()), last_axis(moved_));
    permute(moved_grad_, moved_shape_, from_last_, grad_input_);
    return grad_input_;
  }
  ops().activation_backward(kind_, input_, output_, grad_output,
                            ops().place(grad_input_, input_.shape()), last_axis(input_));
  return grad_input_;
}

nlohmann::json Activation::config() const {
  nlohmann::json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  if (keras_keys_.is_null())
    c["activation"] = activation_name(kind_);
  else
    c.update(keras_keys_);
  return c;
}

}  // namespace tandem::nn
