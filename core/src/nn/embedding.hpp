// Embedding: looks up rows of a (input_dim, output_dim) table, Keras semantics.
//
// Inputs (batch, d1, ...) hold integer-valued floats (token indices); outputs are
// (batch, d1, ..., output_dim). The weight is "embeddings", shape (input_dim, output_dim), drawn
// by default from Keras' "uniform" initializer (RandomUniform(-0.05, 0.05)). With mask_zero, index
// 0 is padding: the output carries Keras' mask, 0 where the index is 0 (nn/sequence_masks.hpp).
//
// An index outside [0, input_dim), or a value that is not an integer, is a DataError naming the
// layer, the position and the value (Keras would cast to int32 and fail or clip by backend; Tandem
// refuses). backward() sets the dense gradient of the table: the rows of the looked-up indices get
// the sum of their output gradients, accumulated in input order (deterministic; each thread owns
// a range of table rows). Indices have no gradient: an Embedding must be the first layer with
// weights (directly after the input or after weightless layers); backward() with
// need_input_grad=true is a ShapeError saying so.
#pragma once

#include <optional>
#include <vector>

#include "nn/constraint.hpp"
#include "nn/initializer.hpp"
#include "nn/regularizer.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct EmbeddingOptions {
  std::int64_t input_dim = 0;
  std::int64_t output_dim = 0;
  Initializer embeddings_initializer{"random_uniform", std::nullopt, 0};
  /// tf.keras' `input_length`: when given, the first per-sample axis must have this length.
  std::optional<std::int64_t> input_length;
  WeightConstraint embeddings_constraint;
  WeightRegularizer embeddings_regularizer;
  bool mask_zero = false;
};

/// The DataError for element `i` (flat, within this layer's rows) of an Embedding input whose
/// value `v` is not an integer index in [0, vocab): it names the element as input[sample, ...],
/// the sample's place in the global batch.
[[noreturn]] void throw_bad_embedding_index(const std::string& layer, const Shape& input_shape,
                                            std::int64_t sample_offset, std::int64_t i, float v,
                                            std::int64_t vocab);

class Embedding : public Layer, public WeightRules, public MaskedSteps {
 public:
  Embedding(std::string name, EmbeddingOptions options);
  std::string class_name() const override { return "Embedding"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  /// Throws DataError for an index that is not an integer in [0, input_dim).
  const Tensor& forward(const Tensor& x, bool training) override;
  /// Throws ShapeError when need_input_grad (indices have no gradient).
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&embeddings_}; }
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override {
    return {{&embeddings_, &options_.embeddings_constraint, &options_.embeddings_regularizer}};
  }
  bool output_masked(bool /*input_masked*/) const override { return options_.mask_zero; }
  void set_input_mask(const Tensor* /*mask*/) override {}
  const Tensor* output_mask() const override { return options_.mask_zero ? &mask_ : nullptr; }

 private:
  EmbeddingOptions options_;
  Shape input_shape_;
  Parameter embeddings_;
  Tensor input_;  // the last forward's indices (shared storage, not a copy)
  Tensor output_, grad_input_;
  Tensor mask_;  // with mask_zero: 1 where the index is not 0
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
