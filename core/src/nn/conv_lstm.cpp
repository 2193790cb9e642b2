#include "nn/conv_lstm.hpp"

#include <algorithm>

#include "nn/batch_shape.hpp"
#include "nn/recurrent.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

backend::window::Axis axis_of(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                              std::int64_t dilation, Padding padding) {
  const Window w = window_along(in, kernel, stride, dilation, padding);
  return {in, w.out, kernel, stride, dilation, w.pad_before};
}

}  // namespace

ConvLstm::ConvLstm(std::string name, ConvLstmOptions options)
    : Layer(std::move(name)), options_(std::move(options)), random_(options_.seed) {
  kernel_.name = "conv_lstm_cell/kernel";
  recurrent_kernel_.name = "conv_lstm_cell/recurrent_kernel";
  bias_.name = "conv_lstm_cell/bias";
}

ConvLstm::~ConvLstm() = default;

std::string ConvLstm::class_name() const {
  return "ConvLSTM" + std::to_string(options_.rank) + "D";
}

backend::window::Geometry ConvLstm::geometry(const Shape& in,
                                             const std::vector<std::int64_t>& kernel,
                                             const std::vector<std::int64_t>& strides,
                                             const std::vector<std::int64_t>& dilation,
                                             Padding padding, std::int64_t channels) const {
  std::vector<backend::window::Axis> axes;
  for (std::size_t a = 0; a < in.size(); ++a)
    axes.push_back(axis_of(in[a], kernel[a], strides[a], dilation[a], padding));
  backend::window::Geometry g;
  g.channels = channels;
  g.rows = {1, 1, 1, 1, 1, 0};  // a 1-D layer: one row
  if (axes.size() == 1) {
    g.cols = axes[0];
  } else {
    const std::size_t first = axes.size() - 2;
    g.rows = axes[first];
    g.cols = axes[first + 1];
  }
  if (axes.size() == 3) {
    g.depth = axes[0];
    g.volume = true;
  }
  return g;
}

Shape ConvLstm::images(std::int64_t n, const Shape& grid, std::int64_t channels) const {
  Shape s{n};
  if (grid.size() == 1) s.push_back(1);
  s.insert(s.end(), grid.begin(), grid.end());
  s.push_back(channels);
  return s;
}

Shape ConvLstm::build(const Shape& input_shape, Rng& init) {
  const auto rank = static_cast<std::size_t>(options_.rank);
  const std::string spatial = rank == 1 ? "steps, length" : rank == 2 ? "rows, cols" : "depth, rows, cols";
  bool fits = input_shape.size() == rank + 2;
  for (std::int64_t d : input_shape) fits = fits && d > 0;
  if (!fits)
    throw ShapeError(who() + " expects inputs (None, time, " + spatial + ", channels) of " +
                     "positive sizes, got " + shape_to_string(input_shape, true));
  const std::int64_t f = options_.filters;
  const std::vector<std::int64_t>& k = options_.kernel_size;
  steps_ = input_shape[0];
  channels_ = input_shape.back();
  in_grid_ = Shape(input_shape.begin() + 1, input_shape.end() - 1);
  input_geometry_ = geometry(in_grid_, k, options_.strides, options_.dilation_rate,
                             options_.padding, channels_);
  out_grid_.clear();
  for (std::size_t a = 0; a < rank; ++a) {
    const Window w = window_along(in_grid_[a], k[a], options_.strides[a],
                                  options_.dilation_rate[a], options_.padding);
    if (w.out <= 0)
      throw ShapeError(who() + ": kernel " + shape_to_string(Shape(k.begin(), k.end())) +
                       " is larger than its input " + shape_to_string(input_shape, true) +
                       " with \"valid\" padding");
    out_grid_.push_back(w.out);
  }
  cells_ = shape_size(out_grid_);
  const std::vector<std::int64_t> ones(rank, 1);
  recurrent_geometry_ = geometry(out_grid_, k, ones, ones, Padding::same, f);
  input_shape_ = input_shape;
  output_shape_ = out_grid_;
  output_shape_.push_back(f);
  if (options_.return_sequences) output_shape_.insert(output_shape_.begin(), steps_);
  Shape kernel_shape(k.begin(), k.end()), recurrent_shape(k.begin(), k.end());
  kernel_shape.insert(kernel_shape.end(), {channels_, kGates * f});
  recurrent_shape.insert(recurrent_shape.end(), {f, kGates * f});
  kernel_.value = Tensor(kernel_shape);
  kernel_.grad = Tensor(kernel_shape);
  options_.kernel_initializer.fill(kernel_.value, init);
  options_.kernel_constraint.build(kernel_shape);
  recurrent_kernel_.value = Tensor(recurrent_shape);
  recurrent_kernel_.grad = Tensor(recurrent_shape);
  options_.recurrent_initializer.fill(recurrent_kernel_.value, init);
  options_.recurrent_constraint.build(recurrent_shape);
  if (options_.use_bias) {
    bias_.value = Tensor({kGates * f});
    bias_.grad = Tensor({kGates * f});
    fill_lstm_bias(bias_.value, options_.bias_initializer, f, options_.unit_forget_bias, init);
    options_.bias_constraint.build(bias_.value.shape());
  }
  if (draws()) random_.build(init);
  cell_ = {f, options_.activation, options_.recurrent_activation, false};
  input_conv_.reset();
  recurrent_conv_.reset();
  if (!options_.return_state) return output_shape_;
  return {shape_size(output_shape_) + 2 * cells_ * f};
}

void ConvLstm::make_convolutions() {
  if (input_conv_ && conv_backend_ == &ops()) return;
  backend::ConvolutionDesc in;
  in.label = who() + " (its input convolution)";
  in.geometry = input_geometry_;
  in.filters = kGates * options_.filters;
  in.use_bias = options_.use_bias;
  input_conv_ = ops().convolution(in);
  backend::ConvolutionDesc rec;
  rec.label = who() + " (its recurrent convolution)";
  rec.geometry = recurrent_geometry_;
  rec.filters = kGates * options_.filters;
  rec.use_bias = false;
  recurrent_conv_ = ops().convolution(rec);
  // Keras 2's masks, one per gate: the convolutions over the four masked copies, group g (its
  // copy's channels) making gate g's filters — the layer's own kernels, unchanged.
  const auto grouped = [&](backend::ConvolutionDesc d, const char* what) {
    d.label = who() + " (its " + what + " convolution over the gates' masked copies)";
    d.geometry.channels *= kGates;
    d.groups = kGates;
    return ops().convolution(d);
  };
  grouped_input_conv_.reset();
  grouped_recurrent_conv_.reset();
  if (input_masks_.copies() > 1 && options_.dropout > 0) grouped_input_conv_ = grouped(in, "input");
  if (recurrent_masks_.copies() > 1 && options_.recurrent_dropout > 0)
    grouped_recurrent_conv_ = grouped(rec, "recurrent");
  conv_backend_ = &ops();
}

backend::Convolution2D& ConvLstm::input_conv() const {
  return input_dropped_ && grouped_input_conv_ ? *grouped_input_conv_ : *input_conv_;
}

backend::Convolution2D& ConvLstm::recurrent_conv() const {
  return recurrent_dropped_ && grouped_recurrent_conv_ ? *grouped_recurrent_conv_
                                                       : *recurrent_conv_;
}

void ConvLstm::set_call_arguments(const std::vector<std::string>& tensors,
                                  const nlohmann::json& options, const std::string& path) {
  check_recurrent_call_arguments(who(), tensors, options, path);
  called_with_arguments_ = true;
}

Shape ConvLstm::build_inputs(const std::vector<Shape>& input_shapes, Rng& init) {
  const Shape out = build(input_shapes[0], init);
  Shape state = out_grid_;
  state.push_back(options_.filters);
  check_initial_states(who(), input_shapes, 2, "2 initial states (h and c)", state);
  return out;
}

const Tensor& ConvLstm::forward_inputs(const std::vector<const Tensor*>& inputs, bool training) {
  initial_.assign(inputs.begin() + 1, inputs.end());
  return forward(*inputs[0], training);
}

std::vector<const Tensor*> ConvLstm::backward_inputs(const Tensor& grad_output,
                                                     bool need_input_grad) {
  const Tensor& dx = backward(grad_output, need_input_grad);
  input_grads_.clear();
  if (!need_input_grad) return input_grads_;
  input_grads_.push_back(&dx);
  for (std::size_t i = 0; i < initial_.size(); ++i) input_grads_.push_back(&initial_grads_[i]);
  return input_grads_;
}

void ConvLstm::initial_states() {
  backend::Backend& ops = this->ops();
  const std::int64_t f = options_.filters, rows = batch_ * cells_;
  Tensor* states[] = {&hs_, &cs_};
  for (std::size_t i = 0; i < 2; ++i) {
    Tensor first = Tensor::view(*states[i], 0, {rows, f});
    if (initial_.empty()) {
      ops.fill(first, 0.0f);
      continue;
    }
    if (initial_[i]->size() != rows * f)
      throw ShapeError(who() + ": initial state " + std::to_string(i) + " of shape " +
                       shape_to_string(initial_[i]->shape()) + " for " + std::to_string(batch_) +
                       " sequences of states " + shape_to_string(out_grid_) + " x " +
                       std::to_string(f));
    ops.copy(initial_[i]->reshaped({rows, f}), first);
  }
}

const Tensor& ConvLstm::dropped_input(bool training) {
  input_dropped_ = training && options_.dropout > 0;
  if (!input_dropped_) return x_steps_;
  input_masks_.draw(ops(), random_, options_.dropout, sample_offset(), batch_, shape_size(in_grid_),
                    channels_);
  input_masks_.apply(ops(), x_steps_, steps_, x_dropped_);
  return x_dropped_;
}

Tensor ConvLstm::recurrent_input(std::int64_t s) {
  const std::int64_t f = options_.filters, rows = batch_ * cells_;
  const Tensor h_prev = Tensor::view(hs_, s * rows * f, {batch_, cells_ * f});
  if (!recurrent_dropped_) return h_prev.reshaped(images(batch_, out_grid_, f));
  const std::int64_t width = recurrent_masks_.copies() * f;
  Tensor h_in = Tensor::view(h_dropped_, s * rows * width, {batch_, cells_ * width});
  recurrent_masks_.apply(ops(), h_prev, 1, h_in);
  return h_in.reshaped(images(batch_, out_grid_, width));
}

void ConvLstm::to_batch_major(const Tensor& from, std::int64_t width, Tensor& to) {
  ops().swap_middle_axes(from, {1, steps_, batch_, width}, to);
}

const Tensor& ConvLstm::forward(const Tensor& x, bool training) {
  require_batch_of(x, input_shape_, who());
  backend::Backend& ops = this->ops();
  make_convolutions();
  batch_ = x.dim(0);
  const std::int64_t f = options_.filters, rows = batch_ * cells_;
  ops.place(output_, with_batch(batch_, output_shape_));
  if (batch_ == 0) {
    // An empty shard counts the draws the others make (their streams stay in step).
    if (training && options_.dropout > 0) random_.next_call(options_.dropout, sample_offset());
    if (training && options_.recurrent_dropout > 0)
      random_.next_call(options_.recurrent_dropout, sample_offset());
    pack_outputs();
    return options_.return_state ? packed_ : output_;
  }
  const std::int64_t in_width = shape_size(in_grid_) * channels_;
  time_major(ops, x, batch_, steps_, in_width, options_.go_backwards, swapped_, x_steps_);
  const Tensor& x_in = dropped_input(training);
  const int in_copies = input_dropped_ ? input_masks_.copies() : 1;
  input_conv().forward(x_in.reshaped(images(steps_ * batch_, in_grid_, in_copies * channels_)),
                       kernel_.value, options_.use_bias ? &bias_.value : nullptr, xw_);
  recurrent_dropped_ = training && options_.recurrent_dropout > 0;
  if (recurrent_dropped_) {
    recurrent_masks_.draw(ops, random_, options_.recurrent_dropout, sample_offset(), batch_, cells_,
                          f);
    ops.place(h_dropped_, {steps_ * rows, recurrent_masks_.copies() * f});
  }
  ops.place(hs_, {(steps_ + 1) * rows, f});
  ops.place(cs_, {(steps_ + 1) * rows, f});
  initial_states();
  ops.place(pre_, {steps_ * rows, kGates * f});
  for (std::int64_t s = 0; s < steps_; ++s) {
    recurrent_conv().forward(recurrent_input(s), recurrent_kernel_.value, nullptr, rec_);
    const Tensor xw = Tensor::view(xw_, s * rows * kGates * f, {rows, kGates * f});
    Tensor pre = Tensor::view(pre_, s * rows * kGates * f, {rows, kGates * f});
    Tensor c = Tensor::view(cs_, (s + 1) * rows * f, {rows, f});
    Tensor h = Tensor::view(hs_, (s + 1) * rows * f, {rows, f});
    ops.lstm_step_forward(cell_, xw, rec_.reshaped({rows, kGates * f}),
                          Tensor::view(cs_, s * rows * f, {rows, f}), pre, c, h);
  }
  const std::int64_t out_width = cells_ * f;
  if (options_.return_sequences)
    to_batch_major(Tensor::view(hs_, rows * f, {steps_ * batch_, out_width}), out_width,
                   output_);
  else
    ops.copy(Tensor::view(hs_, steps_ * rows * f, output_.shape()), output_);
  pack_outputs();
  return options_.return_state ? packed_ : output_;
}

std::vector<Shape> ConvLstm::output_parts() const {
  if (!options_.return_state) return {output_shape_};
  Shape state = out_grid_;
  state.push_back(options_.filters);
  return {output_shape_, state, state};
}

void ConvLstm::pack_outputs() {
  if (!options_.return_state) return;
  backend::Backend& ops = this->ops();
  const std::int64_t width = shape_size(output_shape_), state = cells_ * options_.filters;
  const std::int64_t total = width + 2 * state;
  ops.place(packed_, {batch_, total});
  if (batch_ == 0) return;
  const std::int64_t last = steps_ * batch_ * state;  // step `steps_` of hs_ and cs_
  ops.copy_columns(output_.reshaped({batch_, width}), width, 0, packed_, total, 0, width);
  ops.copy_columns(Tensor::view(hs_, last, {batch_, state}), state, 0, packed_, total, width,
                   state);
  ops.copy_columns(Tensor::view(cs_, last, {batch_, state}), state, 0, packed_, total,
                   width + state, state);
}

const Tensor& ConvLstm::unpack_gradient(const Tensor& grad_output) {
  backend::Backend& ops = this->ops();
  const std::int64_t state = cells_ * options_.filters;
  ops.fill(ops.place(dh_, {batch_ * cells_, options_.filters}), 0.0f);
  ops.fill(ops.place(dc_, {batch_ * cells_, options_.filters}), 0.0f);
  if (!options_.return_state) return grad_output;
  const std::int64_t width = shape_size(output_shape_), total = width + 2 * state;
  ops.copy_columns(grad_output, total, 0,
                   ops.place(output_grad_, with_batch(batch_, output_shape_)), width, 0, width);
  ops.copy_columns(grad_output, total, width, dh_, state, 0, state);
  ops.copy_columns(grad_output, total, width + state, dc_, state, 0, state);
  return output_grad_;
}

const Tensor& ConvLstm::backward(const Tensor& given_grad, bool need_input_grad) {
  const Tensor& returned = options_.return_state ? packed_ : output_;
  if (batch_ < 0 || given_grad.shape() != returned.shape())
    throw ShapeError(who() + ": gradient of shape " + shape_to_string(given_grad.shape()) +
                     " does not match its output " + shape_to_string(returned.shape()));
  backend::Backend& ops = this->ops();
  const std::int64_t f = options_.filters, rows = batch_ * cells_, out_width = cells_ * f;
  initial_grads_.resize(initial_.size());
  for (std::size_t i = 0; i < initial_.size(); ++i)
    ops.place(initial_grads_[i], initial_[i]->shape());
  if (batch_ == 0) {
    for (Parameter* p : parameters())
      if (!p->grad.empty()) ops.fill(p->grad, 0.0f);
    grad_input_ = need_input_grad ? ops.place(grad_input_, with_batch(0, input_shape_)) : Tensor();
    return grad_input_;
  }
  // dh_ and dc_ start from the final states' gradients (zeros without return_state).
  const Tensor& grad_output = unpack_gradient(given_grad);
  if (options_.return_sequences)  // time-major, in processing order (as the output is)
    ops.swap_middle_axes(grad_output, {1, batch_, steps_, out_width},
                         ops.place(dh_out_, {steps_ * batch_, out_width}));
  ops.place(d_pre_, {steps_ * rows, kGates * f});
  for (std::int64_t s = steps_ - 1; s >= 0; --s) {
    // dh = dL/dh of the step: the output's part and the next step's (dh_, from dh_prev_).
    if (options_.return_sequences)
      ops.add(dh_, Tensor::view(dh_out_, s * rows * f, {rows, f}), dh_);
    else if (s == steps_ - 1)
      ops.add(dh_, grad_output.reshaped({rows, f}), dh_);
    Tensor d_pre = Tensor::view(d_pre_, s * rows * kGates * f, {rows, kGates * f});
    ops.lstm_step_backward(cell_, Tensor::view(pre_, s * rows * kGates * f, {rows, kGates * f}),
                           Tensor::view(cs_, s * rows * f, {rows, f}),
                           Tensor::view(cs_, (s + 1) * rows * f, {rows, f}), dh_, dc_, d_pre);
    if (s == 0 && initial_.empty()) break;  // h_0 is a constant zero state
    recurrent_conv().backward_data(d_pre.reshaped(images(batch_, out_grid_, kGates * f)),
                                   recurrent_kernel_.value, dh_prev_);
    if (recurrent_dropped_) {  // through the masks to h_prev itself
      recurrent_masks_.apply_backward(ops, dh_prev_, 1, dh_dropped_);
      ops.copy(dh_dropped_.reshaped({rows, f}), dh_);
    } else {
      ops.copy(dh_prev_.reshaped({rows, f}), dh_);
    }
  }
  // The initial states' gradients: dL/dh_0 (from the first step's recurrent convolution) and
  // dL/dc_0.
  for (std::size_t i = 0; i < initial_.size(); ++i)
    ops.copy((i == 0 ? dh_ : dc_).reshaped(initial_grads_[i].shape()), initial_grads_[i]);
  const Tensor d_pre_images = d_pre_.reshaped(images(steps_ * batch_, out_grid_, kGates * f));
  // The convolutions' inputs as they read them: masked where this forward dropped.
  const int rec_copies = recurrent_dropped_ ? recurrent_masks_.copies() : 1;
  const Tensor h_read =
      recurrent_dropped_ ? h_dropped_.reshaped(images(steps_ * batch_, out_grid_, rec_copies * f))
                         : Tensor::view(hs_, 0, images(steps_ * batch_, out_grid_, f));
  const int in_copies = input_dropped_ ? input_masks_.copies() : 1;
  const Tensor& x_read = input_dropped_ ? x_dropped_ : x_steps_;
  Tensor& dx_read = input_dropped_ ? dx_dropped_ : dx_steps_;
  const Tensor x_images = x_read.reshaped(images(steps_ * batch_, in_grid_, in_copies * channels_));
  if (!kernel_.grad.empty()) {  // a frozen layer on a device replica has no gradients
    recurrent_conv().backward_weights(h_read, d_pre_images, recurrent_kernel_.grad, nullptr);
    input_conv().backward(x_images, d_pre_images, kernel_.value, kernel_.grad,
                          options_.use_bias ? &bias_.grad : nullptr,
                          need_input_grad ? &dx_read : nullptr);
  } else if (need_input_grad) {
    input_conv().backward_data(d_pre_images, kernel_.value, dx_read);
  }
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  if (input_dropped_) input_masks_.apply_backward(ops, dx_dropped_, steps_, dx_steps_);
  const std::int64_t in_width = shape_size(in_grid_) * channels_;
  Tensor& dx = ops.place(grad_input_, with_batch(batch_, input_shape_));
  if (!options_.go_backwards) {
    to_batch_major(dx_steps_.reshaped({steps_ * batch_, in_width}), in_width, dx);
    return grad_input_;
  }
  to_batch_major(dx_steps_.reshaped({steps_ * batch_, in_width}), in_width,
                 ops.place(swapped_, dx.shape()));
  reverse_steps(ops, swapped_, dx, steps_, in_width);
  return grad_input_;
}

std::vector<std::uint64_t> ConvLstm::random_state() const {
  return draws() ? random_.state() : std::vector<std::uint64_t>{};
}

void ConvLstm::set_random_state(const std::vector<std::uint64_t>& state) {
  if (draws()) {
    random_.set_state(state, name());
  } else if (!state.empty()) {
    throw DataError(who() + " has no dropout, but its saved random state has " +
                    std::to_string(state.size()) + " numbers");
  }
}

std::vector<Parameter*> ConvLstm::parameters() {
  if (options_.use_bias) return {&kernel_, &recurrent_kernel_, &bias_};
  return {&kernel_, &recurrent_kernel_};
}

nlohmann::json ConvLstm::config() const {
  const auto sizes = [](const std::vector<std::int64_t>& v) { return nlohmann::json(v); };
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"return_sequences", options_.return_sequences},
          {"return_state", options_.return_state},
          {"go_backwards", options_.go_backwards},
          {"stateful", false},
          {"unroll", false},
          {"filters", options_.filters},
          {"kernel_size", sizes(options_.kernel_size)},
          {"strides", sizes(options_.strides)},
          {"padding", padding_name(options_.padding)},
          {"data_format", "channels_last"},
          {"dilation_rate", sizes(options_.dilation_rate)},
          {"activation", activation_name(options_.activation)},
          {"recurrent_activation", activation_name(options_.recurrent_activation)},
          {"use_bias", options_.use_bias},
          {"kernel_initializer", options_.kernel_initializer.config()},
          {"recurrent_initializer", options_.recurrent_initializer.config()},
          {"bias_initializer", options_.bias_initializer.config()},
          {"unit_forget_bias", options_.unit_forget_bias},
          {"kernel_regularizer", options_.kernel_regularizer.config()},
          {"recurrent_regularizer", options_.recurrent_regularizer.config()},
          {"bias_regularizer", options_.bias_regularizer.config()},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", options_.kernel_constraint.config()},
          {"recurrent_constraint", options_.recurrent_constraint.config()},
          {"bias_constraint", options_.bias_constraint.config()},
          {"dropout", options_.dropout},
          {"recurrent_dropout", options_.recurrent_dropout},
          {"seed", options_.seed ? nlohmann::json(*options_.seed) : nlohmann::json(nullptr)}};
}

std::vector<RuledWeight> ConvLstm::ruled_weights() {
  std::vector<RuledWeight> out{
      {&kernel_, &options_.kernel_constraint, &options_.kernel_regularizer},
      {&recurrent_kernel_, &options_.recurrent_constraint, &options_.recurrent_regularizer}};
  if (options_.use_bias)
    out.push_back({&bias_, &options_.bias_constraint, &options_.bias_regularizer});
  return out;
}

}  // namespace tandem::nn
