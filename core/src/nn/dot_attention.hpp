// Keras' Attention layer (Luong-style dot-product attention over sequences, no projections):
// called on [query, value] or [query, value, key] (the key defaults to the value),
//   scores = query · keyᵀ (times the trainable scalar `scale` with use_scale),
//   weights = softmax(scores) over the keys, Dropout(weights) in training,
//   out = weights · value                                           (batch, Tq, value dim)
// A Keras mask of the value hides its masked keys and use_causal_mask every key after its query,
// as Keras does it in both versions: the hidden scores less 1e9 before the softmax (a query that
// sees no key gets near-uniform weights); a Keras mask of the query zeroes the masked queries'
// outputs, and the output carries it. score_mode "concat" (Bahdanau-style scores) is refused at
// its key. Weights: scale (a scalar of shape (), with use_scale).
//
// Computes on its backend: the products as batched GEMMs, the masked softmax (backend
// masked_softmax with Keras 2's additive rows), the scale as a one-column affine (so it stays on
// the device). Ownership and threads: as every layer's (tandem/layer.hpp); input pointers are
// borrowed from forward_inputs to the next backward_inputs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backend/attention_mask.hpp"
#include "nn/dropout.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct DotAttentionOptions {
  bool use_scale = false;
  bool causal = false;  // tf.keras' deprecated `causal` argument: use_causal_mask by default
  double dropout = 0;
  std::optional<std::uint64_t> seed;
};

class DotAttention : public Layer, public CallArguments, public MaskedSteps {
 public:
  DotAttention(std::string name, DotAttentionOptions options);
  std::string class_name() const override { return "Attention"; }
  bool takes_several_inputs() const override { return true; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<std::uint64_t> random_state() const override;
  void set_random_state(const std::vector<std::uint64_t>& state) override;

  /// Its tensors come as the first argument's list; its call option is use_causal_mask.
  bool first_argument_is_a_list() const override { return true; }
  std::vector<std::string> positional_arguments() const override { return {}; }
  void set_call_arguments(const std::vector<std::string>& tensors, const nlohmann::json& options,
                          const std::string& path) override;
  bool causal() const { return causal_; }

  bool output_masked(bool input_masked) const override { return input_masked; }
  void set_input_mask(const Tensor* mask) override { set_input_masks({mask}); }
  void set_input_masks(const std::vector<const Tensor*>& masks) override;
  const Tensor* output_mask() const override { return query_mask_; }

 private:
  std::string label() const { return "layer '" + name() + "' (Attention)"; }
  [[noreturn]] void refuse_one_input() const;
  backend::AttentionMaskDesc attention_desc() const;
  /// The keys the value's mask keeps, for every query (batch, Tq, Tv); null without one.
  const Tensor* key_mask(std::int64_t batch);

  DotAttentionOptions options_;
  bool causal_ = false;
  std::size_t inputs_ = 2;
  std::int64_t tq_ = 0, tv_ = 0, dim_ = 0, value_dim_ = 0;
  Shape query_shape_, value_shape_;
  Parameter scale_;
  std::unique_ptr<Dropout> dropout_;  // only with a dropout rate

  std::vector<const Tensor*> inputs_seen_;  // borrowed from the last forward
  const Tensor* query_mask_ = nullptr;      // Keras masks of the next forward (borrowed)
  const Tensor* value_mask_ = nullptr;
  const Tensor* mask_ = nullptr;  // this forward's scores mask (null: none)
  std::int64_t batch_ = 0;
  Tensor ones_, scores_mask_, raw_scores_, scores_, probs_, output_;
  const Tensor* attended_ = nullptr;
  Tensor d_out_, d_attended_, d_scores_, product_, d_query_, d_key_, d_value_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
