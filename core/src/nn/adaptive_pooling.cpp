#include "nn/adaptive_pooling.hpp"

#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

AdaptivePooling::AdaptivePooling(std::string name, bool max, std::vector<std::int64_t> output_size)
    : Layer(std::move(name)), max_(max), output_size_(std::move(output_size)) {}

std::string AdaptivePooling::class_name() const {
  return std::string(max_ ? "AdaptiveMaxPooling" : "AdaptiveAveragePooling") +
         std::to_string(output_size_.size()) + "D";
}

Shape AdaptivePooling::build(const Shape& input_shape, Rng&) {
  const std::size_t axes = output_size_.size();
  if (input_shape.size() != axes + 1)
    throw ShapeError(label() + " pools inputs of " + std::to_string(axes) +
                     " spatial axes and channels last, got " + shape_to_string(input_shape, true));
  desc_ = backend::AdaptivePoolDesc{};
  desc_.max = max_;
  desc_.channels = input_shape.back();
  // The spatial axes fill the desc's last ones: a 1-D layer's steps are its columns.
  const std::size_t first = 3 - axes;
  std::int64_t cells = 1;
  for (std::size_t a = 0; a < axes; ++a) {
    desc_.in[first + a] = input_shape[a];
    desc_.out[first + a] = output_size_[a];
    cells *= input_shape[a];
  }
  if (cells > (std::int64_t{1} << 24))
    throw ShapeError(label() + ": " + std::to_string(cells) +
                     " cells per sample; Tandem pools at most 2^24");
  input_shape_ = input_shape;
  output_shape_ = Shape(output_size_.begin(), output_size_.end());
  output_shape_.push_back(desc_.channels);
  return output_shape_;
}

const Tensor& AdaptivePooling::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, label());
  desc_.batch = x.dim(0);
  ops().adaptive_pool_forward(desc_, x,
                              ops().place(output_, with_batch(desc_.batch, output_shape_)), arg_);
  return output_;
}

const Tensor& AdaptivePooling::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != output_.size())
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(grad_output.shape()) +
                     " does not match its output");
  if (!need_input_grad) return grad_input_ = Tensor();
  ops().adaptive_pool_backward(desc_, grad_output, arg_,
                               ops().place(grad_input_, with_batch(desc_.batch, input_shape_)));
  return grad_input_;
}

nlohmann::json AdaptivePooling::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"output_size", output_size_},
          {"data_format", "channels_last"}};
}

}  // namespace tandem::nn
