// Keras' Attention and AdditiveAttention layers (attention over sequences, no projections):
// called on [query, value] or [query, value, key] (the key defaults to the value),
//   scores  = Attention, score_mode "dot" (Luong):   query · keyᵀ, times the scalar `scale`
//                                                    with use_scale
//             Attention, score_mode "concat":        concat_score_weight ·
//                                                    Σ_d tanh(scale · (q[d] + k[d]))
//                                                    (scale only with use_scale)
//             AdditiveAttention (Bahdanau):          Σ_d scale[d] · tanh(q[d] + k[d])
//                                                    (scale of shape (dim,) with use_scale,
//                                                    Keras' default; glorot_uniform)
//   weights = softmax(scores) over the keys, Dropout(weights) in training,
//   out     = weights · value                        (batch, Tq, value dim)
// A Keras mask of the value hides its masked keys and use_causal_mask every key after its query,
// as Keras does it in both versions: the hidden scores less 1e9 before the softmax (a query that
// sees no key gets near-uniform weights); a Keras mask of the query zeroes the masked queries'
// outputs, and the output carries it. Weights, in Keras' order and names: scale (with
// use_scale: shape () for Attention, (dim,) for AdditiveAttention), concat_score_weight (shape
// (), score_mode "concat"; initializer "ones" as scale's for Attention).
//
// Computes on its backend: the dot scores as batched GEMMs, the additive ones by the backend's
// additive_pairs and additive_scores (backend/additive_scores_math.hpp: the tanh of every
// query-key pair, (batch, Tq, Tv, dim) values, kept for the backward as PyTorch's autograd keeps
// them), the masked softmax (backend masked_softmax with Keras 2's additive rows), a scalar factor
// on the scores as a one-column affine (so it stays on the device). Ownership and threads: as every
// layer's (tandem/layer.hpp); input pointers are borrowed from forward_inputs to the next
// backward_inputs.
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

/// How the scores are taken: Attention's two score modes, and AdditiveAttention's.
enum class AttentionScores { dot, concat, additive };

struct AttentionLayerOptions {
  AttentionScores scores = AttentionScores::dot;
  bool use_scale = false;
  bool causal = false;  // tf.keras' deprecated `causal` argument: use_causal_mask by default
  double dropout = 0;
  std::optional<std::uint64_t> seed;
};

class AttentionLayer : public Layer, public CallArguments, public MaskedSteps {
 public:
  AttentionLayer(std::string name, AttentionLayerOptions options);
  std::string class_name() const override {
    return options_.scores == AttentionScores::additive ? "AdditiveAttention" : "Attention";
  }
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
  AttentionScores scores() const { return options_.scores; }

  bool output_masked(bool input_masked) const override { return input_masked; }
  void set_input_mask(const Tensor* mask) override { set_input_masks({mask}); }
  void set_input_masks(const std::vector<const Tensor*>& masks) override;
  const Tensor* output_mask() const override { return query_mask_; }

 private:
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }
  [[noreturn]] void refuse_one_input() const;
  backend::AttentionMaskDesc attention_desc() const;
  backend::AdditiveScoresDesc additive_desc() const;
  /// The scalar the scores are multiplied by after they are taken (dot's scale, concat's
  /// concat_score_weight), or null.
  Parameter* score_multiplier();
  /// scores_ (batch_ samples) from the query and the key.
  void take_scores(const Tensor& query, const Tensor& key);
  /// The gradients of the scores' weights and, with need_input_grad, d_query_ and d_key_, from
  /// d_scores_ (which this may scale in place).
  void scores_backward(const Tensor& query, const Tensor& key, bool need_input_grad);
  /// The keys the value's mask keeps, for every query (batch, Tq, Tv); null without one.
  const Tensor* key_mask(std::int64_t batch);

  AttentionLayerOptions options_;
  bool causal_ = false;
  std::size_t inputs_ = 2;
  std::int64_t tq_ = 0, tv_ = 0, dim_ = 0, value_dim_ = 0;
  Shape query_shape_, value_shape_;
  Parameter scale_;                   // with use_scale
  Parameter concat_score_weight_;     // score_mode "concat"
  std::unique_ptr<Dropout> dropout_;  // only with a dropout rate

  std::vector<const Tensor*> inputs_seen_;  // borrowed from the last forward
  const Tensor* query_mask_ = nullptr;      // Keras masks of the next forward (borrowed)
  const Tensor* value_mask_ = nullptr;
  const Tensor* mask_ = nullptr;  // this forward's scores mask (null: none)
  std::int64_t batch_ = 0;
  Tensor ones_, scores_mask_, raw_scores_, scores_, probs_, output_;
  const Tensor* attended_ = nullptr;
  Tensor d_out_, d_attended_, d_scores_, product_, d_query_, d_key_, d_value_;
  Tensor pairs_;                        // additive scores: tanh of every query-key pair
  Tensor weight_parts_, factor_parts_;  // additive scores: per query row shares of d scale
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
