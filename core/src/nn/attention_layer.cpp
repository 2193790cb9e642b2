#include "nn/attention_layer.hpp"

#include "backend/ops.hpp"
#include "nn/attention_call.hpp"
#include "nn/batch_shape.hpp"
#include "nn/initializer.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

AttentionLayer::AttentionLayer(std::string name, AttentionLayerOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  scale_.name = "scale";
  concat_score_weight_.name = "concat_score_weight";
  dropout_ = attention_dropout(this->name(), options_.dropout, options_.seed);
}

void AttentionLayer::set_call_arguments(const std::vector<std::string>& tensors,
                                        const nlohmann::json& options, const std::string& path) {
  for (const std::string& named : tensors)
    if (!named.empty())
      throw ConfigError(path, label() +
                                  " takes its tensors as one list, [query, value] or "
                                  "[query, value, key]; '" +
                                  named + "' is not supported");
  causal_ = read_causal_option(options, path, label(), options_.causal);
}

void AttentionLayer::refuse_one_input() const {
  throw ShapeError(label() + " takes a list of inputs, [query, value] or [query, value, key]");
}

Shape AttentionLayer::build(const Shape&, Rng&) {
  refuse_one_input();
}

const Tensor& AttentionLayer::forward(const Tensor&, bool) {
  refuse_one_input();
}

const Tensor& AttentionLayer::backward(const Tensor&, bool) {
  refuse_one_input();
}

Shape AttentionLayer::build_inputs(const std::vector<Shape>& shapes, Rng& init) {
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
  const bool additive = options_.scores == AttentionScores::additive;
  if (options_.use_scale) {
    // Attention's is one value of shape () ("ones"); AdditiveAttention's one per feature of the
    // query (glorot_uniform, Keras' fans of a vector).
    const Shape shape = additive ? Shape{dim_} : Shape{};
    scale_.value = Tensor(shape);
    scale_.grad = Tensor(shape);
    if (additive)
      parse_initializer("glorot_uniform", "scale").fill(scale_.value, init);
    else
      scale_.value.fill(1.0f);
  }
  if (options_.scores == AttentionScores::concat) {
    concat_score_weight_.value = Tensor(Shape{});
    concat_score_weight_.grad = Tensor(Shape{});
    concat_score_weight_.value.fill(1.0f);
  }
  if (dropout_) dropout_->build({tq_, tv_}, init);
  return {tq_, value_dim_};
}

backend::AttentionMaskDesc AttentionLayer::attention_desc() const {
  // Keras' Attention subtracts 1e9 from the hidden scores in both versions.
  return {1, tq_, tv_, causal_, backend::HiddenRows::keras2_additive};
}

backend::AdditiveScoresDesc AttentionLayer::additive_desc() const {
  const bool additive = options_.scores == AttentionScores::additive;
  return {batch_, tq_, tv_, dim_, additive && options_.use_scale, !additive && options_.use_scale};
}

Parameter* AttentionLayer::score_multiplier() {
  switch (options_.scores) {
    case AttentionScores::dot:
      return options_.use_scale ? &scale_ : nullptr;
    case AttentionScores::concat:
      return &concat_score_weight_;
    case AttentionScores::additive:
      return nullptr;
  }
  return nullptr;
}

void AttentionLayer::take_scores(const Tensor& query, const Tensor& key) {
  backend::Backend& ops = this->ops();
  Parameter* multiplier = score_multiplier();
  Tensor& raw = ops.place(multiplier ? raw_scores_ : scores_, {batch_, tq_, tv_});
  if (options_.scores == AttentionScores::dot) {
    ops.gemm({false, true, tq_, tv_, dim_, backend::GemmEpilogue::none, batch_}, query, key,
             nullptr, raw);
  } else {
    const backend::AdditiveScoresDesc desc = additive_desc();
    ops.additive_pairs(desc, query, key, desc.has_factor ? &scale_.value : nullptr,
                       ops.place(pairs_, {batch_, tq_, tv_, dim_}));
    ops.additive_scores(desc, pairs_, desc.has_weights ? &scale_.value : nullptr, raw);
  }
  if (multiplier)
    ops.column_affine(raw, multiplier->value, nullptr, ops.place(scores_, raw.shape()), 1);
}

void AttentionLayer::scores_backward(const Tensor& query, const Tensor& key, bool need_input_grad) {
  backend::Backend& ops = this->ops();
  if (Parameter* multiplier = score_multiplier()) {
    // d multiplier = Σ d_scores · raw scores; the raw scores' gradient, d_scores · multiplier.
    if (!multiplier->grad.empty()) {
      ops.multiply(d_scores_, raw_scores_, ops.place(product_, d_scores_.shape()));
      ops.column_sums(product_, 1, multiplier->grad);
    }
    ops.column_affine(d_scores_, multiplier->value, nullptr, d_scores_, 1);
  }
  if (options_.scores == AttentionScores::dot) {
    if (!need_input_grad) return;
    // scores = query · keyᵀ.
    ops.gemm({false, false, tq_, dim_, tv_, backend::GemmEpilogue::none, batch_}, d_scores_, key,
             nullptr, ops.place(d_query_, {batch_, tq_, dim_}));
    ops.gemm({true, false, tv_, dim_, tq_, backend::GemmEpilogue::none, batch_}, d_scores_, query,
             nullptr, ops.place(d_key_, {batch_, tv_, dim_}));
    return;
  }
  const backend::AdditiveScoresDesc desc = additive_desc();
  const bool scale_grad = options_.use_scale && !scale_.grad.empty();
  Tensor* weight_parts =
      scale_grad && desc.has_weights ? &ops.place(weight_parts_, {batch_ * tq_, dim_}) : nullptr;
  Tensor* factor_parts =
      scale_grad && desc.has_factor ? &ops.place(factor_parts_, {batch_ * tq_, 1}) : nullptr;
  Tensor* d_query = need_input_grad ? &ops.place(d_query_, {batch_, tq_, dim_}) : nullptr;
  Tensor* d_key = need_input_grad ? &ops.place(d_key_, {batch_, tv_, dim_}) : nullptr;
  ops.additive_scores_backward(desc, query, key, pairs_, desc.has_weights ? &scale_.value : nullptr,
                               desc.has_factor ? &scale_.value : nullptr, d_scores_, d_query, d_key,
                               weight_parts, factor_parts);
  if (weight_parts) ops.column_sums(*weight_parts, dim_, scale_.grad);
  if (factor_parts) ops.column_sums(*factor_parts, 1, scale_.grad);
}

void AttentionLayer::set_input_masks(const std::vector<const Tensor*>& masks) {
  query_mask_ = masks.empty() ? nullptr : masks[0];
  value_mask_ = masks.size() > 1 ? masks[1] : nullptr;  // Keras reads no key mask
}

const Tensor* AttentionLayer::key_mask(std::int64_t batch) {
  if (!value_mask_) return nullptr;
  keys_for_every_query(ops(), nullptr, *value_mask_, batch, tq_, tv_, ones_, scores_mask_);
  return &scores_mask_;
}

const Tensor& AttentionLayer::forward_inputs(const std::vector<const Tensor*>& inputs,
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
  take_scores(query, key);
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

std::vector<const Tensor*> AttentionLayer::backward_inputs(const Tensor& dy, bool need_input_grad) {
  backend::Backend& ops = this->ops();
  const std::int64_t b = batch_;
  if (dy.size() != b * tq_ * value_dim_)
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(dy.shape()) +
                     " does not match its output");
  if (b == 0) {
    for (Parameter* p : parameters())
      if (!p->grad.empty()) ops.fill(p->grad, 0.0f);
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
  scores_backward(query, key, need_input_grad);
  if (!need_input_grad) return {};
  if (inputs_ == 3) return {&d_query_, &d_value_, &d_key_};
  ops.add(d_value_, d_key_, d_value_);  // the value served as the key too
  return {&d_query_, &d_value_};
}

std::vector<Parameter*> AttentionLayer::parameters() {
  std::vector<Parameter*> weights;
  if (options_.use_scale) weights.push_back(&scale_);
  if (options_.scores == AttentionScores::concat) weights.push_back(&concat_score_weight_);
  return weights;
}

nlohmann::json AttentionLayer::config() const {
  nlohmann::json c = {{"name", name()},
                      {"trainable", trainable()},
                      {"dtype", "float32"},
                      {"use_scale", options_.use_scale},
                      {"dropout", options_.dropout}};
  if (options_.scores != AttentionScores::additive)  // Keras' AdditiveAttention writes none
    c["score_mode"] = options_.scores == AttentionScores::concat ? "concat" : "dot";
  if (options_.seed) c["seed"] = *options_.seed;
  if (options_.causal) c["causal"] = true;
  return c;
}

std::vector<std::uint64_t> AttentionLayer::random_state() const {
  return dropout_ ? dropout_->random_state() : std::vector<std::uint64_t>{};
}

void AttentionLayer::set_random_state(const std::vector<std::uint64_t>& state) {
  if (dropout_) dropout_->set_random_state(state);
}

}  // namespace tandem::nn
