#include "nn/dot_attention.hpp"

#include "backend/ops.hpp"
#include "nn/attention_call.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

DotAttention::DotAttention(std::string name, DotAttentionOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  scale_.name = "scale";
  dropout_ = attention_dropout(this->name(), options_.dropout, options_.seed);
}

void DotAttention::set_call_arguments(const std::vector<std::string>& tensors,
                                      const nlohmann::json& options, const std::string& path) {
  for (const std::string& named : tensors)
    if (!named.empty())
      throw ConfigError(path, label() +
                                  " takes its tensors as one list, [query, value] or "
                                  "[query, value, key]; '" +
                                  named + "' is not supported");
  causal_ = read_causal_option(options, path, label(), options_.causal);
}

void DotAttention::refuse_one_input() const {
  throw ShapeError(label() + " takes a list of inputs, [query, value] or [query, value, key]");
}

Shape DotAttention::build(const Shape&, Rng&) {
  refuse_one_input();
}

const Tensor& DotAttention::forward(const Tensor&, bool) {
  refuse_one_input();
}

const Tensor& DotAttention::backward(const Tensor&, bool) {
  refuse_one_input();
}

Shape DotAttention::build_inputs(const std::vector<Shape>& shapes, Rng& init) {
  if (shapes.size() != 2 && shapes.size() != 3)
    throw ShapeError(label() + " takes [query, value] or [query, value, key], got " +
                     std::to_string(shapes.size()) + " inputs");
  for (const Shape& s : shapes)
    if (s.size() != 2)
      throw ShapeError(label() + " takes sequences (None, steps, features), got " +
                       shape_to_string(s, true));
  const Shape& key = shapes.size() == 3 ? shapes[2] : shapes[1];
  if (key[0] != shapes[1][0] || key.back() != shapes[0].back())
    throw ShapeError(label() + ": its key " + shape_to_string(key, true) +
                     " needs the value's steps and the query's features (query " +
                     shape_to_string(shapes[0], true) + ", value " +
                     shape_to_string(shapes[1], true) + ")");
  inputs_ = shapes.size();
  query_shape_ = shapes[0];
  value_shape_ = shapes[1];
  tq_ = shapes[0][0];
  dim_ = shapes[0][1];
  tv_ = shapes[1][0];
  value_dim_ = shapes[1][1];
  if (options_.use_scale) {
    scale_.value = Tensor(Shape{});  // Keras' shape (): one value
    scale_.grad = Tensor(Shape{});
    scale_.value.fill(1.0f);  // Keras' initializer "ones"
  }
  if (dropout_) dropout_->build({tq_, tv_}, init);
  return {tq_, value_dim_};
}

backend::AttentionMaskDesc DotAttention::attention_desc() const {
  // Keras' Attention subtracts 1e9 from the hidden scores in both versions.
  return {1, tq_, tv_, causal_, backend::HiddenRows::keras2_additive};
}

void DotAttention::set_input_masks(const std::vector<const Tensor*>& masks) {
  query_mask_ = masks.empty() ? nullptr : masks[0];
  value_mask_ = masks.size() > 1 ? masks[1] : nullptr;  // Keras reads no key mask
}

const Tensor* DotAttention::key_mask(std::int64_t batch) {
  if (!value_mask_) return nullptr;
  keys_for_every_query(ops(), nullptr, *value_mask_, batch, tq_, tv_, ones_, scores_mask_);
  return &scores_mask_;
}

const Tensor& DotAttention::forward_inputs(const std::vector<const Tensor*>& inputs,
                                           bool training) {
  if (inputs.size() != inputs_)
    throw ShapeError(label() + " was built for " + std::to_string(inputs_) + " inputs, got " +
                     std::to_string(inputs.size()));
  require_batch_of(*inputs[0], query_shape_, label() + ", query");
  require_batch_of(*inputs[1], value_shape_, label() + ", value");
  if (inputs_ == 3) require_batch_of(*inputs[2], {tv_, dim_}, label() + ", key");
  const std::int64_t b = inputs[0]->dim(0);
  for (const Tensor* t : inputs)
    if (t->dim(0) != b)
      throw ShapeError(label() + ": its inputs differ in batch size (" + std::to_string(b) +
                       " and " + std::to_string(t->dim(0)) + ")");
  inputs_seen_ = inputs;
  batch_ = b;
  backend::Backend& ops = this->ops();
  ops.place(output_, {b, tq_, value_dim_});
  if (b == 0) return output_;
  const Tensor& query = *inputs[0];
  const Tensor& value = *inputs[1];
  const Tensor& key = inputs_ == 3 ? *inputs[2] : value;
  ops.gemm({false, true, tq_, tv_, dim_, backend::GemmEpilogue::none, b}, query, key, nullptr,
           ops.place(scores_, {b, tq_, tv_}));
  if (options_.use_scale) {
    ops.copy(scores_, ops.place(raw_scores_, scores_.shape()));
    ops.column_affine(raw_scores_, scale_.value, nullptr, scores_, 1);
  }
  mask_ = key_mask(b);
  ops.masked_softmax(attention_desc(), scores_, mask_, ops.place(probs_, scores_.shape()));
  attended_ = &probs_;
  if (dropout_) {
    dropout_->set_backend(ops);
    dropout_->set_sample_offset(sample_offset());
    attended_ = &dropout_->forward(probs_, training);
  }
  ops.gemm({false, false, tq_, value_dim_, tv_, backend::GemmEpilogue::none, b}, *attended_, value,
           nullptr, output_);
  if (query_mask_) ops.select_rows(*query_mask_, output_, nullptr, output_, value_dim_);
  return output_;
}

std::vector<const Tensor*> DotAttention::backward_inputs(const Tensor& dy, bool need_input_grad) {
  backend::Backend& ops = this->ops();
  const std::int64_t b = batch_;
  if (dy.size() != b * tq_ * value_dim_)
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(dy.shape()) +
                     " does not match its output");
  if (b == 0) {
    if (!scale_.grad.empty()) ops.fill(scale_.grad, 0.0f);
    if (!need_input_grad) return {};
    ops.place(d_query_, {0, tq_, dim_});
    ops.place(d_value_, {0, tv_, value_dim_});
    ops.place(d_key_, {0, tv_, dim_});
    if (inputs_ == 3) return {&d_query_, &d_value_, &d_key_};
    return {&d_query_, &d_value_};
  }
  const Tensor& query = *inputs_seen_[0];
  const Tensor& value = *inputs_seen_[1];
  const Tensor& key = inputs_ == 3 ? *inputs_seen_[2] : value;
  const Tensor* d_out = &dy;
  if (query_mask_) {
    ops.select_rows(*query_mask_, dy, nullptr, ops.place(d_out_, dy.shape()), value_dim_);
    d_out = &d_out_;
  }
  // out = attended · value.
  ops.gemm({false, true, tq_, tv_, value_dim_, backend::GemmEpilogue::none, b}, *d_out, value,
           nullptr, ops.place(d_attended_, {b, tq_, tv_}));
  ops.gemm({true, false, tv_, value_dim_, tq_, backend::GemmEpilogue::none, b}, *attended_, *d_out,
           nullptr, ops.place(d_value_, {b, tv_, value_dim_}));
  const Tensor* d_probs = &d_attended_;
  if (dropout_) d_probs = &dropout_->backward(d_attended_, true);
  ops.masked_softmax_backward(attention_desc(), probs_, mask_, *d_probs,
                              ops.place(d_scores_, probs_.shape()));
  if (options_.use_scale) {
    // d scale = Σ d_scores · raw scores; the raw scores' gradient, d_scores · scale.
    if (!scale_.grad.empty()) {
      ops.multiply(d_scores_, raw_scores_, ops.place(product_, d_scores_.shape()));
      ops.column_sums(product_, 1, scale_.grad);
    }
    ops.column_affine(d_scores_, scale_.value, nullptr, d_scores_, 1);
  }
  if (!need_input_grad) return {};
  // scores = query · keyᵀ.
  ops.gemm({false, false, tq_, dim_, tv_, backend::GemmEpilogue::none, b}, d_scores_, key, nullptr,
           ops.place(d_query_, {b, tq_, dim_}));
  ops.gemm({true, false, tv_, dim_, tq_, backend::GemmEpilogue::none, b}, d_scores_, query, nullptr,
           ops.place(d_key_, {b, tv_, dim_}));
  if (inputs_ == 3) return {&d_query_, &d_value_, &d_key_};
  ops.add(d_value_, d_key_, d_value_);  // the value served as the key too
  return {&d_query_, &d_value_};
}

std::vector<Parameter*> DotAttention::parameters() {
  if (options_.use_scale) return {&scale_};
  return {};
}

nlohmann::json DotAttention::config() const {
  nlohmann::json c = {{"name", name()},      {"trainable", trainable()},
                      {"dtype", "float32"},  {"use_scale", options_.use_scale},
                      {"score_mode", "dot"}, {"dropout", options_.dropout}};
  if (options_.seed) c["seed"] = *options_.seed;
  if (options_.causal) c["causal"] = true;
  return c;
}

std::vector<std::uint64_t> DotAttention::random_state() const {
  return dropout_ ? dropout_->random_state() : std::vector<std::uint64_t>{};
}

void DotAttention::set_random_state(const std::vector<std::uint64_t>& state) {
  if (dropout_) dropout_->set_random_state(state);
}

}  // namespace tandem::nn
