// Keras' Bidirectional wrapper of a recurrent layer (SimpleRNN, LSTM, GRU): the wrapped layer
// runs forwards over the steps and a copy of it (or the config's `backward_layer`) backwards,
// and their outputs merge (`merge_mode` concat, sum, ave or mul); with return_sequences the
// backward layer's outputs are put back in the input's step order first, so step t of the output
// holds both directions' states at step t, as Keras computes it.
//
// The two layers are the wrapper's own (made from their configs by the layer registry), named
// as Keras names them ("forward_lstm", "backward_lstm"); their weights are the wrapper's, the
// forward layer's first, named "<forward_lstm>/<lstm_cell>/kernel" as Keras 2 writes them
// (Keras 3 keeps them under forward_layer/ and backward_layer/). They compute on the wrapper's
// backend. A Keras mask reaches both layers, whose masked steps output zeros with
// return_sequences (Keras forces zero_output_for_mask there). With the layers' return_state
// the call gives the merged output, then the forward layer's final states, then the backward
// layer's (nn::SeveralOutputs), as Keras' Bidirectional does; a functional call may give initial
// states, the forward layer's first half, the backward layer's second (Keras' split).
// Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/layer_extensions.hpp"
#include "nn/recurrent.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

enum class MergeMode { concat, sum, ave, mul };

/// Keras' name of a merge mode ("concat") and the mode of a name (nullopt for none).
std::string merge_mode_name(MergeMode mode);
std::optional<MergeMode> merge_mode_named(const std::string& name);

/// The name of a Bidirectional's layer for direction `prefix` ("forward_", "backward_") whose
/// config names it `name`: the prefix added unless the name has it already (Keras 3 writes its
/// layers' configs with the names it gave them, "forward_lstm").
inline std::string direction_layer_name(const std::string& prefix, const std::string& name) {
  return name.rfind(prefix, 0) == 0 ? name : prefix + name;
}

class Bidirectional : public Layer,
                      public WeightRules,
                      public KerasTwoDefinitions,
                      public MaskedSteps,
                      public SeveralOutputs,
                      public CallArguments {
 public:
  /// `forward` and `backward` are recurrent layers alike but for the step order (backward's
  /// go_backwards the opposite of forward's), named as direction_layer_name names them;
  /// `own_backward`: the config gave the backward layer (config() writes it back then).
  Bidirectional(std::string name, std::unique_ptr<Recurrent> forward,
                std::unique_ptr<Recurrent> backward, MergeMode merge, bool own_backward);
  std::string class_name() const override { return "Bidirectional"; }
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& given_grad, bool need_input_grad) override;
  bool takes_several_inputs() const override { return called_with_arguments_; }
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;
  std::vector<Shape> output_parts() const override;
  std::vector<std::string> positional_arguments() const override { return {"initial_state"}; }
  bool first_argument_is_a_list() const override { return true; }
  void set_call_arguments(const std::vector<std::string>& tensors, const nlohmann::json& options,
                          const std::string& path) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;
  std::vector<std::uint64_t> random_state() const override;
  void set_random_state(const std::vector<std::uint64_t>& state) override;
  void use_keras2_definitions() override;
  bool output_masked(bool input_masked) const override { return input_masked && sequences_; }
  void set_input_mask(const Tensor* mask) override;
  const Tensor* output_mask() const override { return sequences_ ? input_mask_ : nullptr; }

 private:
  /// The two layers on this layer's backend, their rows where this layer's are.
  void place_layers();
  /// `layer` forward on x, from its half of the initial states when the call gives them.
  const Tensor& run_layer(Recurrent& layer, const Tensor& x, std::size_t half, bool training);
  /// The merged output's width per sample (set by build), and the states' (each layer's) with
  /// return_state.
  std::int64_t merged_width() const { return merged_width_; }
  std::int64_t state_width() const;
  /// `d_main` (the gradient of one layer's own output) and that layer's final states' gradients
  /// (columns `from` of the packed gradient) as the layer's packed gradient, in `into`.
  const Tensor& layer_gradient(const Tensor& d_main, const Tensor& given_grad, std::int64_t from,
                               Tensor& into);

  std::unique_ptr<Recurrent> forward_, backward_;
  MergeMode merge_;
  bool own_backward_;
  bool sequences_;  // the layers' return_sequences
  bool states_;     // the layers' return_state
  bool called_with_arguments_ = false;
  std::vector<const Tensor*> initial_;  // this forward's initial states (borrowed), or none
  std::vector<const Tensor*> input_grads_;
  const Tensor* ahead_all_ = nullptr;  // the layers' last outputs, with their states
  const Tensor* behind_all_ = nullptr;
  Tensor packed_, merged_grad_, d_forward_packed_, d_backward_packed_;
  std::int64_t steps_ = 0, units_ = 0, merged_width_ = 0;
  const Tensor* input_mask_ = nullptr;   // Keras' mask of the padding steps, both layers read it
  const Tensor* forward_out_ = nullptr;  // the last forward's outputs (the layers' buffers)
  Tensor backward_out_;                  // the backward layer's, in the input's step order
  Tensor output_, d_forward_, d_backward_, d_backward_steps_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
