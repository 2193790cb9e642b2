// Keras' masks through a model's calls: which steps of the sequences each call's output leaves
// out. A mask starts where a layer makes one (Embedding with mask_zero, Masking), passes through
// the layers that work step by step (Keras' supports_masking with its default compute_mask:
// Dense, Dropout, activations, normalizations), combines at the merging layers (Keras 2: the
// masks given, AND; Keras 3: all given, OR) and at Concatenate (sequences side by side: as the
// merging layers, but Keras 3 keeps every step when an input has no mask; sequences one after
// the other: their masks one after the other), and ends where a layer reads it (the recurrent
// layers, whose last output carries none; GlobalAveragePooling1D; MultiHeadAttention, which
// passes the query's on; BatchNormalization, whose training statistics skip the masked steps and
// which passes it on) or where Keras drops it (layers without mask support: convolutions,
// pooling, Flatten, Reshape, EinsumDense, ...). A mask that reaches a model output weighs that
// output's loss and metrics, as Keras does (nn/objective.hpp). A mask that would reach a layer
// Keras applies it in and Tandem does not is a ConfigError naming the call.
//
// Ownership: made by the Model for its calls, after they are built; borrows their layers.
// Thread-safety: as the Model's (one thread at a time).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// One call of a model as the masks see it: the layer that runs it and its inputs (call indices,
/// negative for the model's inputs, which carry no mask).
struct MaskedCall {
  Layer* runner = nullptr;
  std::vector<int> inputs;
  /// The function called on a Keras tensor the call runs as its layer ("tf.math.multiply";
  /// nn/function_layers.hpp), "" for a layer's own call. A mask is refused there.
  std::string function;
};

class SequenceMasks {
 public:
  /// The plan for a model's calls (topological), or null when no call's output carries a mask.
  /// `keras2`: merges combine masks as Keras 2 does; `paths`: each call's config path, for
  /// errors.
  static std::unique_ptr<SequenceMasks> plan(const std::vector<MaskedCall>& calls, bool keras2,
                                             const std::vector<std::string>& paths);

  /// Whether any of call k's inputs carries a mask.
  bool input_masked(std::size_t k) const { return input_masked_[k]; }
  /// Whether call k's output (its first, for a layer giving several) carries a mask.
  bool output_masked(std::size_t k) const { return output_masked_[k]; }
  /// After call k's forward: its output's mask, (rows, steps) of 0/1 values, or null. Owned by
  /// this plan or by the layer that made it; valid until the next forward.
  const Tensor* output_mask(std::size_t k) const { return masks_[k]; }
  /// Before call k's forward: a layer that reads masks gets its input's.
  void before(std::size_t k);
  /// After call k's forward: its output's mask, as the plan says.
  void after(std::size_t k);

 private:
  enum class Use { none, pass, merge, join_features, join_steps, own };
  SequenceMasks(std::vector<MaskedCall> calls, std::vector<Use> uses,
                std::vector<bool> input_masked, std::vector<bool> output_masked, bool keras2)
      : calls_(std::move(calls)),
        uses_(std::move(uses)),
        input_masked_(std::move(input_masked)),
        output_masked_(std::move(output_masked)),
        keras2_(keras2),
        masks_(calls_.size(), nullptr),
        merged_(calls_.size()),
        scratch_(calls_.size()) {}
  const Tensor* input_mask(std::size_t k, std::size_t i) const;
  std::vector<const Tensor*> given_masks(std::size_t k) const;  // call k's inputs' non-null
  bool all_given(std::size_t k) const;
  void merge(std::size_t k);
  void join_steps(std::size_t k);

  std::vector<MaskedCall> calls_;
  std::vector<Use> uses_;
  std::vector<bool> input_masked_, output_masked_;
  bool keras2_;
  std::vector<const Tensor*> masks_;      // per call, its output's mask in this forward
  std::vector<Tensor> merged_, scratch_;  // a merging call's combined mask
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
