// Keras' recurrent layers SimpleRNN, LSTM and GRU over sequences (batch, steps, features): the
// cell runs over the steps (backwards with go_backwards, Keras' reversed output order), from
// zero states; the output is every step's h (return_sequences) or the last one's.
//
// How it computes, on its backend: the input's products with the kernel for every step at once
// (one GEMM over steps × batch rows, time-major), then per step the product of h_prev with the
// recurrent kernel (a GEMM) and the cell's element-wise step (backend lstm_step_* / gru_step_*;
// SimpleRNN an add and its activation); the backward runs the steps in reverse and takes the
// kernels' gradients as two GEMMs over every step (a GRU with reset_after false takes its
// recurrent products in two rounds: nn/gru_reset_before.hpp). Weights, in Keras' order and
// shapes: kernel (features, gates·units), recurrent_kernel (units, gates·units), bias
// (gates·units; the default GRU's (2, 3·units): input and recurrent biases), gates 1, 4 (i, f,
// c, o) and 3 (z, r, h). Their
// Keras 2 names are "<cell>/kernel" ("lstm_cell/kernel"), as Keras 2 writes them. Keras' RNN
// layer over one cell (`RNN(LSTMCell(...))`) is the same layer under the class name "RNN", the
// cell's own name in its weights' (RecurrentOptions::rnn_cell).
//
// A Keras mask (nn/sequence_masks.hpp: Embedding's mask_zero, Masking) skips the padding steps
// as Keras' RNN does: a masked step keeps the states before it, and its output is the last kept
// step's (zeros with zero_output_for_mask); with return_sequences the mask passes on.
//
// return_state: the call gives its output and then its final states (h; the LSTM's h and c),
// packed as nn::SeveralOutputs says, which a functional model's references take apart
// (["lstm", 0, 1] is h). initial_state: in a functional model the call may take the states to
// start from — Keras 2 writes them after the sequence in the call's first argument
// ([x, h, c]), Keras 3 as the keyword initial_state — instead of zeros, and gives their
// gradients back (an encoder's final states starting a decoder, seq2seq).
//
// dropout: one mask per sample and feature, the same at every step (Keras' dropout mask of the
// cell's inputs); recurrent_dropout: one per sample and unit, applied to h_prev where it enters
// the recurrent product (Keras 3's LSTM), not to the state carried on. Both draw from the layer's
// random stream (nn/random_stream.hpp), so they do not depend on the device plan.
// Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <optional>

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/constraint.hpp"
#include "nn/gru_reset_before.hpp"
#include "nn/initializer.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/random_stream.hpp"
#include "nn/regularizer.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

enum class RecurrentKind { simple_rnn, lstm, gru };

/// The call arguments a recurrent layer (and a Bidirectional) takes in a functional model: its
/// initial states, tensors named initial_state, and no options. Throws ConfigError at `path`
/// naming `who` ("layer 'lstm' (LSTM)").
void check_recurrent_call_arguments(const std::string& who, const std::vector<std::string>& tensors,
                                    const nlohmann::json& options, const std::string& path);

/// The shapes a call with initial states passes (the sequence's, then the states'): none, or
/// `count` states (`which` says which, "2 initial states (h and c)") of per-sample shape `state`
/// each ((units), a ConvLSTM's (grid..., filters)). Throws ShapeError naming `who`.
void check_initial_states(const std::string& who, const std::vector<Shape>& input_shapes,
                          std::size_t count, const std::string& which, const Shape& state);

/// An LSTM's bias of 4 · `units` values (gates i, f, c, o) as Keras fills it: `initializer`'s
/// values, or with unit_forget_bias its values for i, ones for f, then its values for c and o
/// (Keras' concatenate of the three, drawn in that order). ConvLSTM's too.
void fill_lstm_bias(Tensor& bias, const Initializer& initializer, std::int64_t units,
                    bool unit_forget_bias, Rng& init);

/// `to` = `from` (batch, steps, width; on `ops`' device) time-major, (steps · batch, width), in
/// processing order: its steps reversed first (into `scratch`) when `reversed` (go_backwards).
void time_major(backend::Backend& ops, const Tensor& from, std::int64_t batch,
                std::int64_t steps, std::int64_t width, bool reversed, Tensor& scratch,
                Tensor& to);

/// `to` = `from` (batch, steps, width; on `ops`' device) with its steps in reverse order.
void reverse_steps(backend::Backend& ops, const Tensor& from, Tensor& to, std::int64_t steps,
                   std::int64_t width);

/// Keras' cell of a recurrent layer: its default name ("lstm_cell") and its class ("LSTMCell").
std::string recurrent_cell_name(RecurrentKind kind);
std::string recurrent_cell_class(RecurrentKind kind);

struct RecurrentOptions {
  RecurrentKind kind = RecurrentKind::lstm;
  std::int64_t units = 0;
  ActivationKind activation = ActivationKind::tanh;
  ActivationKind recurrent_activation = ActivationKind::sigmoid;  // LSTM and GRU
  bool use_bias = true;
  bool unit_forget_bias = true;  // LSTM: the forget gate's bias starts at 1
  /// GRU: Keras' reset_after. False: the reset gate applied to h_prev before the recurrent
  /// kernel (nn/gru_reset_before.hpp), one bias (3·units) for the input products only.
  bool reset_after = true;
  bool return_sequences = false;
  bool return_state = false;  // the final states after the output (SeveralOutputs)
  bool go_backwards = false;
  /// A masked step's output is zeros, not the last kept step's (Keras' RNN option, which
  /// Bidirectional sets to return_sequences for its layers).
  bool zero_output_for_mask = false;
  double dropout = 0, recurrent_dropout = 0;
  std::optional<std::uint64_t> seed;
  /// Keras' RNN layer over a cell (`RNN(LSTMCell(...))`), which computes what the cell's own
  /// layer does: the cell's name ("lstm_cell_1", its weights' "<cell>/kernel" in Keras 2 files),
  /// and the layer is "RNN", its config the RNN's keys with the cell's under `cell`.
  std::optional<std::string> rnn_cell;
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer recurrent_initializer{"orthogonal", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
  WeightConstraint kernel_constraint, recurrent_constraint, bias_constraint;
  WeightRegularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
};

class Recurrent : public Layer,
                  public WeightRules,
                  public KerasTwoDefinitions,
                  public MaskedSteps,
                  public SeveralOutputs,
                  public CallArguments {
 public:
  Recurrent(std::string name, RecurrentOptions options);
  std::string class_name() const override;
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& given_grad, bool need_input_grad) override;
  /// In a functional model: the sequence, then the initial states when the call passes them.
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
  bool returns_sequences() const { return options_.return_sequences; }
  bool returns_state() const { return options_.return_state; }
  /// The last forward's output without the states return_state adds (what Keras calls the
  /// layer's output): the layer's buffer, valid until its next forward.
  const Tensor& sequence_output() const { return output_; }
  /// After a backward with need_input_grad of a forward from given states: their gradients
  /// (the layer's buffers, valid until its next backward).
  const std::vector<Tensor>& initial_state_gradients() const { return initial_grads_; }
  /// The states the cell has per step: 2 for LSTM (h, c), else 1 (h).
  std::size_t state_count() const { return options_.kind == RecurrentKind::lstm ? 2 : 1; }
  bool goes_backwards() const { return options_.go_backwards; }
  /// Keras' zero_output_for_mask (Bidirectional sets it to return_sequences, as Keras does).
  void set_zero_output_for_mask(bool zero) { options_.zero_output_for_mask = zero; }
  bool output_masked(bool input_masked) const override {
    return input_masked && options_.return_sequences;
  }
  void set_input_mask(const Tensor* mask) override { sequence_mask_ = mask; }
  const Tensor* output_mask() const override {
    return options_.return_sequences ? sequence_mask_ : nullptr;
  }

 private:
  std::string who() const;
  /// The products per unit: 1, 4 or 3.
  std::int64_t gates() const;
  /// Rows [s·rows, (s + 1)·rows) of a time-major buffer of `width` units a row: step s's slice.
  Tensor step(const Tensor& t, std::int64_t s, std::int64_t width) const;
  /// The GRU's input bias (row 0 of its bias) or the whole bias; its recurrent bias (row 1).
  Tensor input_bias(const Tensor& bias) const;
  Tensor recurrent_bias(const Tensor& bias) const;
  /// A GRU with reset_after false.
  bool reset_before() const { return options_.kind == RecurrentKind::gru && !options_.reset_after; }
  /// The GRU with its two biases (reset_after true).
  bool two_biases() const { return options_.kind == RecurrentKind::gru && options_.reset_after; }
  /// h_prev of step s as the recurrent products read it (after recurrent dropout).
  Tensor h_in(std::int64_t s) const;
  /// Whether the layer draws random numbers (dropout or recurrent dropout).
  bool draws() const { return options_.dropout > 0 || options_.recurrent_dropout > 0; }
  /// What `pre_` keeps per unit of a step: 4 for LSTM and GRU, SimpleRNN's pre-activation 1.
  std::int64_t pre_width() const {
    return (options_.kind == RecurrentKind::simple_rnn ? 1 : 4) * options_.units;
  }
  void processing_order(const Tensor& from, std::int64_t width, Tensor& to);
  void time_major_input(const Tensor& x, bool training);
  void time_major_mask();
  /// With a mask, step s's rows: 1 where the step is kept (a view of steps_mask_).
  Tensor kept(std::int64_t s) const { return step(steps_mask_, s, 1); }
  void draw_recurrent_mask(bool training);
  void run_cell(std::int64_t s);
  void cell_backward(std::int64_t s, const Tensor& dh, Tensor* dc);
  /// The gradient of step s's output h into dh_ (the output's and the carried one), then split
  /// by the step's mask into the cell's part (dh_cell_) and the skipped step's (left in dh_).
  void step_gradient(std::int64_t s, const Tensor& grad_output);
  void write_output();
  /// h_0 (and c_0) from the call's initial states, else zeros.
  void initial_states();
  /// With return_state: output_ (the sequence's output) and the final states into packed_.
  void pack_outputs();
  /// The sequence output's part of `grad_output` (packed with return_state) into the carried
  /// gradients of the final states; returns the output's own gradient.
  const Tensor& unpack_gradient(const Tensor& grad_output);
  void kernel_gradients();
  void input_gradient();

  RecurrentOptions options_;
  std::int64_t steps_ = 0, features_ = 0, rows_ = 0;
  Parameter kernel_, recurrent_kernel_, bias_;
  RandomStream random_;
  backend::RecurrentCellDesc cell_;
  GruResetBefore reset_before_products_;  // used by a GRU with reset_after false

  // The last forward's, time-major (step s's rows at s·rows): the input in processing order
  // (after dropout), its products with the kernel, what each step keeps, the states (h and the
  // LSTM's c, step s's input at s, its output at s + 1) and h_prev as the recurrent product read
  // it (recurrent dropout; else hs_ itself).
  Tensor x_steps_, xw_, rec_, pre_, hs_, cs_, h_dropped_;
  backend::AxisGroups input_noise_;            // the input dropout's: one value along the steps
  Tensor input_mask_, recurrent_mask_, ones_;  // dropout masks (training forwards only)
  bool input_dropped_ = false, recurrent_dropped_ = false;
  // Keras' mask of the padding steps (borrowed, (batch, steps)), time-major in processing order
  // for this forward; a masked step keeps the states before it. Null, or none: every step runs.
  const Tensor* sequence_mask_ = nullptr;
  Tensor steps_mask_, masked_outputs_;
  bool masked_ = false;
  Tensor output_;
  // Call arguments: set by set_call_arguments (a functional model's call); the initial states
  // of this forward (borrowed until its backward), their gradients; return_state's packed
  // output and its gradient's output part.
  bool called_with_arguments_ = false;
  std::vector<const Tensor*> initial_;
  std::vector<Tensor> initial_grads_;
  std::vector<const Tensor*> input_grads_;
  Tensor packed_, output_grad_;
  // Scratch between two passes of one forward or backward (a reversed copy, the input's
  // dropout output before its transpose): dx_steps_ doubles as such in the forward.
  Tensor swapped_;
  // The backward's: dL/dh from the output per step, the step's dL/dh and dL/dc, the carried
  // dL/dh_prev, the products' gradients per step (the GRU's recurrent ones apart), dL/dx.
  Tensor dh_out_, dh_, dc_, dh_carry_, dh_direct_, d_xw_, d_rec_, dx_steps_, grad_input_;
  Tensor dh_cell_, dc_cell_;  // with a mask: the kept rows' parts
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
