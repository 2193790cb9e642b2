#include "nn/category_encoding.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

std::string category_mode_name(CategoryMode mode) {
  switch (mode) {
    case CategoryMode::one_hot:
      return "one_hot";
    case CategoryMode::count:
      return "count";
    case CategoryMode::multi_hot:
      break;
  }
  return "multi_hot";
}

CategoryGeometry category_geometry(const Shape& input, CategoryMode mode, std::int64_t depth) {
  CategoryGeometry g;
  if (mode == CategoryMode::one_hot) {
    // Each index its own vector; a last axis of 1 gives way to the vector.
    g.output = input;
    if (!g.output.empty() && g.output.back() == 1) g.output.pop_back();
    g.inner = shape_size(g.output);
  } else if (!input.empty()) {
    // Keras reduces over the batch tensor's axis 1: the sample's first.
    g.n = input.front();
    g.output.assign(input.begin() + 1, input.end());
    g.inner = shape_size(g.output);
  }
  g.output.push_back(depth);
  return g;
}

std::string input_value_place(const Shape& input_shape, const backend::BadIndex& bad,
                              std::int64_t sample_offset) {
  const std::int64_t per_sample = std::max<std::int64_t>(shape_size(input_shape), 1);
  std::ostringstream where;
  where << "input[" << sample_offset + bad.position / per_sample;
  std::int64_t rest = bad.position % per_sample, stride = per_sample;
  for (std::int64_t d : input_shape) {
    stride /= d;
    where << ", " << rest / stride;
    rest %= stride;
  }
  where << "] = " << bad.value;
  return where.str();
}

void encode_categories(backend::Backend& ops, const Tensor& x, const Shape& input_shape,
                       const CategoryGeometry& geometry, std::int64_t depth, CategoryMode mode,
                       Tensor& y, const std::string& layer, const std::string& cls,
                       std::int64_t sample_offset) {
  Shape out{x.dim(0)};
  out.insert(out.end(), geometry.output.begin(), geometry.output.end());
  const auto bad = ops.encode_categories(x, ops.place(y, out), geometry.n, geometry.inner, depth,
                                         mode == CategoryMode::count);
  if (!bad) return;
  throw DataError("layer '" + layer + "' (" + cls +
                  "): " + input_value_place(input_shape, *bad, sample_offset) +
                  (bad->value == std::floor(bad->value)
                       ? " is a category outside [0, " + std::to_string(depth) + ")"
                       : " is not an integer category"));
}

Shape CategoryEncoding::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  geometry_ = category_geometry(input_shape, mode_, num_tokens_);
  return geometry_.output;
}

const Tensor& CategoryEncoding::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (CategoryEncoding)");
  encode_categories(ops(), x, input_shape_, geometry_, num_tokens_, mode_, output_, name(),
                    "CategoryEncoding", sample_offset());
  return output_;
}

const Tensor& no_input_gradient(backend::Backend& ops, std::int64_t rows, const Shape& input_shape,
                                bool need, Tensor& grad) {
  grad = Tensor();
  if (!need) return grad;
  Shape in{rows};
  in.insert(in.end(), input_shape.begin(), input_shape.end());
  ops.fill(ops.place(grad, in), 0.0f);
  return grad;
}

const Tensor& CategoryEncoding::backward(const Tensor&, bool need_input_grad) {
  return no_input_gradient(ops(), output_.dim(0), input_shape_, need_input_grad, grad_input_);
}

nlohmann::json CategoryEncoding::config() const {
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"num_tokens", num_tokens_},
          {"output_mode", category_mode_name(mode_)},
          {"sparse", false}};
}

}  // namespace tandem::nn
