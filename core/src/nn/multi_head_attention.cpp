#include "nn/multi_head_attention.hpp"

#include <cmath>

#include "backend/ops.hpp"
#include "nn/attention_call.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

MultiHeadAttention::MultiHeadAttention(std::string name, MultiHeadAttentionOptions options)
    : Layer(std::move(name)), options_(std::move(options)) {
  if (options_.value_dim == 0) options_.value_dim = options_.key_dim;
  if (options_.key_value_heads == 0) options_.key_value_heads = options_.num_heads;
  query_.kernel.name = "query/kernel";
  query_.bias.name = "query/bias";
  key_.kernel.name = "key/kernel";
  key_.bias.name = "key/bias";
  value_.kernel.name = "value/kernel";
  value_.bias.name = "value/bias";
  output_kernel_.name = "attention_output/kernel";
  output_bias_.name = "attention_output/bias";
  dropout_ = attention_dropout(this->name(), options_.dropout, options_.seed);
}

void MultiHeadAttention::set_call_arguments(const std::vector<std::string>& tensors,
                                            const nlohmann::json& options,
                                            const std::string& path) {
  value_at_ = key_at_ = mask_at_ = -1;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const int at = static_cast<int>(i) + 1;
    const std::string& n = tensors[i];
    int* slot = n == "value" ? &value_at_ : n == "key" ? &key_at_ : n == "attention_mask" ? &mask_at_ : nullptr;
    if (!slot)
      throw ConfigError(path, label() + " takes the tensors query, value, key and "
                                        "attention_mask; '" + n + "' is not supported");
    if (*slot >= 0) throw ConfigError(path, label() + " is given '" + n + "' twice");
    *slot = at;
  }
  if (value_at_ < 0)
    throw ConfigError(path, label() + " needs a value tensor (call it as mha(query, value))");
  inputs_ = tensors.size() + 1;
  causal_ = read_causal_option(options, path, label(), false);
}

Shape MultiHeadAttention::build(const Shape&, Rng&) {
  throw ShapeError(label() + " attends from a query to a value: it belongs in a functional "
                             "model, called as mha(query, value)");
}

const Tensor& MultiHeadAttention::forward(const Tensor&, bool) {
  throw ShapeError(label() + " takes a query and a value");
}

const Tensor& MultiHeadAttention::backward(const Tensor&, bool) {
  throw ShapeError(label() + " takes a query and a value");
}

void MultiHeadAttention::build_projection(Projection& p, std::int64_t in, const Shape& kernel_tail,
                                          Rng& init) {
  p.in = in;
  p.width = kernel_tail[0] * kernel_tail[1];
  p.products.reset();
  const Shape kernel_shape{in, kernel_tail[0], kernel_tail[1]};
  p.kernel.value = Tensor(kernel_shape);
  p.kernel.grad = Tensor(kernel_shape);
  options_.kernel_initializer.fill(p.kernel.value, init);
  if (options_.use_bias) {
    p.bias.value = Tensor(kernel_tail);
    p.bias.grad = Tensor(kernel_tail);
    options_.bias_initializer.fill(p.bias.value, init);
  }
}

std::int64_t MultiHeadAttention::output_dim() const {
  return options_.output_dim ? *options_.output_dim : query_features_;
}

Shape MultiHeadAttention::build_inputs(const std::vector<Shape>& shapes, Rng& init) {
  if (value_at_ < 0) {  // no call arguments were given: Keras 3's mha(query, value)
    value_at_ = 1;
    inputs_ = 2;
  }
  if (shapes.size() != inputs_)
    throw ShapeError(label() + " takes " + std::to_string(inputs_) + " tensors in this call, got " +
                     std::to_string(shapes.size()));
  auto sequence = [&](const Shape& s, const char* what) {
    if (s.size() != 2)
      throw ShapeError(label() + ": the " + what + " must be a sequence (batch, time, features), "
                       "got " + shape_to_string(s, true));
  };
  query_shape_ = shapes[0];
  value_shape_ = shapes[static_cast<std::size_t>(value_at_)];
  key_shape_ = key_at_ >= 0 ? shapes[static_cast<std::size_t>(key_at_)] : value_shape_;
  sequence(query_shape_, "query");
  sequence(value_shape_, "value");
  sequence(key_shape_, "key");
  if (key_shape_[0] != value_shape_[0])
    throw ShapeError(label() + ": key " + shape_to_string(key_shape_, true) + " and value " +
                     shape_to_string(value_shape_, true) + " differ in length");
  tq_ = query_shape_[0];
  tv_ = value_shape_[0];
  query_features_ = query_shape_[1];
  if (mask_at_ >= 0 && shapes[static_cast<std::size_t>(mask_at_)] != Shape{tq_, tv_})
    throw ShapeError(label() + ": the attention_mask must be (batch, " + std::to_string(tq_) +
                     ", " + std::to_string(tv_) + "), got " +
                     shape_to_string(shapes[static_cast<std::size_t>(mask_at_)], true));
  const std::int64_t h = options_.num_heads, k = options_.key_dim, v = options_.value_dim,
                     kv = options_.key_value_heads;
  // Keras builds query, key, value, then the output projection.
  build_projection(query_, query_features_, {h, k}, init);
  build_projection(key_, key_shape_[1], {kv, k}, init);
  build_projection(value_, value_shape_[1], {kv, v}, init);
  const Shape out_kernel{h, v, output_dim()};
  output_products_.reset();
  output_kernel_.value = Tensor(out_kernel);
  output_kernel_.grad = Tensor(out_kernel);
  options_.kernel_initializer.fill(output_kernel_.value, init);
  if (options_.use_bias) {
    output_bias_.value = Tensor({output_dim()});
    output_bias_.grad = Tensor({output_dim()});
    options_.bias_initializer.fill(output_bias_.value, init);
  }
  if (dropout_) dropout_->build({h, tq_, tv_}, init);
  return {tq_, output_dim()};
}

void MultiHeadAttention::check_inputs(const std::vector<const Tensor*>& inputs) const {
  if (inputs.size() != inputs_)
    throw ShapeError(label() + " was built for " + std::to_string(inputs_) + " inputs, got " +
                     std::to_string(inputs.size()));
  require_batch_of(*inputs[0], query_shape_, label() + ", query");
  require_batch_of(*inputs[static_cast<std::size_t>(value_at_)], value_shape_, label() + ", value");
  if (key_at_ >= 0)
    require_batch_of(*inputs[static_cast<std::size_t>(key_at_)], key_shape_, label() + ", key");
  if (mask_at_ >= 0)
    require_batch_of(*inputs[static_cast<std::size_t>(mask_at_)], {tq_, tv_},
                     label() + ", attention_mask");
  for (const Tensor* t : inputs)
    if (t->dim(0) != inputs[0]->dim(0))
      throw ShapeError(label() + ": its inputs differ in batch size (" +
                       std::to_string(inputs[0]->dim(0)) + " and " + std::to_string(t->dim(0)) +
                       ")");
}

backend::HiddenRows hidden_attention_rows(bool keras2, double dropout) {
  if (keras2) return backend::HiddenRows::keras2_additive;
  return dropout > 0 ? backend::HiddenRows::zeros : backend::HiddenRows::uniform;
}

backend::AttentionMaskDesc MultiHeadAttention::attention_desc() const {
  return {options_.num_heads, tq_, tv_, causal_,
          hidden_attention_rows(keras2_hidden_rows_, options_.dropout)};
}

backend::DenseProducts& MultiHeadAttention::products(DenseProductsOf& of, std::int64_t in,
                                                     std::int64_t width) {
  return of.of(
      ops(),
      {in, width, options_.use_bias ? backend::GemmEpilogue::bias : backend::GemmEpilogue::none});
}

void MultiHeadAttention::project(Projection& p, const Tensor& x) {
  const std::int64_t rows = x.size() / p.in;
  products(p.products, p.in, p.width)
      .forward(x, p.kernel.value, options_.use_bias ? &p.bias.value : nullptr,
               ops().place(p.out, {rows, p.width}));
}

const Tensor& MultiHeadAttention::forward_inputs(const std::vector<const Tensor*>& inputs,
                                                 bool training) {
  check_inputs(inputs);
  inputs_seen_ = inputs;
  backend::Backend& ops = this->ops();
  const Tensor& query = *inputs[0];
  const Tensor& value = *inputs[static_cast<std::size_t>(value_at_)];
  const Tensor& key = key_at_ >= 0 ? *inputs[static_cast<std::size_t>(key_at_)] : value;
  const std::int64_t b = query.dim(0), h = options_.num_heads, k = options_.key_dim,
                     v = options_.value_dim, kv = options_.key_value_heads, rows = group() * tq_;
  const Tensor* mask =
      attention_mask(mask_at_ >= 0 ? inputs[static_cast<std::size_t>(mask_at_)] : nullptr, b);
  batch_ = b;
  project(query_, query);
  project(key_, key);
  project(value_, value);
  // Keras scales the projected query by 1 / sqrt(key_dim) before the product.
  ops.affine(query_.out, static_cast<float>(1.0 / std::sqrt(static_cast<double>(k))), 0.0f,
             query_.out);
  ops.swap_middle_axes(query_.out, {b, tq_, h, k}, ops.place(qh_, {b, h, tq_, k}));
  ops.swap_middle_axes(key_.out, {b, tv_, kv, k}, ops.place(kh_, {b, kv, tv_, k}));
  ops.swap_middle_axes(value_.out, {b, tv_, kv, v}, ops.place(vh_, {b, kv, tv_, v}));
  // Per key/value head, its group's queries as the rows of one product.
  ops.gemm({false, true, rows, tv_, k, backend::GemmEpilogue::none, b * kv}, qh_, kh_, nullptr,
           ops.place(scores_, {b, h, tq_, tv_}));
  ops.masked_softmax(attention_desc(), scores_, mask, ops.place(probs_, scores_.shape()));
  attended_ = &probs_;
  if (dropout_) {
    dropout_->set_backend(ops);
    dropout_->set_sample_offset(sample_offset());
    attended_ = &dropout_->forward(probs_, training);
  }
  ops.gemm({false, false, rows, v, tv_, backend::GemmEpilogue::none, b * kv}, *attended_, vh_,
           nullptr, ops.place(context_, {b, h, tq_, v}));
  ops.swap_middle_axes(context_, {b, h, tq_, v}, ops.place(context_t_, {b, tq_, h, v}));
  products(output_products_, h * v, output_dim())
      .forward(context_t_, output_kernel_.value, options_.use_bias ? &output_bias_.value : nullptr,
               ops.place(output_, {b, tq_, output_dim()}));
  return output_;
}

void MultiHeadAttention::set_input_masks(const std::vector<const Tensor*>& masks) {
  const auto at = [&](int i) {
    return i >= 0 && static_cast<std::size_t>(i) < masks.size() ? masks[static_cast<std::size_t>(i)]
                                                                : nullptr;
  };
  query_mask_ = masks.empty() ? nullptr : masks[0];
  key_masks_.clear();
  for (const Tensor* m : {at(value_at_), at(key_at_)})
    if (m) key_masks_.push_back(m);
}

const Tensor* MultiHeadAttention::attention_mask(const Tensor* explicit_mask, std::int64_t batch) {
  combined_mask_ = explicit_mask;
  if (!query_mask_ && key_masks_.empty()) return combined_mask_;
  backend::Backend& ops = this->ops();
  // The outer product of the query's mask and the keys' (ones where none), per sample.
  Tensor& keys = ops.place(key_mask_, {batch, tv_});
  if (key_masks_.empty())
    ops.fill(keys, 1.0f);
  else
    ops.copy(*key_masks_[0], keys);
  for (std::size_t i = 1; i < key_masks_.size(); ++i) ops.multiply(keys, *key_masks_[i], keys);
  keys_for_every_query(ops, query_mask_, keys, batch, tq_, tv_, ones_, auto_mask_);
  if (explicit_mask) ops.multiply(auto_mask_, *explicit_mask, auto_mask_);
  combined_mask_ = &auto_mask_;
  return combined_mask_;
}

void MultiHeadAttention::project_backward(Projection& p, const Tensor& x, bool need_input_grad) {
  backend::Backend& ops = this->ops();
  if (options_.use_bias && !p.bias.grad.empty()) ops.column_sums(p.grad_out, p.width, p.bias.grad);
  products(p.products, p.in, p.width)
      .backward(x, p.grad_out, p.kernel.value, p.kernel.grad.empty() ? nullptr : &p.kernel.grad,
                need_input_grad ? &ops.place(p.grad_in, x.shape()) : nullptr);
}

std::vector<const Tensor*> MultiHeadAttention::backward_inputs(const Tensor& dy,
                                                               bool need_input_grad) {
  backend::Backend& ops = this->ops();
  const std::int64_t b = batch_, h = options_.num_heads, k = options_.key_dim,
                     v = options_.value_dim, out = output_dim(), kv = options_.key_value_heads,
                     rows = group() * tq_;
  if (dy.size() != b * tq_ * out)
    throw ShapeError(label() + ": gradient of shape " + shape_to_string(dy.shape()) +
                     " does not match its output");
  const Tensor& query = *inputs_seen_[0];
  const Tensor& value = *inputs_seen_[static_cast<std::size_t>(value_at_)];
  const Tensor& key = key_at_ >= 0 ? *inputs_seen_[static_cast<std::size_t>(key_at_)] : value;
  // The output projection.
  if (options_.use_bias && !output_bias_.grad.empty()) ops.column_sums(dy, out, output_bias_.grad);
  products(output_products_, h * v, out)
      .backward(context_t_, dy, output_kernel_.value,
                output_kernel_.grad.empty() ? nullptr : &output_kernel_.grad,
                &ops.place(d_context_t_, {b, tq_, h, v}));
  ops.swap_middle_axes(d_context_t_, {b, tq_, h, v}, ops.place(d_context_, {b, h, tq_, v}));
  // context = attended · V, per key/value head (its group's queries as rows).
  ops.gemm({false, true, rows, tv_, v, backend::GemmEpilogue::none, b * kv}, d_context_, vh_,
           nullptr, ops.place(d_probs_, {b, h, tq_, tv_}));
  ops.gemm({true, false, tv_, v, rows, backend::GemmEpilogue::none, b * kv}, *attended_, d_context_,
           nullptr, ops.place(d_vh_, {b, kv, tv_, v}));
  const Tensor* d_probs = &d_probs_;
  if (dropout_) d_probs = &dropout_->backward(d_probs_, true);
  const Tensor* mask = combined_mask_;
  ops.masked_softmax_backward(attention_desc(), probs_, mask, *d_probs,
                              ops.place(d_scores_, probs_.shape()));
  // scores = Q Kᵀ, per key/value head (Q already scaled).
  ops.gemm({false, false, rows, k, tv_, backend::GemmEpilogue::none, b * kv}, d_scores_, kh_,
           nullptr, ops.place(d_qh_, {b, h, tq_, k}));
  ops.gemm({true, false, tv_, k, rows, backend::GemmEpilogue::none, b * kv}, d_scores_, qh_,
           nullptr, ops.place(d_kh_, {b, kv, tv_, k}));
  ops.swap_middle_axes(d_qh_, {b, h, tq_, k}, ops.place(query_.grad_out, {b * tq_, h * k}));
  ops.affine(query_.grad_out, static_cast<float>(1.0 / std::sqrt(static_cast<double>(k))), 0.0f,
             query_.grad_out);
  ops.swap_middle_axes(d_kh_, {b, kv, tv_, k}, ops.place(key_.grad_out, {b * tv_, kv * k}));
  ops.swap_middle_axes(d_vh_, {b, kv, tv_, v}, ops.place(value_.grad_out, {b * tv_, kv * v}));
  project_backward(query_, query, need_input_grad);
  project_backward(key_, key, need_input_grad);
  project_backward(value_, value, need_input_grad);
  if (!need_input_grad) return {};
  std::vector<const Tensor*> grads(inputs_, nullptr);
  grads[0] = &query_.grad_in;
  if (key_at_ >= 0) {
    grads[static_cast<std::size_t>(key_at_)] = &key_.grad_in;
    grads[static_cast<std::size_t>(value_at_)] = &value_.grad_in;
  } else {  // the value served as the key too
    ops.add(value_.grad_in, key_.grad_in, ops.place(d_value_, value.shape()));
    grads[static_cast<std::size_t>(value_at_)] = &d_value_;
  }
  if (mask_at_ >= 0) {
    const Tensor& mask = *inputs_seen_[static_cast<std::size_t>(mask_at_)];
    ops.fill(ops.place(mask_grad_, mask.shape()), 0.0f);
    grads[static_cast<std::size_t>(mask_at_)] = &mask_grad_;
  }
  return grads;
}

std::vector<Parameter*> MultiHeadAttention::parameters() {
  std::vector<Parameter*> out;
  for (Projection* p : {&query_, &key_, &value_}) {
    out.push_back(&p->kernel);
    if (options_.use_bias) out.push_back(&p->bias);
  }
  out.push_back(&output_kernel_);
  if (options_.use_bias) out.push_back(&output_bias_);
  return out;
}

std::vector<std::uint64_t> MultiHeadAttention::random_state() const {
  return dropout_ ? dropout_->random_state() : std::vector<std::uint64_t>{};
}

void MultiHeadAttention::set_random_state(const std::vector<std::uint64_t>& state) {
  if (!dropout_) {
    if (!state.empty())
      throw DataError(label() + " has no dropout, but its saved random state has " +
                      std::to_string(state.size()) + " numbers");
    return;
  }
  dropout_->set_random_state(state);
}

nlohmann::json MultiHeadAttention::config() const {
  using nlohmann::json;
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"num_heads", options_.num_heads},
          {"key_dim", options_.key_dim},
          {"value_dim", options_.value_dim},
          {"dropout", options_.dropout},
          {"use_bias", options_.use_bias},
          {"output_shape", options_.output_dim ? json(*options_.output_dim) : json(nullptr)},
          {"attention_axes", nullptr},
          {"kernel_initializer", options_.kernel_initializer.config()},
          {"bias_initializer", options_.bias_initializer.config()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr},
          {"seed", options_.seed ? json(*options_.seed) : json(nullptr)}};
}

nlohmann::json GroupedQueryAttention::config() const {
  using nlohmann::json;
  const MultiHeadAttentionOptions& o = options();
  return {{"name", name()},
          {"trainable", trainable()},
          {"dtype", "float32"},
          {"head_dim", o.key_dim},
          {"num_query_heads", o.num_heads},
          {"num_key_value_heads", o.key_value_heads},
          {"use_bias", o.use_bias},
          {"dropout", o.dropout},
          {"kernel_initializer", o.kernel_initializer.config()},
          {"bias_initializer", o.bias_initializer.config()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr},
          {"seed", o.seed ? json(*o.seed) : json(nullptr)}};
}

}  // namespace tandem::nn
