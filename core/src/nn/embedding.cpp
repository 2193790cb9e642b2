#include "nn/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

void throw_bad_embedding_index(const std::string& layer, const Shape& input_shape,
                               std::int64_t sample_offset, std::int64_t i, float v,
                               std::int64_t vocab) {
  const std::int64_t per_sample = std::max<std::int64_t>(shape_size(input_shape), 1);
  std::ostringstream where;
  where << "input[" << sample_offset + i / per_sample;
  std::int64_t rest = i % per_sample, stride = per_sample;
  for (std::int64_t d : input_shape) {
    stride /= d;
    where << ", " << rest / stride;
    rest %= stride;
  }
  where << "]";
  std::ostringstream value;
  value << v;
  throw DataError("layer '" + layer + "' (Embedding): " + where.str() + " = " + value.str() +
                  (v == std::floor(v) ? " is an index outside [0, " + std::to_string(vocab) +
                                            ") (input_dim " + std::to_string(vocab) + ")"
                                      : " is not an integer index"));
}

Embedding::Embedding(std::string name, EmbeddingOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  embeddings_.name = "embeddings";
}

Shape Embedding::build(const Shape& input_shape, Rng& init) {
  if (options_.input_length &&
      (input_shape.empty() || input_shape.front() != *options_.input_length))
    throw ShapeError("layer '" + name() + "' (Embedding): input_length " +
                     std::to_string(*options_.input_length) + " does not match inputs " +
                     shape_to_string(input_shape, true));
  input_shape_ = input_shape;
  const std::int64_t rows = options_.input_dim, dim = options_.output_dim;
  embeddings_.value = Tensor({rows, dim});
  embeddings_.grad = Tensor({rows, dim});
  options_.embeddings_initializer.fill(embeddings_.value, init);
  options_.embeddings_constraint.build(embeddings_.value.shape());
  Shape out = input_shape;
  out.push_back(dim);
  return out;
}

const Tensor& Embedding::forward(const Tensor& x, bool /*training*/) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (Embedding)");
  input_ = x;
  Shape out = x.shape();
  out.push_back(options_.output_dim);
  if (auto bad = ops().embedding_gather(embeddings_.value, x, ops().place(output_, out),
                                        options_.output_dim))
    throw_bad_embedding_index(name(), input_shape_, sample_offset(), bad->position, bad->value,
                              options_.input_dim);
  if (options_.mask_zero) ops().sequence_mask(x, 0.0f, 1, ops().place(mask_, x.shape()));
  return output_;
}

const Tensor& Embedding::backward(const Tensor& grad_output, bool need_input_grad) {
  if (need_input_grad)
    throw ShapeError("layer '" + name() +
                     "' (Embedding) has no gradient with respect to its inputs (integer "
                     "indices): it must be the first layer with trainable weights, directly "
                     "after the input or after layers without weights");
  const std::int64_t dim = options_.output_dim;
  if (grad_output.size() != input_.size() * dim)
    throw ShapeError("layer '" + name() + "' (Embedding): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  if (!embeddings_.grad.empty())  // a frozen table on a device replica has no gradient
    ops().embedding_gradient(input_, grad_output, embeddings_.grad, dim);
  grad_input_ = Tensor();
  return grad_input_;
}

nlohmann::json Embedding::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"input_dim", options_.input_dim},
          {"output_dim", options_.output_dim},
          {"embeddings_initializer", options_.embeddings_initializer.config()},
          {"embeddings_regularizer", options_.embeddings_regularizer.config()},
          {"activity_regularizer", nullptr},
          {"embeddings_constraint", options_.embeddings_constraint.config()},
          {"mask_zero", options_.mask_zero}};
}

}  // namespace tandem::nn
