// Private (nn): what a layer may offer the engine beyond the public Layer interface. The SDK's
// Layer (tandem/layer.hpp) is what a plugin sees through a ModelView; these hooks are how the
// Model and the ReplicaModel tune the layers they run, and no plugin calls them.
//
// A layer offers a hook by also deriving from its interface; the engine asks with dynamic_cast
// (the `*_of()` helpers below), so a layer without the hook needs no code for it.
// Thread-safety: as the layer's (one thread at a time).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/ops.hpp"
#include "tandem/layer.hpp"
#include "tandem/model.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// A layer whose output is relu(z) and that can hand the relu to the next layer. After
/// set_output_relu_external(true) it outputs z and its backward() receives dL/dz.
class ReluProducer {
 public:
  virtual ~ReluProducer() = default;
  virtual bool has_output_relu() const = 0;
  virtual void set_output_relu_external(bool external) = 0;
};

/// A layer that can apply the previous layer's relu itself, on a smaller tensor: max pooling
/// computes relu(max z) = max relu(z) on its pooled output and masks its pooled gradient by
/// pooled output > 0 (each gradient lands on its window's maximum), exactly what the pair would
/// compute otherwise, on a 4× smaller tensor for 2×2 windows.
class ReluConsumer {
 public:
  virtual ~ReluConsumer() = default;
  virtual bool can_apply_input_relu() const = 0;
  virtual void set_apply_input_relu(bool apply) = 0;
};

/// A layer that can apply the relu of the layer that reads its output itself, in its own passes
/// (BatchNormalization: max(0, normalized) as it writes the output, and the gradient it receives
/// masked by output > 0 as it reads it). The reading layer — a PlainRelu with its relu
/// absorbed, an identity then — is paired with it by the Model; values and gradients are the
/// pair's own, bit for bit, with two passes over the tensor fewer each way.
class ReluAbsorber {
 public:
  virtual ~ReluAbsorber() = default;
  virtual void set_absorb_output_relu(bool absorb) = 0;
};

/// A layer that applies relu to its input and nothing else (Activation relu, Keras' plain ReLU):
/// after set_relu_absorbed(true) its input's producer applies the relu (ReluAbsorber) and it
/// passes its input and its gradient through unchanged.
class PlainRelu {
 public:
  virtual ~PlainRelu() = default;
  virtual bool is_plain_relu() const = 0;
  virtual void set_relu_absorbed(bool absorbed) = 0;
};

/// A layer whose statistics span the whole global batch (synchronized BatchNormalization), or
/// whose state must agree across replicas (BatchNormalization's moving statistics). The
/// ReplicaModel gives every replica's layer a sum over every replica of the run when there are
/// several (the function holds what it needs alive); an empty function makes the layer local.
class CrossReplicaStatistics {
 public:
  virtual ~CrossReplicaStatistics() = default;
  virtual bool wants_cross_replica_sum() const = 0;
  virtual void set_cross_replica_sum(backend::SumAcrossReplicas sum) = 0;
  /// The state a training forward moves (BatchNormalization's moving mean and variance): a
  /// pipeline keeps it per micro-batch and combines it once a step, as replicas are combined.
  virtual std::vector<Parameter*> moving_state() = 0;
  /// Makes the moving state the average over every replica of the run, weighted by `rows`
  /// (this replica's); nothing without a cross-replica sum. Every replica calls it (a collective).
  virtual void average_moving_state(std::int64_t rows) = 0;
  /// A training forward on a replica without rows, which runs no kernels (a GPU replica's): takes
  /// part, with no rows, in the averages over the replicas that a training forward with rows
  /// takes part in, so that the other replicas' forwards do not wait for it.
  virtual void forward_without_rows() = 0;
};

/// A layer whose Keras definition changed in Keras 3: hard_sigmoid (Keras 2's clip(0.2 x + 0.5,
/// 0, 1), Keras 3's relu6(x + 3) / 6) as its activation, MultiHeadAttention's query rows whose
/// keys are all masked (Keras 2: the softmax of the scores less 1e9, near uniform; Keras 3:
/// zeros). The Model calls use_keras2_definitions() before building it when the model config
/// names Keras 2 (nn/keras_generation.hpp); the layer's config() stays as Keras 2 writes it.
class KerasTwoDefinitions {
 public:
  virtual ~KerasTwoDefinitions() = default;
  virtual void use_keras2_definitions() = 0;
};

/// A layer whose calls in a functional model take tensor arguments after the first input, by
/// name, and keyword options (MultiHeadAttention: value, key, attention_mask; use_causal_mask).
/// The Model reads them from the call's inbound node and, before build_inputs, tells the layer
/// (each call's runner: a shared layer's twins too) which named tensors follow the first input
/// in its list forms, and the other keyword arguments.
class CallArguments {
 public:
  virtual ~CallArguments() = default;
  /// The names of the call's positional arguments after the first, in Keras' order (Keras 3
  /// writes positional tensors by position only).
  virtual std::vector<std::string> positional_arguments() const = 0;
  /// Whether the first argument is a list of tensors (Attention's [query, value, key]), not one.
  virtual bool first_argument_is_a_list() const { return false; }
  /// `tensors`: the names of the inputs after the first, in the list forms' order; `options`:
  /// the other keyword arguments (a JSON object; null values already dropped). Throws
  /// ConfigError at `path` for a name or an option the layer does not take.
  virtual void set_call_arguments(const std::vector<std::string>& tensors,
                                  const nlohmann::json& options, const std::string& path) = 0;
};

/// A layer whose call gives several tensors (a recurrent layer with return_state: its output
/// and its final states), which a functional model's references pick by Keras' tensor index
/// (["lstm", 0, 1]). Its forward returns them packed — each sample's row holding every part's
/// values flattened, in order, as a model packs its several outputs — and build() returns
/// {their total values}; its backward takes their gradients packed the same way (zeros for a
/// part nothing reads). The Model hands each reader the part it names.
class SeveralOutputs {
 public:
  virtual ~SeveralOutputs() = default;
  /// The parts' per-sample shapes, in Keras' order (after build; one part: a plain output).
  virtual std::vector<Shape> output_parts() const = 0;
};

class WeightConstraint;
class WeightRegularizer;

/// One of a layer's weights and the Keras rules on it, all the layer's: its constraint (null
/// for none), applied in place after every optimizer step, and its regularizer (null for none),
/// whose penalty joins the loss and whose gradient joins the weight's before the step.
struct RuledWeight {
  Parameter* weight = nullptr;
  const WeightConstraint* constraint = nullptr;
  const WeightRegularizer* regularizer = nullptr;
};

/// A layer whose weights may carry Keras constraints and regularizers (kernel_constraint,
/// bias_regularizer, ...): the replicas apply them (nn/constraint.hpp, nn/regularizer.hpp), on
/// the layer's backend, to its trainable weights only.
class WeightRules {
 public:
  virtual ~WeightRules() = default;
  /// The weights the layer uses, each with its rules (a bias only with use_bias).
  virtual std::vector<RuledWeight> ruled_weights() = 0;
};

/// A layer that reads or makes a Keras mask (which steps of a sequence are padding;
/// nn/sequence_masks.hpp): Embedding with mask_zero and Masking make one from their input, the
/// recurrent layers and Bidirectional skip the masked steps and pass the mask on with
/// return_sequences, MultiHeadAttention hides masked queries and keys. Masks are (batch, steps)
/// tensors of 0 and 1 on the layer's backend.
class MaskedSteps {
 public:
  virtual ~MaskedSteps() = default;
  /// Whether the output carries a mask, given whether the (first) input does.
  virtual bool output_masked(bool input_masked) const = 0;
  /// The mask of the next forward's input, or null: borrowed until the layer's next forward
  /// (its backward reads it too).
  virtual void set_input_mask(const Tensor* mask) = 0;
  /// The masks of each of its inputs (null where none), for a layer of several inputs (in its
  /// list forms' order); by default the first input's to set_input_mask.
  virtual void set_input_masks(const std::vector<const Tensor*>& masks) {
    set_input_mask(masks.empty() ? nullptr : masks[0]);
  }
  /// The mask of the last forward's output (null where output_masked says none): the layer's
  /// own tensor or its input's, valid until its next forward.
  virtual const Tensor* output_mask() const = 0;
};

/// A layer whose activity penalty its own config gives (Keras' ActivityRegularization: `l1`,
/// `l2`), not an `activity_regularizer` key: the Model takes it as the layer's activity
/// regularizer and writes no such key back.
class OwnActivityPenalty {
 public:
  virtual ~OwnActivityPenalty() = default;
  /// The penalty's l1 and l2 factors (sums over the layer's output, as Keras' L1L2).
  virtual std::pair<double, double> activity_penalty() const = 0;
};

/// The layer's hook, or null when it offers none. Borrowed from `layer`.
inline ReluProducer* relu_producer_of(Layer& layer) {
  return dynamic_cast<ReluProducer*>(&layer);
}
inline ReluConsumer* relu_consumer_of(Layer& layer) {
  return dynamic_cast<ReluConsumer*>(&layer);
}
inline ReluAbsorber* relu_absorber_of(Layer& layer) {
  return dynamic_cast<ReluAbsorber*>(&layer);
}
inline PlainRelu* plain_relu_of(Layer& layer) {
  return dynamic_cast<PlainRelu*>(&layer);
}
inline OwnActivityPenalty* own_activity_penalty_of(Layer& layer) {
  return dynamic_cast<OwnActivityPenalty*>(&layer);
}
inline KerasTwoDefinitions* keras_two_definitions_of(Layer& layer) {
  return dynamic_cast<KerasTwoDefinitions*>(&layer);
}
inline CrossReplicaStatistics* cross_replica_statistics_of(Layer& layer) {
  return dynamic_cast<CrossReplicaStatistics*>(&layer);
}
/// forward_without_rows() of every call's layer with cross-replica statistics, in the order of
/// `calls` (a model's forward order, as a forward with rows meets the other replicas).
inline void forward_without_rows(Model& model, const std::vector<std::size_t>& calls) {
  for (std::size_t k : calls)
    if (auto* stats = cross_replica_statistics_of(model.layer(model.call_layer(k))))
      stats->forward_without_rows();
}
/// The same for every call of `model`.
inline void forward_without_rows(Model& model) {
  std::vector<std::size_t> calls(model.call_count());
  for (std::size_t k = 0; k < calls.size(); ++k) calls[k] = k;
  forward_without_rows(model, calls);
}
inline CallArguments* call_arguments_of(Layer& layer) {
  return dynamic_cast<CallArguments*>(&layer);
}
inline WeightRules* weight_rules_of(Layer& layer) {
  return dynamic_cast<WeightRules*>(&layer);
}
inline MaskedSteps* masked_steps_of(Layer& layer) {
  return dynamic_cast<MaskedSteps*>(&layer);
}
inline SeveralOutputs* several_outputs_of(Layer& layer) {
  return dynamic_cast<SeveralOutputs*>(&layer);
}

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
