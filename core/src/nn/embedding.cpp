#include "nn/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backend/cpu/parallel.hpp"
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
  options_.embeddings_initializer.fill(embeddings_.value, rows, dim, init);
  Shape out = input_shape;
  out.push_back(dim);
  return out;
}

const Tensor& Embedding::forward(const Tensor& x, bool /*training*/) {
  if (x.rank() != static_cast<int>(input_shape_.size()) + 1 ||
      !std::equal(input_shape_.begin(), input_shape_.end(), x.shape().begin() + 1))
    throw ShapeError("layer '" + name() + "' (Embedding) expects inputs " +
                     shape_to_string(input_shape_, true) + ", got " + shape_to_string(x.shape()));
  const std::int64_t n = x.size(), dim = options_.output_dim, vocab = options_.input_dim;
  indices_.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v >= 0.0f && v < static_cast<float>(vocab) && v == std::floor(v))) {
      throw_bad_embedding_index(name(), input_shape_, sample_offset(), i, v, vocab);
    }
    indices_[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v);
  }
  Shape out = x.shape();
  out.push_back(dim);
  output_.resize(out);
  const float* table = embeddings_.value.data();
  float* y = output_.data();
  cpu::parallel_for(
      n, std::max<std::int64_t>(1, 16384 / dim), [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i)
          std::memcpy(y + i * dim, table + indices_[static_cast<std::size_t>(i)] * dim,
                      static_cast<std::size_t>(dim) * sizeof(float));
      });
  return output_;
}

const Tensor& Embedding::backward(const Tensor& grad_output, bool need_input_grad) {
  if (need_input_grad)
    throw ShapeError("layer '" + name() +
                     "' (Embedding) has no gradient with respect to its inputs (integer "
                     "indices): it must be the first layer with trainable weights, directly "
                     "after the input or after layers without weights");
  const std::int64_t n = static_cast<std::int64_t>(indices_.size()), dim = options_.output_dim;
  if (grad_output.size() != n * dim)
    throw ShapeError("layer '" + name() + "' (Embedding): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output");
  const float* g = grad_output.data();
  float* grad = embeddings_.grad.data();
  const std::int64_t* idx = indices_.data();
  // Each part owns the table rows [row0, row1): it zeroes them and adds the gradients of the
  // inputs that look them up, in input order, so the sums never depend on the threads.
  auto accumulate = [&](std::int64_t row0, std::int64_t row1) {
    std::fill(grad + row0 * dim, grad + row1 * dim, 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = idx[i];
      if (r < row0 || r >= row1) continue;
      float* gr = grad + r * dim;
      const float* gi = g + i * dim;
      for (std::int64_t c = 0; c < dim; ++c) gr[c] += gi[c];
    }
  };
  const std::int64_t vocab = options_.input_dim;
  if (n * dim + vocab * dim < (1 << 16))
    accumulate(0, vocab);
  else
    cpu::parallel_for(vocab, 1, accumulate);
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
          {"embeddings_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"embeddings_constraint", nullptr},
          {"mask_zero", false}};
}

}  // namespace tandem::nn
