#include "nn/position_embedding.hpp"

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

PositionEmbedding::PositionEmbedding(std::string name, std::int64_t sequence_length,
                                     Initializer initializer)
    : Layer(std::move(name)),
      sequence_length_(sequence_length),
      initializer_(std::move(initializer)) {
  embeddings_.name = "embeddings";
}

Shape PositionEmbedding::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 2 || input_shape[0] > sequence_length_)
    throw ShapeError("layer '" + name() + "' (PositionEmbedding) takes sequences (batch, time, "
                     "features) of at most sequence_length " + std::to_string(sequence_length_) +
                     " steps, got " + shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  const std::int64_t features = input_shape[1];
  width_ = input_shape[0] * features;
  embeddings_.value = Tensor({sequence_length_, features});
  embeddings_.grad = Tensor({sequence_length_, features});
  initializer_.fill(embeddings_.value, init);
  return input_shape;
}

const Tensor& PositionEmbedding::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (PositionEmbedding)");
  backend::Backend& ops = this->ops();
  const std::int64_t batch = x.dim(0);
  if (ones_.size() != batch || ones_.memory() != ops.memory()) {
    ops.place(ones_, {batch, 1});
    ops.fill(ones_, 1.0f);
  }
  // output (batch x width) = ones (batch x 1) · the table's first `width` values (1 x width).
  ops.gemm({false, false, batch, width_, 1}, ones_, embeddings_.value, nullptr,
           ops.place(output_, x.shape()));
  return output_;
}

const Tensor& PositionEmbedding::backward(const Tensor& grad_output, bool need_input_grad) {
  backend::Backend& ops = this->ops();
  if (grad_output.size() != output_.size())
    throw ShapeError("layer '" + name() + "' (PositionEmbedding): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  if (!embeddings_.grad.empty()) {
    if (width_ == embeddings_.grad.size()) {
      ops.column_sums(grad_output, width_, embeddings_.grad);
    } else {  // the rows past the sequence's length get no gradient
      ops.column_sums(grad_output, width_, ops.place(table_grad_, {1, width_}));
      ops.fill(embeddings_.grad, 0.0f);
      ops.copy_columns(table_grad_, width_, 0, embeddings_.grad, embeddings_.grad.size(), 0,
                       width_);
    }
  }
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops.fill(ops.place(grad_input_, output_.shape()), 0.0f);
  return grad_input_;
}

nlohmann::json PositionEmbedding::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"sequence_length", sequence_length_},
          {"initializer", initializer_.config()}};
}

}  // namespace tandem::nn
