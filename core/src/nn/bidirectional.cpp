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
      sequences_(forward_->returns_sequences()) {
  for (Recurrent* layer : {forward_.get(), backward_.get()}) {
    // Keras forces a wrapped layer's masked steps to output zeros when it returns sequences.
    layer->set_zero_output_for_mask(sequences_);
    for (Parameter* p : layer->parameters()) p->name = layer->name() + "/" + p->name;
  }
}

Shape Bidirectional::build(const Shape& input_shape, Rng& init) {
  Shape out = forward_->build(input_shape, init);
  const Shape behind = backward_->build(input_shape, init);
  if (behind != out)
    throw ShapeError("layer '" + name() + "' (Bidirectional): its backward layer's output " +
                     shape_to_string(behind, true) + " is not its forward layer's " +
                     shape_to_string(out, true));
  steps_ = input_shape.empty() ? 0 : input_shape[0];
  units_ = out.back();
  if (merge_ == MergeMode::concat) out.back() *= 2;
  return out;
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
  const Tensor& ahead = forward_->forward(x, training);
  forward_out_ = &ahead;
  const Tensor& behind = backward_->forward(x, training);
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
  return output_;
}

const Tensor& Bidirectional::backward(const Tensor& grad_output, bool need_input_grad) {
  if (grad_output.size() != output_.size())
    throw ShapeError("layer '" + name() + "' (Bidirectional): gradient of shape " +
                     shape_to_string(grad_output.shape()) + " does not match its output " +
                     shape_to_string(output_.shape()));
  backend::Backend& ops = this->ops();
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
  const Tensor& dx_ahead = forward_->backward(*d_ahead, need_input_grad);
  const Tensor& dx_behind = backward_->backward(*d_behind, need_input_grad);
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
