// Keras' ConvLSTM1D, ConvLSTM2D and ConvLSTM3D: an LSTM whose input and recurrent products are
// convolutions, over sequences of images (batch, steps, spatial..., channels) — 1, 2 or 3 spatial
// axes. At each step, gates (i, f, c, o, in Keras' order) = conv(x_t, kernel) + bias +
// conv(h_prev, recurrent_kernel); c = f·c_prev + i·g, h = o·activation(c), per cell of the output
// grid, from zero states. The input convolution takes the layer's strides, padding and
// dilation; the recurrent one strides 1 and "same" padding (Keras'), so h keeps the output grid.
// The output is every step's h (return_sequences: (batch, steps, out..., filters)) or the last
// one's; go_backwards runs the steps in reverse and returns them in that order, as Keras does.
//
// How it computes, on its backend: the input convolution for every step at once (the steps
// time-major, as extra samples of one convolution), then per step the recurrent convolution of
// h_prev and the LSTM cell's element-wise step (backend lstm_step_*, the rows being the output
// grid's cells); the backward runs the steps in reverse for the cell and dh_prev, and takes every
// kernel gradient in one convolution backward over all the steps. The convolutions are the
// backend's Convolution2D (a 1-D layer's on the view of one row, a 3-D one's on volumes).
//
// Weights, in Keras' shapes: kernel (k..., channels, 4·filters), recurrent_kernel (k...,
// filters, 4·filters), bias (4·filters; unit_forget_bias starts the forget gate's at 1); Keras 2
// names them "conv_lstm_cell/kernel". return_state: the call gives its output, then its final h
// and c, packed as nn::SeveralOutputs says. initial_state: in a functional model the call may
// take the h and c to start from (Keras 2 writes them after the sequence in the call's first
// argument, Keras 3 as the keyword initial_state), each (grid..., filters), instead of zeros, and
// gives their gradients back (an encoder ConvLSTM's final states starting a decoder's).
//
// dropout / recurrent_dropout (training forwards): the input and h_prev masked where they enter
// their convolutions, one mask per sample, cell and channel kept for every step — one for all
// four gates in a Keras 3 model, one per gate in a Keras 2 one (nn/gate_masks.hpp: then the
// convolution runs over four masked copies in 4 groups); h carried on and returned is not masked.
// Refused where the config asks for what is not computed: stateful, a Keras mask reaching it.
// Ownership and threads: as every layer's (tandem/layer.hpp).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backend/ops.hpp"
#include "nn/activation_fn.hpp"
#include "nn/constraint.hpp"
#include "nn/gate_masks.hpp"
#include "nn/initializer.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/random_stream.hpp"
#include "nn/regularizer.hpp"
#include "nn/spatial.hpp"
#include "tandem/layer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct ConvLstmOptions {
  int rank = 2;  // spatial axes: 1, 2 or 3
  std::int64_t filters = 0;
  std::vector<std::int64_t> kernel_size, strides, dilation_rate;  // `rank` values each
  Padding padding = Padding::valid;
  ActivationKind activation = ActivationKind::tanh;
  ActivationKind recurrent_activation = ActivationKind::sigmoid;
  bool use_bias = true;
  bool unit_forget_bias = true;
  bool return_sequences = false;
  /// The final states after the output (SeveralOutputs): h, then c, each (grid..., filters).
  bool return_state = false;
  bool go_backwards = false;
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer recurrent_initializer{"orthogonal", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
  WeightConstraint kernel_constraint, recurrent_constraint, bias_constraint;
  WeightRegularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
  double dropout = 0, recurrent_dropout = 0;
  std::optional<std::uint64_t> seed;
};

class ConvLstm : public Layer,
                 public WeightRules,
                 public KerasTwoDefinitions,
                 public SeveralOutputs,
                 public CallArguments {
 public:
  ConvLstm(std::string name, ConvLstmOptions options);
  ~ConvLstm() override;
  /// "ConvLSTM1D", "ConvLSTM2D" or "ConvLSTM3D".
  std::string class_name() const override;
  /// input_shape is (steps, spatial..., channels). Throws ShapeError naming the layer for
  /// another rank or a kernel larger than the (unpadded) input with "valid" padding.
  Shape build(const Shape& input_shape, Rng& init) override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& grad_output, bool need_input_grad) override;
  /// In a functional model: the sequence, then the initial h and c when the call passes them.
  bool takes_several_inputs() const override { return called_with_arguments_; }
  Shape build_inputs(const std::vector<Shape>& input_shapes, Rng& init) override;
  const Tensor& forward_inputs(const std::vector<const Tensor*>& inputs, bool training) override;
  std::vector<const Tensor*> backward_inputs(const Tensor& grad_output,
                                             bool need_input_grad) override;
  std::vector<std::string> positional_arguments() const override { return {"initial_state"}; }
  /// Keras 2 writes the states after the sequence in the call's first argument ([x, h, c]).
  bool first_argument_is_a_list() const override { return true; }
  void set_call_arguments(const std::vector<std::string>& tensors, const nlohmann::json& options,
                          const std::string& path) override;
  std::vector<Parameter*> parameters() override;
  nlohmann::json config() const override;
  std::vector<RuledWeight> ruled_weights() override;
  /// The output, then with return_state the final h and c.
  std::vector<Shape> output_parts() const override;
  void use_keras2_definitions() override {
    options_.activation = keras2_definition(options_.activation);
    options_.recurrent_activation = keras2_definition(options_.recurrent_activation);
    input_masks_.set_copies(kGates);
    recurrent_masks_.set_copies(kGates);
  }
  std::vector<std::uint64_t> random_state() const override;
  void set_random_state(const std::vector<std::uint64_t>& state) override;

 private:
  std::string who() const { return "layer '" + name() + "' (" + class_name() + ")"; }
  /// A window geometry over the grid `in` (the layer's spatial sizes) with `channels`.
  backend::window::Geometry geometry(const Shape& in, const std::vector<std::int64_t>& kernel,
                                     const std::vector<std::int64_t>& strides,
                                     const std::vector<std::int64_t>& dilation, Padding padding,
                                     std::int64_t channels) const;
  static constexpr int kGates = 4;  // i, f, c, o
  /// The backend's input and recurrent convolutions (made again after a backend change), and
  /// their 4-group forms over Keras 2's masked copies where its dropout needs them.
  void make_convolutions();
  /// The input (recurrent) convolution of this forward: over the masked copies when masked.
  backend::Convolution2D& input_conv() const;
  backend::Convolution2D& recurrent_conv() const;
  bool draws() const { return options_.dropout > 0 || options_.recurrent_dropout > 0; }
  /// x_in_ = x_steps_, masked in a training forward with dropout.
  const Tensor& dropped_input(bool training);
  /// The h_prev of step s the recurrent convolution reads (masked with recurrent dropout).
  Tensor recurrent_input(std::int64_t s);
  /// h_0 and c_0: the call's initial states, else zeros.
  void initial_states();
  /// (n, image...) for `n` images of the grid `grid` with `channels`: the convolutions' view.
  Shape images(std::int64_t n, const Shape& grid, std::int64_t channels) const;
  /// `from` (steps · batch, width) time-major back to (batch, steps, width) in `to` (sized).
  void to_batch_major(const Tensor& from, std::int64_t width, Tensor& to);
  /// With return_state: output_, then the final h and c, each sample's values in a row of packed_.
  void pack_outputs();
  /// The output's part of a packed gradient (output_grad_), its states' into dh_ and dc_.
  const Tensor& unpack_gradient(const Tensor& grad_output);

  ConvLstmOptions options_;
  Parameter kernel_, recurrent_kernel_, bias_;
  Shape input_shape_, output_shape_;
  Shape in_grid_, out_grid_;  // the spatial sizes of the input and of the output grid
  std::int64_t steps_ = 0, channels_ = 0, cells_ = 0;
  backend::window::Geometry input_geometry_, recurrent_geometry_;
  std::unique_ptr<backend::Convolution2D> input_conv_, recurrent_conv_;
  std::unique_ptr<backend::Convolution2D> grouped_input_conv_, grouped_recurrent_conv_;
  RandomStream random_;
  GateMasks input_masks_, recurrent_masks_;
  bool input_dropped_ = false, recurrent_dropped_ = false;  // this forward's
  Tensor x_dropped_, h_dropped_, dx_dropped_, dh_dropped_;
  // The call's initial states (borrowed from forward_inputs to backward_inputs; empty: zeros)
  // and their gradients.
  bool called_with_arguments_ = false;
  std::vector<const Tensor*> initial_;
  std::vector<Tensor> initial_grads_;
  std::vector<const Tensor*> input_grads_;  // the masked values, their gradients
  const backend::Backend* conv_backend_ = nullptr;
  backend::RecurrentCellDesc cell_;
  std::int64_t batch_ = -1;
  Tensor x_steps_, xw_, hs_, cs_, pre_, rec_, output_, swapped_, packed_, output_grad_;
  Tensor dh_out_, dh_, dc_, d_pre_, dh_prev_, dx_steps_, grad_input_;
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
