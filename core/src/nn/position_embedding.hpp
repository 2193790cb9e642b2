// PositionEmbedding, as KerasHub (keras_nlp) defines it: a learned table of `sequence_length`
// position vectors, "embeddings" (sequence_length, features); called on a sequence (batch,
// time, features) with time <= sequence_length, it returns the first `time` rows of the table
// broadcast over the batch — the positions' embeddings, which a model then adds to its token
// embeddings (Add). The output does not depend on the input's values, so the input's gradient
// is zero; the table's gradient is the output gradient summed over the batch.
// Computes on its backend: the broadcast is an outer product with a column of ones (a GEMM with
// k = 1), the gradient a column sum. Ownership and threads: as every layer's.
#pragma once

#include "nn/initializer.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class PositionEmbedding : public Layer {
 public:
  PositionEmbedding(std::string name, std::int64_t sequence_length, Initializer initializer);
  std::string class_name() const override { return "PositionEmbedding"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&embeddings_}; }
  nlohmann::json config() const override;

 private:
  std::int64_t sequence_length_;
  Initializer initializer_;
  Shape input_shape_;      // (time, features)
  std::int64_t width_ = 0;  // time x features: the part of the table in use
  Parameter embeddings_;
  Tensor ones_, output_, table_grad_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
