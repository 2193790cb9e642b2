// MultiHeadAttention, Keras semantics (keras.layers.MultiHeadAttention over sequences: inputs
// (batch, time, features), attention over the time axis):
//   Q = query · Wq + bq, K = key · Wk + bk, V = value · Wv + bv     (per head: (H, key_dim) ...)
//   P = softmax(Q Kᵀ / sqrt(key_dim)) per head, hiding masked keys (attention_mask (batch, Tq,
//       Tv) == 0, and with use_causal_mask every key after its query); Dropout(P) in training
//   out = concat_heads(P V) · Wo + bo                                 (batch, Tq, output dim)
// Weights in Keras order and layout: query/kernel (Dq, H, key_dim), query/bias (H, key_dim),
// key/kernel, key/bias, value/kernel (Dv, H, value_dim), value/bias, attention_output/kernel
// (H, value_dim, out), attention_output/bias (out); initialised with Keras' fans for these
// shapes. The call takes the query first and then, by name (functional models' call
// arguments), value (required), key (default: value) and attention_mask (optional), plus the
// option use_causal_mask; Keras masks of the inputs hide masked queries and keys too. Gradients
// go to query, value, key and (zeros) to the mask. A query
// whose keys are all hidden gets what the Keras version gives (hidden_attention_rows).
//
// GroupedQueryAttention (Keras 3) is the same layer with fewer key and value heads than query
// heads (num_key_value_heads dividing num_query_heads): query head u reads key/value head
// u / (num_query_heads / num_key_value_heads), as Keras' ops.repeat of the keys and values
// along the heads gives it; key_dim = value_dim = head_dim, the output the query's features.
// Its key/value kernels are (D, kv heads, head_dim).
//
// Computes on its backend: projections as GEMMs with the bias in the epilogue, the heads'
// products as batched GEMMs over (batch x heads), the masked softmax, axis swaps between
// (batch, time, heads, dim) and (batch, heads, time, dim). With grouped heads the products run
// over (batch x kv heads), each a group's queries stacked as rows of one product (the query
// heads of a group are adjacent in (batch, heads, time, dim)), so no key or value is copied and
// the keys' and values' gradients sum over their group in the product. The dropout of P is a
// Dropout layer of its own (Keras' too), seeded from the layer's `seed` or the model's stream.
// Ownership and threads: as every layer's (tandem/layer.hpp); input pointers are borrowed from
// forward_inputs to the next backward_inputs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/attention_mask.hpp"
#include "nn/dense_products_of.hpp"
#include "nn/dropout.hpp"
#include "nn/initializer.hpp"
#include "nn/layer_extensions.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct MultiHeadAttentionOptions {
  std::int64_t num_heads = 1;
  std::int64_t key_value_heads = 0;  // 0: num_heads (GroupedQueryAttention's fewer)
  std::int64_t key_dim = 0;
  std::int64_t value_dim = 0;  // 0: key_dim
  double dropout = 0;
  bool use_bias = true;
  std::optional<std::int64_t> output_dim;  // Keras' output_shape; default: the query's features
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
  std::optional<std::uint64_t> seed;
};

/// What a query whose keys are all hidden attends to in a MultiHeadAttention layer of this Keras
/// version and dropout rate (backend::HiddenRows): in a Keras 2 model the softmax of its scores
/// less 1e9 (tf.keras' additive mask); in Keras 3 uniformly without dropout (its fused
/// dot_product_attention, which replaces every hidden score by the same large negative number)
/// and nothing with dropout (its masked softmax), neither with a gradient to the scores.
backend::HiddenRows hidden_attention_rows(bool keras2, double dropout);

class MultiHeadAttention : public Layer,
                           public CallArguments,
                           public KerasTwoDefinitions,
                           public MaskedSteps {
 public:
  MultiHeadAttention(std::string name, MultiHeadAttentionOptions options);
  std::string class_name() const override { return "MultiHeadAttention"; }
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

  std::vector<std::string> positional_arguments() const override {
    return {"value", "key", "query_mask", "value_mask", "key_mask", "attention_mask"};
  }
  void set_call_arguments(const std::vector<std::string>& tensors, const nlohmann::json& options,
                          const std::string& path) override;
  /// Keras masks of the query, value and key (Embedding's mask_zero, ...) hide the masked
  /// queries and keys, with the attention_mask when given (Keras' _compute_attention_mask:
  /// query_mask[:, :, None] & value_mask[:, None, :] & key_mask[:, None, :] & attention_mask);
  /// the output carries the query's mask.
  bool output_masked(bool input_masked) const override { return input_masked; }
  void set_input_mask(const Tensor* mask) override { set_input_masks({mask}); }
  void set_input_masks(const std::vector<const Tensor*>& masks) override;
  const Tensor* output_mask() const override { return query_mask_; }

  /// A query whose keys are all masked attends as in Keras 2 (hidden_attention_rows).
  void use_keras2_definitions() override { keras2_hidden_rows_ = true; }

 private:
  /// A projection's weights: kernel (in, heads, dim) and bias (heads, dim), named `prefix/...`.
  struct Projection {
    Parameter kernel, bias;
    std::int64_t in = 0, width = 0;  // input features; heads x dim
    Tensor out, grad_out, grad_in;   // (rows, width); its gradient; the input's gradient
    DenseProductsOf products;
  };
  void build_projection(Projection& p, std::int64_t in, const Shape& kernel_tail, Rng& init);
  void project(Projection& p, const Tensor& x);
  /// Sets p's kernel and bias gradients from p.grad_out; with need_input_grad, p.grad_in.
  void project_backward(Projection& p, const Tensor& x, bool need_input_grad);
  /// The products of x (rows x in) with a (in x width) kernel, with the bias when use_bias.
  backend::DenseProducts& products(DenseProductsOf& of, std::int64_t in, std::int64_t width);
  std::int64_t output_dim() const;
  void check_inputs(const std::vector<const Tensor*>& inputs) const;
  std::string label() const { return "layer '" + name() + "' (" + class_name() + ")"; }
  /// The masked softmax of this layer's scores (hidden_attention_rows).
  backend::AttentionMaskDesc attention_desc() const;
  /// Query heads per key/value head.
  std::int64_t group() const { return options_.num_heads / options_.key_value_heads; }

  MultiHeadAttentionOptions options_;
  // Where value, key and the mask sit in the call's inputs (0 is the query; -1: absent).
  int value_at_ = -1, key_at_ = -1, mask_at_ = -1;
  bool causal_ = false;
  bool keras2_hidden_rows_ = false;  // use_keras2_definitions()
  std::size_t inputs_ = 1;

  std::int64_t tq_ = 0, tv_ = 0, query_features_ = 0;
  Shape query_shape_, value_shape_, key_shape_;
  Projection query_, key_, value_;
  Parameter output_kernel_, output_bias_;
  DenseProductsOf output_products_;
  std::unique_ptr<Dropout> dropout_;  // only with a dropout rate

  std::vector<const Tensor*> inputs_seen_;  // borrowed from the last forward
  // Keras masks of the next forward's query and keys (the value's, the key's; borrowed, null for
  // none) and the attention mask they make with the call's attention_mask (null: that alone).
  const Tensor* query_mask_ = nullptr;
  std::vector<const Tensor*> key_masks_;
  Tensor ones_, key_mask_, auto_mask_;
  const Tensor* combined_mask_ = nullptr;
  /// The attention mask of this forward (null: none), computed from the masks above.
  const Tensor* attention_mask(const Tensor* explicit_mask, std::int64_t batch);
  std::int64_t batch_ = 0;
  Tensor qh_, kh_, vh_, scores_, probs_, context_, context_t_, output_;
  Tensor d_context_t_, d_context_, d_probs_, d_scores_, d_vh_, d_qh_, d_kh_, d_value_,
      mask_grad_;
  const Tensor* attended_ = nullptr;  // probs_, or the dropout's output

 protected:
  const MultiHeadAttentionOptions& options() const { return options_; }
};

/// Keras 3's GroupedQueryAttention (above); its config: head_dim, num_query_heads,
/// num_key_value_heads, dropout, use_bias, the initializers, seed.
class GroupedQueryAttention : public MultiHeadAttention {
 public:
  GroupedQueryAttention(std::string name, MultiHeadAttentionOptions options)
      : MultiHeadAttention(std::move(name), std::move(options)) {}
  std::string class_name() const override { return "GroupedQueryAttention"; }
  nlohmann::json config() const override;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
