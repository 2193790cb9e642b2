#include "nn/recurrent.hpp"

#include "nn/dropout.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {}  // namespace

std::string recurrent_cell_name(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::simple_rnn:
      return "simple_rnn_cell";
    case RecurrentKind::lstm:
      return "lstm_cell";
    case RecurrentKind::gru:
      return "gru_cell";
  }
  return "";
}

std::string recurrent_cell_class(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::simple_rnn:
      return "SimpleRNNCell";
    case RecurrentKind::lstm:
      return "LSTMCell";
    case RecurrentKind::gru:
      return "GRUCell";
  }
  return "";
}

void reverse_steps(backend::Backend& ops, const Tensor& from, Tensor& to, std::int64_t steps,
                   std::int64_t width) {
  ops.place(to, from.shape());
  const std::int64_t row = steps * width;
  for (std::int64_t t = 0; t < steps; ++t)
    ops.copy_columns(from, row, t * width, to, row, (steps - 1 - t) * width, width);
}

void fill_lstm_bias(Tensor& bias, const Initializer& initializer, std::int64_t units,
                    bool unit_forget_bias, Rng& init) {
  if (!unit_forget_bias) {
    initializer.fill(bias, init);
    return;
  }
  Tensor input_gate({units}), rest({2 * units});
  initializer.fill(input_gate, init);
  initializer.fill(rest, init);
  float* b = bias.data();
  for (std::int64_t j = 0; j < units; ++j) {
    b[j] = input_gate[j];
    b[units + j] = 1.0f;
  }
  for (std::int64_t j = 0; j < 2 * units; ++j) b[2 * units + j] = rest[j];
}

void time_major(backend::Backend& ops, const Tensor& from, std::int64_t batch,
                std::int64_t steps, std::int64_t width, bool reversed, Tensor& scratch,
                Tensor& to) {
  const Tensor* source = &from;
  if (reversed) {
    reverse_steps(ops, from, scratch, steps, width);
    source = &scratch;
  }
  ops.swap_middle_axes(*source, {1, batch, steps, width}, ops.place(to, {steps * batch, width}));
}

Recurrent::Recurrent(std::string name, RecurrentOptions options)
    : Layer(std::move(name)), options_(std::move(options)), random_(options_.seed) {
  const std::string cell = options_.rnn_cell.value_or(recurrent_cell_name(options_.kind));
  kernel_.name = cell + "/kernel";
  recurrent_kernel_.name = cell + "/recurrent_kernel";
  bias_.name = cell + "/bias";
}

std::string Recurrent::class_name() const {
  if (options_.rnn_cell) return "RNN";
  switch (options_.kind) {
    case RecurrentKind::simple_rnn:
      return "SimpleRNN";
    case RecurrentKind::lstm:
      return "LSTM";
    case RecurrentKind::gru:
      return "GRU";
  }
  return "";
}

std::string Recurrent::who() const {
  return "layer '" + name() + "' (" + class_name() + ")";
}

std::int64_t Recurrent::gates() const {
  switch (options_.kind) {
    case RecurrentKind::simple_rnn:
      return 1;
    case RecurrentKind::lstm:
      return 4;
    case RecurrentKind::gru:
      return 3;
  }
  return 1;
}

Shape Recurrent::build(const Shape& input_shape, Rng& init) {
  if (input_shape.size() != 2 || input_shape[0] <= 0 || input_shape[1] <= 0)
    throw ShapeError(who() + " expects sequences (None, steps, features) with known steps, got " +
                     shape_to_string(input_shape, true));
  steps_ = input_shape[0];
  features_ = input_shape[1];
  const std::int64_t u = options_.units, width = gates() * u;
  kernel_.value = Tensor({features_, width});
  kernel_.grad = Tensor({features_, width});
  options_.kernel_initializer.fill(kernel_.value, init);
  options_.kernel_constraint.build(kernel_.value.shape());
  recurrent_kernel_.value = Tensor({u, width});
  recurrent_kernel_.grad = Tensor({u, width});
  options_.recurrent_initializer.fill(recurrent_kernel_.value, init);
  options_.recurrent_constraint.build(recurrent_kernel_.value.shape());
  if (options_.use_bias) {
    const Shape shape = two_biases() ? Shape{2, width} : Shape{width};
    bias_.value = Tensor(shape);
    bias_.grad = Tensor(shape);
    if (options_.kind == RecurrentKind::lstm) {
      fill_lstm_bias(bias_.value, options_.bias_initializer, u, options_.unit_forget_bias, init);
    } else {
      options_.bias_initializer.fill(bias_.value, init);
    }
    options_.bias_constraint.build(shape);
  }
  if (draws()) random_.build(init);
  // The input's dropout mask: one value per sample and feature, shared by every step (Keras'
  // cell input mask).
  input_noise_ = noise_groups({steps_, features_}, {1, std::nullopt}, who());
  cell_ = {u, options_.activation, options_.recurrent_activation, reset_before()};
  if (!options_.return_state) return output_parts()[0];
  std::int64_t total = 0;
  for (const Shape& part : output_parts()) total += shape_size(part);
  return {total};
}

std::vector<Shape> Recurrent::output_parts() const {
  std::vector<Shape> parts{options_.return_sequences ? Shape{steps_, options_.units}
                                                     : Shape{options_.units}};
  if (options_.return_state) parts.resize(1 + state_count(), Shape{options_.units});
  return parts;
}

void check_recurrent_call_arguments(const std::string& who, const std::vector<std::string>& tensors,
                                    const nlohmann::json& options, const std::string& path) {
  for (const std::string& t : tensors)
    if (t != "initial_state")
      throw ConfigError(path, who +
                                  " takes the tensors of its sequence and initial_state, "
                                  "got the argument '" +
                                  t + "'");
  if (!options.empty())
    throw ConfigError(path, who + " takes no call options here, got " + options.dump() +
                                " (a mask comes from the layers before it, as in Keras)");
}

void Recurrent::set_call_arguments(const std::vector<std::string>& tensors,
                                   const nlohmann::json& options, const std::string& path) {
  check_recurrent_call_arguments(who(), tensors, options, path);
  called_with_arguments_ = true;
}

void check_initial_states(const std::string& who, const std::vector<Shape>& input_shapes,
                          std::size_t count, const std::string& which, const Shape& state) {
  const std::size_t given = input_shapes.size() - 1;
  if (given != 0 && given != count)
    throw ShapeError(who + " starts from " + which + ", got " + std::to_string(given));
  for (std::size_t i = 1; i < input_shapes.size(); ++i)
    if (input_shapes[i] != state)
      throw ShapeError(who + ": initial state " + std::to_string(i - 1) + " has shape " +
                       shape_to_string(input_shapes[i], true) + ", but the layer's states are " +
                       shape_to_string(state, true));
}

Shape Recurrent::build_inputs(const std::vector<Shape>& input_shapes, Rng& init) {
  check_initial_states(who(), input_shapes, state_count(),
                       state_count() == 2 ? "2 initial states (h and c)" : "1 initial state (h)",
                       {options_.units});
  return build(input_shapes[0], init);
}

const Tensor& Recurrent::forward_inputs(const std::vector<const Tensor*>& inputs, bool training) {
  initial_.assign(inputs.begin() + 1, inputs.end());
  return forward(*inputs[0], training);
}

std::vector<const Tensor*> Recurrent::backward_inputs(const Tensor& grad_output,
                                                      bool need_input_grad) {
  const Tensor& dx = backward(grad_output, need_input_grad);
  input_grads_.clear();
  if (!need_input_grad) return input_grads_;
  input_grads_.push_back(&dx);
  for (std::size_t i = 0; i < initial_.size(); ++i) input_grads_.push_back(&initial_grads_[i]);
  return input_grads_;
}

Tensor Recurrent::step(const Tensor& t, std::int64_t s, std::int64_t width) const {
  return Tensor::view(t, s * rows_ * width, {rows_, width});
}

Tensor Recurrent::h_in(std::int64_t s) const {
  return step(recurrent_dropped_ ? h_dropped_ : hs_, s, options_.units);
}

Tensor Recurrent::input_bias(const Tensor& bias) const {
  if (!two_biases()) return bias;
  return Tensor::view(bias, 0, {gates() * options_.units});
}

Tensor Recurrent::recurrent_bias(const Tensor& bias) const {
  const std::int64_t width = gates() * options_.units;
  return Tensor::view(bias, width, {width});
}

const Tensor& Recurrent::forward(const Tensor& x, bool training) {
  if (x.rank() != 3 || x.dim(1) != steps_ || x.dim(2) != features_)
    throw ShapeError(who() + " expects inputs (None, " + std::to_string(steps_) + ", " +
                     std::to_string(features_) + "), got " + shape_to_string(x.shape()));
  backend::Backend& ops = this->ops();
  rows_ = x.dim(0);
  const std::int64_t u = options_.units, width = gates() * u, rows = steps_ * rows_;
  ops.place(output_, options_.return_sequences ? Shape{rows_, steps_, u} : Shape{rows_, u});
  if (rows_ == 0) {
    // An empty shard counts the draws the others make, so that every replica's stream stays at
    // the template's call (the masks of a later step keyed alike).
    if (training && options_.dropout > 0) random_.next_call(options_.dropout, sample_offset());
    if (training && options_.recurrent_dropout > 0)
      random_.next_call(options_.recurrent_dropout, sample_offset());
    if (!options_.return_state) return output_;
    std::int64_t total = 0;
    for (const Shape& part : output_parts()) total += shape_size(part);
    return ops.place(packed_, {0, total});
  }
  time_major_input(x, training);
  const Tensor bias = options_.use_bias ? input_bias(bias_.value) : Tensor();
  ops.gemm({false, false, rows, width, features_,
            options_.use_bias ? backend::GemmEpilogue::bias : backend::GemmEpilogue::none},
           x_steps_, kernel_.value, options_.use_bias ? &bias : nullptr,
           ops.place(xw_, {rows, width}));
  ops.place(hs_, {rows + rows_, u});
  if (options_.kind == RecurrentKind::lstm) ops.place(cs_, {rows + rows_, u});
  initial_states();
  ops.place(pre_, {rows, pre_width()});
  ops.place(rec_, {rows_, width});
  time_major_mask();
  draw_recurrent_mask(training);
  if (reset_before()) reset_before_products_.begin(ops, recurrent_kernel_.value, u, steps_, rows_);
  for (std::int64_t s = 0; s < steps_; ++s) run_cell(s);
  write_output();
  if (!options_.return_state) return output_;
  pack_outputs();
  return packed_;
}

void Recurrent::initial_states() {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units;
  Tensor* states[] = {&hs_, &cs_};
  for (std::size_t i = 0; i < state_count(); ++i) {
    Tensor first = step(*states[i], 0, u);
    if (initial_.empty()) {
      ops.fill(first, 0.0f);
      continue;
    }
    if (initial_[i]->size() != rows_ * u)
      throw ShapeError(who() + ": initial state " + std::to_string(i) + " of shape " +
                       shape_to_string(initial_[i]->shape()) + " for " + std::to_string(rows_) +
                       " sequences of " + std::to_string(u) + " units");
    ops.copy(*initial_[i], first);
  }
}

void Recurrent::pack_outputs() {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units, width = output_.size() / rows_;
  const std::int64_t total = width + static_cast<std::int64_t>(state_count()) * u;
  ops.place(packed_, {rows_, total});
  ops.copy_columns(output_, width, 0, packed_, total, 0, width);
  ops.copy_columns(step(hs_, steps_, u), u, 0, packed_, total, width, u);
  if (options_.kind == RecurrentKind::lstm)
    ops.copy_columns(step(cs_, steps_, u), u, 0, packed_, total, width + u, u);
}

const Tensor& Recurrent::unpack_gradient(const Tensor& grad_output) {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units;
  ops.fill(ops.place(dh_carry_, {rows_, u}), 0.0f);
  if (options_.kind == RecurrentKind::lstm) ops.fill(ops.place(dc_, {rows_, u}), 0.0f);
  if (!options_.return_state) return grad_output;
  const std::int64_t width = output_.size() / rows_, total = packed_.size() / rows_;
  ops.copy_columns(grad_output, total, 0, ops.place(output_grad_, output_.shape()), width, 0,
                   width);
  ops.copy_columns(grad_output, total, width, dh_carry_, u, 0, u);
  if (options_.kind == RecurrentKind::lstm)
    ops.copy_columns(grad_output, total, width + u, dc_, u, 0, u);
  return output_grad_;
}

// `to` = `from` (batch, steps, width) time-major, in processing order (its steps reversed with
// go_backwards).
void Recurrent::processing_order(const Tensor& from, std::int64_t width, Tensor& to) {
  time_major(ops(), from, rows_, steps_, width, options_.go_backwards, swapped_, to);
}

// x_steps_ = x in processing order, after the input dropout of a training forward.
void Recurrent::time_major_input(const Tensor& x, bool training) {
  input_dropped_ = training && options_.dropout > 0;
  if (!input_dropped_) {
    processing_order(x, features_, x_steps_);
    return;
  }
  backend::Backend& ops = this->ops();
  backend::DropoutDesc d = random_.next_call(options_.dropout, sample_offset());
  d.noise = input_noise_;
  ops.dropout_forward(d, x, ops.place(dx_steps_, x.shape()), ops.place(input_mask_, x.shape()),
                      steps_ * features_);
  processing_order(dx_steps_, features_, x_steps_);
}

// steps_mask_ = the Keras mask of this forward's steps, in processing order.
void Recurrent::time_major_mask() {
  masked_ = sequence_mask_ != nullptr;
  if (!masked_) return;
  if (sequence_mask_->size() != rows_ * steps_)
    throw ShapeError(who() + ": a mask of shape " + shape_to_string(sequence_mask_->shape()) +
                     " for inputs of " + std::to_string(rows_) + " sequences of " +
                     std::to_string(steps_) + " steps");
  processing_order(*sequence_mask_, 1, steps_mask_);
}

// The recurrent dropout mask of a training forward: 1 / (1 - rate) or 0 per sample and unit.
void Recurrent::draw_recurrent_mask(bool training) {
  recurrent_dropped_ = training && options_.recurrent_dropout > 0;
  if (!recurrent_dropped_) return;
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units;
  ops.fill(ops.place(ones_, {rows_, u}), 1.0f);
  backend::DropoutDesc d = random_.next_call(options_.recurrent_dropout, sample_offset());
  ops.dropout_forward(d, ones_, ops.place(dh_, {rows_, u}), ops.place(recurrent_mask_, {rows_, u}),
                      u);
  ops.place(h_dropped_, {steps_ * rows_, u});
}

void Recurrent::run_cell(std::int64_t s) {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units, width = gates() * u;
  const Tensor h_prev = step(hs_, s, u);
  Tensor h_in = h_prev;
  if (recurrent_dropped_) {
    h_in = step(h_dropped_, s, u);
    ops.multiply(h_prev, recurrent_mask_, h_in);
  }
  const Tensor xw = step(xw_, s, width);
  if (reset_before()) {
    reset_before_products_.products(ops, cell_, s, xw, h_in, rec_);
  } else {
    const bool gru_bias = two_biases() && options_.use_bias;
    const Tensor bias = gru_bias ? recurrent_bias(bias_.value) : Tensor();
    ops.gemm({false, false, rows_, width, u,
              gru_bias ? backend::GemmEpilogue::bias : backend::GemmEpilogue::none},
             h_in, recurrent_kernel_.value, gru_bias ? &bias : nullptr, rec_);
  }
  Tensor pre = step(pre_, s, pre_width());
  Tensor h = step(hs_, s + 1, u);
  switch (options_.kind) {
    case RecurrentKind::simple_rnn:
      ops.add(xw, rec_, pre);
      ops.activation_forward(options_.activation, pre, h, u);
      break;
    case RecurrentKind::lstm: {
      Tensor c = step(cs_, s + 1, u);
      ops.lstm_step_forward(cell_, xw, rec_, step(cs_, s, u), pre, c, h);
      break;
    }
    case RecurrentKind::gru:
      ops.gru_step_forward(cell_, xw, rec_, h_prev, pre, h);
      break;
  }
  if (!masked_) return;
  // A masked step keeps the states before it.
  const Tensor keep = kept(s);
  ops.select_rows(keep, h, &h_prev, h, u);
  if (options_.kind == RecurrentKind::lstm) {
    Tensor c = step(cs_, s + 1, u);
    const Tensor c_prev = step(cs_, s, u);
    ops.select_rows(keep, c, &c_prev, c, u);
  }
}

// Every step's h (batch-major, in processing order) or the last one's.
void Recurrent::write_output() {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units;
  const Tensor states = Tensor::view(hs_, rows_ * u, {steps_ * rows_ * u});
  if (!options_.return_sequences) {
    ops.copy(step(hs_, steps_, u), output_);
  } else if (masked_ && options_.zero_output_for_mask) {
    ops.select_rows(steps_mask_, states, nullptr, ops.place(masked_outputs_, {steps_ * rows_, u}),
                    u);
    ops.swap_middle_axes(masked_outputs_, {1, steps_, rows_, u}, output_);
  } else {
    ops.swap_middle_axes(states, {1, steps_, rows_, u}, output_);
  }
}

const Tensor& Recurrent::backward(const Tensor& given_grad, bool need_input_grad) {
  const Tensor& returned = options_.return_state ? packed_ : output_;
  if (given_grad.size() != returned.size())
    throw ShapeError(who() + ": gradient of shape " + shape_to_string(given_grad.shape()) +
                     " does not match its output " + shape_to_string(returned.shape()));
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units, width = gates() * u, rows = steps_ * rows_;
  if (rows_ == 0) {
    for (Parameter* p : parameters())
      if (!p->grad.empty()) ops.fill(p->grad, 0.0f);
    initial_grads_.resize(initial_.size());
    for (Tensor& g : initial_grads_) ops.place(g, {0, u});
    if (need_input_grad) return ops.place(grad_input_, {0, steps_, features_});
    grad_input_ = Tensor();
    return grad_input_;
  }
  // The final states' gradients (return_state) start the carried ones.
  const Tensor& grad_output = unpack_gradient(given_grad);
  if (options_.return_sequences)
    ops.swap_middle_axes(grad_output, {1, rows_, steps_, u}, ops.place(dh_out_, {rows, u}));
  ops.place(dh_, {rows_, u});
  ops.place(d_xw_, {rows, width});
  if (options_.kind == RecurrentKind::gru) {
    ops.place(d_rec_, {rows, width});
    ops.place(dh_direct_, {rows_, u});
  }
  for (std::int64_t s = steps_ - 1; s >= 0; --s) {
    step_gradient(s, grad_output);
    Tensor* dc = options_.kind == RecurrentKind::lstm ? &dc_ : nullptr;
    if (masked_ && dc) {  // the kept rows' dL/dc to the cell, the others' past it
      ops.select_rows(kept(s), dc_, nullptr, ops.place(dc_cell_, {rows_, u}), u);
      ops.subtract(dc_, dc_cell_, dc_);
      dc = &dc_cell_;
    }
    cell_backward(s, masked_ ? dh_cell_ : dh_, dc);
    if (masked_ && dc) ops.add(dc_, dc_cell_, dc_);
    // Zero initial states are constants; given ones take their gradients (the carried ones).
    if (s == 0 && (initial_.empty() || !need_input_grad)) break;
    const Tensor d_rec = step(options_.kind == RecurrentKind::gru ? d_rec_ : d_xw_, s, width);
    if (reset_before())
      reset_before_products_.input_gradient(ops, d_rec, dh_carry_);
    else
      ops.gemm({false, true, rows_, u, width}, d_rec, recurrent_kernel_.value, nullptr, dh_carry_);
    if (recurrent_dropped_) ops.multiply(dh_carry_, recurrent_mask_, dh_carry_);
    if (options_.kind == RecurrentKind::gru) ops.add(dh_carry_, dh_direct_, dh_carry_);
    if (masked_) ops.add(dh_carry_, dh_, dh_carry_);  // a skipped step's dL/dh passes back
  }
  if (!initial_.empty() && need_input_grad) {
    initial_grads_.resize(initial_.size());
    ops.copy(dh_carry_, ops.place(initial_grads_[0], {rows_, u}));
    if (options_.kind == RecurrentKind::lstm)
      ops.copy(dc_, ops.place(initial_grads_[1], {rows_, u}));
  }
  kernel_gradients();
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  input_gradient();
  return grad_input_;
}

void Recurrent::step_gradient(std::int64_t s, const Tensor& grad_output) {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units;
  if (!options_.return_sequences) {
    // The last step's h is the output; with return_state also the final state h, whose
    // gradient dh_carry_ holds (zeros without).
    if (s == steps_ - 1)
      ops.add(grad_output, dh_carry_, dh_);
    else
      ops.copy(dh_carry_, dh_);
  } else if (masked_ && options_.zero_output_for_mask) {  // a masked step's output is 0
    ops.select_rows(kept(s), step(dh_out_, s, u), nullptr, dh_, u);
    ops.add(dh_, dh_carry_, dh_);
  } else {
    ops.add(step(dh_out_, s, u), dh_carry_, dh_);
  }
  if (!masked_) return;
  ops.select_rows(kept(s), dh_, nullptr, ops.place(dh_cell_, {rows_, u}), u);
  ops.subtract(dh_, dh_cell_, dh_);
}

void Recurrent::cell_backward(std::int64_t s, const Tensor& dh, Tensor* dc) {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units, width = gates() * u;
  const Tensor pre = step(pre_, s, pre_width());
  Tensor d_xw = step(d_xw_, s, width);
  switch (options_.kind) {
    case RecurrentKind::simple_rnn:
      ops.activation_backward(options_.activation, pre, step(hs_, s + 1, u), dh, d_xw, u);
      break;
    case RecurrentKind::lstm:
      ops.lstm_step_backward(cell_, pre, step(cs_, s, u), step(cs_, s + 1, u), dh, *dc, d_xw);
      break;
    case RecurrentKind::gru: {
      Tensor d_rec = step(d_rec_, s, width);
      ops.gru_step_backward(cell_, pre, step(hs_, s, u), dh, d_xw, d_rec, dh_direct_);
      if (reset_before())
        reset_before_products_.step_gradient(ops, cell_, pre, h_in(s), d_xw, d_rec);
      break;
    }
  }
}

// dKernel = x_stepsᵀ · d_xw, dRecurrent = h_prevᵀ · d_rec over every step, dBias = their column
// sums (the GRU's two rows apart).
void Recurrent::kernel_gradients() {
  backend::Backend& ops = this->ops();
  const std::int64_t u = options_.units, width = gates() * u, rows = steps_ * rows_;
  const Tensor& d_rec = options_.kind == RecurrentKind::gru ? d_rec_ : d_xw_;
  if (!kernel_.grad.empty())
    ops.gemm({true, false, features_, width, rows}, x_steps_, d_xw_, nullptr, kernel_.grad);
  if (!recurrent_kernel_.grad.empty()) {
    const Tensor h_in = recurrent_dropped_ ? h_dropped_ : Tensor::view(hs_, 0, {rows, u});
    if (reset_before())
      reset_before_products_.kernel_gradient(ops, h_in, d_rec, recurrent_kernel_.grad);
    else
      ops.gemm({true, false, u, width, rows}, h_in, d_rec, nullptr, recurrent_kernel_.grad);
  }
  if (!options_.use_bias || bias_.grad.empty()) return;
  if (!two_biases()) {
    ops.column_sums(d_xw_, width, bias_.grad);
    return;
  }
  Tensor input = input_bias(bias_.grad), recurrent = recurrent_bias(bias_.grad);
  ops.column_sums(d_xw_, width, input);
  ops.column_sums(d_rec_, width, recurrent);
}

// dx = d_xw · kernelᵀ, back to the input's order (and through its dropout mask).
void Recurrent::input_gradient() {
  backend::Backend& ops = this->ops();
  const std::int64_t width = gates() * options_.units, rows = steps_ * rows_;
  ops.gemm({false, true, rows, features_, width}, d_xw_, kernel_.value, nullptr,
           ops.place(dx_steps_, {rows, features_}));
  const Shape shape{rows_, steps_, features_};
  Tensor& batch_major = ops.place(options_.go_backwards ? swapped_ : grad_input_, shape);
  ops.swap_middle_axes(dx_steps_, {1, steps_, rows_, features_}, batch_major);
  if (options_.go_backwards) reverse_steps(ops, swapped_, grad_input_, steps_, features_);
  if (input_dropped_) ops.multiply(grad_input_, input_mask_, grad_input_);
}

std::vector<Parameter*> Recurrent::parameters() {
  if (options_.use_bias) return {&kernel_, &recurrent_kernel_, &bias_};
  return {&kernel_, &recurrent_kernel_};
}

nlohmann::json Recurrent::config() const {
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"return_sequences", options_.return_sequences},
                      {"return_state", options_.return_state},
                      {"go_backwards", options_.go_backwards},
                      {"stateful", false},
                      {"unroll", false},
                      {"zero_output_for_mask", options_.zero_output_for_mask}};
  nlohmann::json cell = {{"units", options_.units},
                         {"activation", activation_name(options_.activation)}};
  if (options_.kind != RecurrentKind::simple_rnn)
    cell["recurrent_activation"] = activation_name(options_.recurrent_activation);
  cell["use_bias"] = options_.use_bias;
  cell["kernel_initializer"] = options_.kernel_initializer.config();
  cell["recurrent_initializer"] = options_.recurrent_initializer.config();
  cell["bias_initializer"] = options_.bias_initializer.config();
  if (options_.kind == RecurrentKind::lstm) cell["unit_forget_bias"] = options_.unit_forget_bias;
  cell["kernel_regularizer"] = options_.kernel_regularizer.config();
  cell["recurrent_regularizer"] = options_.recurrent_regularizer.config();
  cell["bias_regularizer"] = options_.bias_regularizer.config();
  cell["kernel_constraint"] = options_.kernel_constraint.config();
  cell["recurrent_constraint"] = options_.recurrent_constraint.config();
  cell["bias_constraint"] = options_.bias_constraint.config();
  cell["dropout"] = options_.dropout;
  cell["recurrent_dropout"] = options_.recurrent_dropout;
  if (options_.kind == RecurrentKind::gru) cell["reset_after"] = options_.reset_after;
  if (options_.seed) cell["seed"] = *options_.seed;
  if (options_.rnn_cell) {
    cell["name"] = *options_.rnn_cell;
    cell["trainable"] = trainable();
    cell["dtype"] = "float32";
    c["cell"] = {{"class_name", recurrent_cell_class(options_.kind)}, {"config", cell}};
    return c;
  }
  c.update(cell);
  c["activity_regularizer"] = nullptr;
  return c;
}

std::vector<RuledWeight> Recurrent::ruled_weights() {
  std::vector<RuledWeight> out{
      {&kernel_, &options_.kernel_constraint, &options_.kernel_regularizer},
      {&recurrent_kernel_, &options_.recurrent_constraint, &options_.recurrent_regularizer}};
  if (options_.use_bias)
    out.push_back({&bias_, &options_.bias_constraint, &options_.bias_regularizer});
  return out;
}

std::vector<std::uint64_t> Recurrent::random_state() const {
  if (draws()) return random_.state();
  return {};
}

void Recurrent::set_random_state(const std::vector<std::uint64_t>& state) {
  if (draws()) random_.set_state(state, name());
}

void Recurrent::use_keras2_definitions() {
  options_.activation = keras2_definition(options_.activation);
  options_.recurrent_activation = keras2_definition(options_.recurrent_activation);
}

}  // namespace tandem::nn
