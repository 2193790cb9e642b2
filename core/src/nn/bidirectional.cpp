#include "nn/bidirectional.hpp"

#include "backend/ops.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

std::string merge_mode_name(MergeMode mode) {
  switch (mode) {
    case MergeMode::sum:
      return "sum";
    case MergeMode::ave:
      return "ave";
    case MergeMode::mul:
      return "mul";
    case MergeMode::concat:
      break;
  }
  return "concat";
}

std::optional<MergeMode> merge_mode_named(const std::string& name) {
  for (MergeMode m : {MergeMode::concat, MergeMode::sum, MergeMode::ave, MergeMode::mul})
    if (merge_mode_name(m) == name) return m;
  return std::nullopt;
}

Bidirectional::Bidirectional(std::string name, std::unique_ptr<Recurrent> forward,
                             std::unique_ptr<Recurrent> backward, MergeMode merge,
                             bool own_backward)
    : Layer(std::move(name)),
      forward_(std::move(forward)),
      backward_(std::move(backward)),
      merge_(merge),
      own_backward_(own_backward),
      sequences_(forward_->returns_sequences()),
      states_(forward_->returns_state()) {
  for (Recurrent* layer : {forward_.get(), backward_.get()}) {
    // Keras forces a wrapped layer's masked steps to output zeros when it returns sequences.
    layer->set_zero_output_for_mask(sequences_);
    for (Parameter* p : layer->parameters()) p->name = layer->name() + "/" + p->name;
  }
}

Shape Bidirectional::build(const Shape& input_shape, Rng& init) {
  forward_->build(input_shape, init);
  backward_->build(input_shape, init);
  Shape out = forward_->output_parts()[0];
  const Shape behind = backward_->output_parts()[0];
  if (behind != out)
    throw ShapeError("layer '" + name() + "' (Bidirectional): its backward layer's output " +
                     shape_to_string(behind, true) + " is not its forward layer's " +
                     shape_to_string(out, true));
  steps_ = input_shape.empty() ? 0 : input_shape[0];
  units_ = out.back();
  merged_width_ = shape_size(output_parts()[0]);
  if (!states_) return output_parts()[0];
  return {merged_width() + 2 * state_width()};
}

std::vector<Shape> Bidirectional::output_parts() const {
  Shape merged = forward_->output_parts()[0];
  if (merge_ == MergeMode::concat) merged.back() *= 2;
  std::vector<Shape> parts{merged};
  for (const Recurrent* layer : {forward_.get(), backward_.get()}) {
    const std::vector<Shape> own = layer->output_parts();
    parts.insert(parts.end(), own.begin() + 1, own.end());
  }
  return parts;
}

std::int64_t Bidirectional::state_width() const {
  return states_ ? static_cast<std::int64_t>(forward_->state_count()) * units_ : 0;
}

void Bidirectional::set_call_arguments(const std::vector<std::string>& tensors,
                                       const nlohmann::json& options, const std::string& path) {
  check_recurrent_call_arguments("layer '" + name() + "' (Bidirectional)", tensors, options, path);
  called_with_arguments_ = true;
}

Shape Bidirectional::build_inputs(const std::vector<Shape>& input_shapes, Rng& init) {
  const std::size_t each = forward_->state_count();
  const Shape out = build(input_shapes[0], init);
  check_initial_states("layer '" + name() + "' (Bidirectional)", input_shapes, 2 * each,
                       std::to_string(2 * each) + " initial states (its forward layer's " +
                           std::to_string(each) + ", then its backward layer's)",
                       {units_});
  return out;
}

const Tensor& Bidirectional::forward_inputs(const std::vector<const Tensor*>& inputs,
                                            bool training) {
  initial_.assign(inputs.begin() + 1, inputs.end());
  return forward(*inputs[0], training);
}

const Tensor& Bidirectional::run_layer(Recurrent& layer, const Tensor& x, std::size_t half,
                                       bool training) {
  if (initial_.empty()) return layer.forward(x, training);
  const auto each = static_cast<std::ptrdiff_t>(layer.state_count());
  std::vector<const Tensor*> inputs{&x};
  inputs.insert(inputs.end(), initial_.begin() + static_cast<std::ptrdiff_t>(half) * each,
                initial_.begin() + static_cast<std::ptrdiff_t>(half + 1) * each);
  return layer.forward_inputs(inputs, training);
}

void Bidirectional::set_input_mask(const Tensor* mask) {
  input_mask_ = mask;
  forward_->set_input_mask(mask);
  backward_->set_input_mask(mask);
}

void Bidirectional::place_layers() {
  for (Layer* layer : {forward_.get(), backward_.get()}) {
    layer->set_backend(ops());
    layer->set_sample_offset(sample_offset());
  }
}

const Tensor& Bidirectional::forward(const Tensor& x, bool training) {
  place_layers();
  backend::Backend& ops = this->ops();
  ahead_all_ = &run_layer(*forward_, x, 0, training);
  const Tensor& ahead = forward_->sequence_output();
  forward_out_ = &ahead;
  behind_all_ = &run_layer(*backward_, x, 1, training);
  const Tensor& behind = backward_->sequence_output();
  if (sequences_)
    reverse_steps(ops, behind, backward_out_, steps_, units_);
  else
    backward_out_ = behind;
  Shape shape = ahead.shape();
  if (merge_ == MergeMode::concat) shape.back() *= 2;
  ops.place(output_, shape);
  switch (merge_) {
    case MergeMode::concat:
      ops.copy_columns(ahead, units_, 0, output_, 2 * units_, 0, units_);
      ops.copy_columns(backward_out_, units_, 0, output_, 2 * units_, units_, units_);
      break;
    case MergeMode::sum:
      ops.add(ahead, backward_out_, output_);
      break;
    case MergeMode::ave:
      ops.add(ahead, backward_out_, output_);
      ops.affine(output_, 0.5f, 0.0f, output_);
      break;
    case MergeMode::mul:
      ops.multiply(ahead, backward_out_, output_);
      break;
  }
  if (!states_) return output_;
  // The merged output, then each layer's final states (the columns after its own output).
  const std::int64_t rows = x.dim(0), merged = merged_width(), states = state_width();
  const std::int64_t total = merged + 2 * states,
                     own = shape_size(forward_out_->shape()) / std::max<std::int64_t>(rows, 1);
  ops.place(packed_, {rows, total});
  if (rows == 0) return packed_;
  ops.copy_columns(output_, merged, 0, packed_, total, 0, merged);
  ops.copy_columns(*ahead_all_, own + states, own, packed_, total, merged, states);
  ops.copy_columns(*behind_all_, own + states, own, packed_, total, merged + states, states);
  return packed_;
}

const Tensor& Bidirectional::layer_gradient(const Tensor& d_main, const Tensor& given_grad,
                                            std::int64_t from, Tensor& into) {
  if (!states_) return d_main;
  backend::Backend& ops = this->ops();
  const std::int64_t rows = d_main.rank() > 0 ? d_main.dim(0) : 0;
  const std::int64_t own = rows > 0 ? d_main.size() / rows : 0, states = state_width();
  const std::int64_t total = merged_width() + 2 * states;
  ops.place(into, {rows, own + states});
  if (rows == 0) return into;
  ops.copy_columns(d_main, own, 0, into, own + states, 0, own);
  ops.copy_columns(given_grad, total, from, into, own + states, own, states);
  return into;
}

std::vector<const Tensor*> Bidirectional::backward_inputs(const Tensor& grad_output,
                                                          bool need_input_grad) {
  const Tensor& dx = backward(grad_output, need_input_grad);
  input_grads_.clear();
  if (!need_input_grad) return input_grads_;
  input_grads_.push_back(&dx);
  if (initial_.empty()) return input_grads_;
  for (const Recurrent* layer : {forward_.get(), backward_.get()})
    for (const Tensor& g : layer->initial_state_gradients()) input_grads_.push_back(&g);
  return input_grads_;
}

const Tensor& Bidirectional::backward(const Tensor& given_grad, bool need_input_grad) {
  const Tensor& returned = states_ ? packed_ : output_;
  if (given_grad.size() != returned.size())
    throw ShapeError("layer '" + name() + "' (Bidirectional): gradient of shape " +
                     shape_to_string(given_grad.shape()) + " does not match its output " +
                     shape_to_string(returned.shape()));
  backend::Backend& ops = this->ops();
  const Tensor* merged_grad = &given_grad;
  if (states_) {
    const std::int64_t rows = output_.rank() > 0 ? output_.dim(0) : 0, merged = merged_width();
    ops.place(merged_grad_, output_.shape());
    if (rows > 0)
      ops.copy_columns(given_grad, merged + 2 * state_width(), 0, merged_grad_, merged, 0, merged);
    merged_grad = &merged_grad_;
  }
  const Tensor& grad_output = *merged_grad;
  const Shape& shape = forward_out_->shape();
  const Tensor* d_ahead = &grad_output;
  const Tensor* d_behind = &grad_output;
  switch (merge_) {
    case MergeMode::concat:
      ops.copy_columns(grad_output, 2 * units_, 0, ops.place(d_forward_, shape), units_, 0, units_);
      ops.copy_columns(grad_output, 2 * units_, units_, ops.place(d_backward_, shape), units_, 0,
                       units_);
      d_ahead = &d_forward_;
      d_behind = &d_backward_;
      break;
    case MergeMode::sum:
      break;
    case MergeMode::ave:
      ops.affine(grad_output, 0.5f, 0.0f, ops.place(d_forward_, shape));
      d_ahead = d_behind = &d_forward_;
      break;
    case MergeMode::mul:
      ops.multiply(grad_output, backward_out_, ops.place(d_forward_, shape));
      ops.multiply(grad_output, *forward_out_, ops.place(d_backward_, shape));
      d_ahead = &d_forward_;
      d_behind = &d_backward_;
      break;
  }
  if (sequences_) {
    reverse_steps(ops, *d_behind, d_backward_steps_, steps_, units_);
    d_behind = &d_backward_steps_;
  }
  const std::int64_t merged = merged_width();
  const Tensor& dx_ahead = forward_->backward(
      layer_gradient(*d_ahead, given_grad, merged, d_forward_packed_), need_input_grad);
  const Tensor& dx_behind = backward_->backward(
      layer_gradient(*d_behind, given_grad, merged + state_width(), d_backward_packed_),
      need_input_grad);
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  ops.add(dx_ahead, dx_behind, ops.place(grad_input_, dx_ahead.shape()));
  return grad_input_;
}

std::vector<Parameter*> Bidirectional::parameters() {
  std::vector<Parameter*> out = forward_->parameters();
  for (Parameter* p : backward_->parameters()) out.push_back(p);
  return out;
}

std::vector<RuledWeight> Bidirectional::ruled_weights() {
  std::vector<RuledWeight> out = forward_->ruled_weights();
  for (const RuledWeight& w : backward_->ruled_weights()) out.push_back(w);
  return out;
}

// Keras' config: the wrapped layer (and a backward layer the config gave) under its own name, as
// Keras 2 writes it (Keras 3 takes either).
nlohmann::json Bidirectional::config() const {
  const auto entry = [](const Recurrent& layer, const std::string& prefix) {
    nlohmann::json config = layer.config();
    config["name"] = layer.name().substr(prefix.size());
    return nlohmann::json{{"class_name", layer.class_name()}, {"config", config}};
  };
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"layer", entry(*forward_, "forward_")},
                      {"merge_mode", merge_mode_name(merge_)}};
  if (own_backward_) c["backward_layer"] = entry(*backward_, "backward_");
  return c;
}

std::vector<std::uint64_t> Bidirectional::random_state() const {
  std::vector<std::uint64_t> state = forward_->random_state();
  for (std::uint64_t v : backward_->random_state()) state.push_back(v);
  return state;
}

void Bidirectional::set_random_state(const std::vector<std::uint64_t>& state) {
  const std::size_t ahead = forward_->random_state().size();
  if (state.size() != ahead + backward_->random_state().size())
    throw DataError("layer '" + name() + "' (Bidirectional): a random state of " +
                    std::to_string(state.size()) + " numbers, expected " +
                    std::to_string(ahead + backward_->random_state().size()));
  forward_->set_random_state({state.begin(), state.begin() + static_cast<std::ptrdiff_t>(ahead)});
  backward_->set_random_state({state.begin() + static_cast<std::ptrdiff_t>(ahead), state.end()});
}

void Bidirectional::use_keras2_definitions() {
  forward_->use_keras2_definitions();
  backward_->use_keras2_definitions();
}

}  // namespace tandem::nn
