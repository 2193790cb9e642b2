// CategoryEncoding, Keras semantics: integer category indices in [0, num_tokens) to vectors of
// num_tokens values: "one_hot" (each index its own vector; a last axis of 1 is replaced),
// "multi_hot" (1 where an index of the sample's first axis is, default) or "count" (how many),
// as Keras' encode_categorical_inputs reduces over the batch tensor's axis 1 (a sample of shape
// (n, m...) gives (m..., num_tokens)). An index that is no integer in range is a DataError
// naming the sample. No weights; no gradient (zeros to the input: Keras' outputs are integers).
// The encoding is shared with Discretization's other output modes. Ownership and threads: as
// every layer's.
#pragma once

#include <string>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::backend {
struct BadIndex;
}  // namespace tandem::backend

namespace tandem::nn {

enum class CategoryMode { one_hot, multi_hot, count };

/// Keras' name of a mode ("one_hot", ...).
std::string category_mode_name(CategoryMode mode);

/// How a batch of indices of sample shape `input` is encoded into `depth` values: x seen as
/// [batch, n, inner], the output sample shape.
struct CategoryGeometry {
  std::int64_t n = 1, inner = 1;
  Shape output;
};
CategoryGeometry category_geometry(const Shape& input, CategoryMode mode, std::int64_t depth);

/// Where a bad value of a batch is, for an error: "input[7, 2] = 3.5" (the sample global, by
/// `sample_offset`; then its place in a sample of `input_shape`).
std::string input_value_place(const Shape& input_shape, const backend::BadIndex& bad,
                              std::int64_t sample_offset);

/// Encodes x (indices) into y on `ops`; a bad index is a DataError naming `layer` (its class
/// `cls`), the sample (global, by `sample_offset`) and the place.
void encode_categories(backend::Backend& ops, const Tensor& x, const Shape& input_shape,
                       const CategoryGeometry& geometry, std::int64_t depth, CategoryMode mode,
                       Tensor& y, const std::string& layer, const std::string& cls,
                       std::int64_t sample_offset);

/// The input gradient of a layer whose outputs are integers, which no gradient goes through:
/// zeros of the input's shape for `rows` samples placed in `grad` when `need`, else empty.
const Tensor& no_input_gradient(backend::Backend& ops, std::int64_t rows, const Shape& input_shape,
                                bool need, Tensor& grad);

class CategoryEncoding : public Layer {
 public:
  CategoryEncoding(std::string name, std::int64_t num_tokens, CategoryMode mode)
      : Layer(std::move(name)), num_tokens_(num_tokens), mode_(mode) {}
  std::string class_name() const override { return "CategoryEncoding"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  nlohmann::json config() const override;

 private:
  std::int64_t num_tokens_;
  CategoryMode mode_;
  Shape input_shape_;
  CategoryGeometry geometry_;
  Tensor output_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
