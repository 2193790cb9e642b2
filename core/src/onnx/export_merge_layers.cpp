// Exporters of the layers that take several inputs: the element-wise merges (folded in input
// order, as the layers fold them, so the rounding is the same), Concatenate, Dot and
// MultiHeadAttention (projections, scaled scores, masked softmax, heads joined, output
// projection — the steps of nn/multi_head_attention.hpp, in ONNX operators of opset 13).
#include <cmath>

#include "nn/attention_layer.hpp"
#include "nn/multi_head_attention.hpp"
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

// Every input in the first one's layout.
std::vector<OnnxValue> aligned_inputs(LayerCall& call) {
  std::vector<OnnxValue> in;
  for (const OnnxValue& v : call.inputs)
    in.push_back(call.graph.in_layout(v, call.inputs[0].channels_first));
  return in;
}

OnnxValue fold(LayerCall& call, const char* op) {
  const std::vector<OnnxValue> in = aligned_inputs(call);
  std::string acc = in[0].name;
  for (std::size_t i = 1; i < in.size(); ++i)
    acc = call.graph.node(op, {acc, in[i].name}, call.prefix).output();
  return OnnxGraph::like(in[0], acc);
}

OnnxValue export_average(LayerCall& call) {
  OnnxValue sum = fold(call, "Add");
  const float inv = 1.0f / static_cast<float>(call.inputs.size());
  sum.name = call.graph.node("Mul", {sum.name, call.graph.scalar(call.prefix + "/inverse_count", inv)},
                             call.prefix)
                 .output();
  return sum;
}

// Keras' axis (-1 the last; 1 the first after the batch) as a per-sample axis.
int per_sample_axis(int keras_axis, std::size_t rank) {
  return keras_axis < 0 ? keras_axis + static_cast<int>(rank) : keras_axis - 1;
}

OnnxValue export_concatenate(LayerCall& call) {
  const std::vector<OnnxValue> in = aligned_inputs(call);
  const auto it = call.config.find("axis");
  const int axis = per_sample_axis(it != call.config.end() ? it->get<int>() : -1, in[0].shape.size());
  std::vector<std::string> names;
  for (const OnnxValue& v : in) names.push_back(v.name);
  return {call.graph.node("Concat", names, call.prefix)
              .attr("axis", static_cast<std::int64_t>(in[0].stored_axis(axis)))
              .output(),
          call.output_shape, in[0].channels_first};
}

std::string transposed(OnnxGraph& g, const std::string& x, const std::vector<std::int64_t>& perm,
                       const std::string& prefix) {
  return g.node("Transpose", {x}, prefix).attr("perm", perm).output();
}

// Dot: vectors give (1) = sum(a * b); matrices a batched product contracting axes[0] of a with
// axes[1] of b. With normalize, each input L2-normalized along its contracted axis first (the
// floor of the model's Keras: nn/dot.hpp).
OnnxValue export_dot(LayerCall& call) {
  OnnxGraph& g = call.graph;
  OnnxValue a = g.in_layout(call.inputs[0], false), b = g.in_layout(call.inputs[1], false);
  const std::string& p = call.prefix;
  const nlohmann::json& axes = call.config.at("axes");
  const std::size_t rank = a.shape.size();
  const int ax = per_sample_axis(axes.is_array() ? axes[0].get<int>() : axes.get<int>(), rank);
  const int bx = per_sample_axis(axes.is_array() ? axes[1].get<int>() : axes.get<int>(), rank);
  if (call.config.value("normalize", false)) {
    const float floor = call.keras2 ? 1e-12f : 1e-14f;
    a.name = l2_normalized(g, a.name, {ax + 1}, floor, p + "/a");
    b.name = l2_normalized(g, b.name, {bx + 1}, floor, p + "/b");
  }
  if (rank == 1) {
    const std::string product = g.node("Mul", {a.name, b.name}, p).output();
    return {g.node("ReduceSum", {product, g.int64s(p + "/axes", {1})}, p)
                .attr("keepdims", std::int64_t{1})
                .output(),
            call.output_shape, false};
  }
  // a contracts its last axis, b its first (per sample).
  const std::string left = ax == 1 ? a.name : transposed(g, a.name, {0, 2, 1}, p);
  const std::string right = bx == 0 ? b.name : transposed(g, b.name, {0, 2, 1}, p);
  return {g.node("MatMul", {left, right}, p).output(), call.output_shape, false};
}

// x (batch, T, D) · kernel (D, H, W) + bias (H, W), as (batch, H, T, W).
std::string project(LayerCall& call, const OnnxValue& x, const std::string& which) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix + "/" + which;
  const Tensor& kernel = call.weight(which + "/kernel");
  const std::int64_t d = kernel.dim(0), h = kernel.dim(1), w = kernel.dim(2), t = x.shape[0];
  std::string y =
      g.node("MatMul", {x.name, call.constant(which + "/kernel", {d, h * w}, values_of(kernel))}, p)
          .output();
  if (call.has_weight(which + "/bias"))
    y = g.node("Add", {y, call.constant(which + "/bias", {h * w}, values_of(call.weight(which + "/bias")))},
               p)
            .output();
  y = g.node("Reshape", {y, g.int64s(p + "/shape", {-1, t, h, w})}, p).output();
  return transposed(g, y, {0, 2, 1, 3}, p);
}

OnnxValue export_multi_head_attention(LayerCall& call) {
  if (call.input_masked)
    call.refuse(
        "its inputs carry Keras masks (Embedding's mask_zero, a Masking layer), which "
        "Tandem's ONNX export does not turn into the attention mask; pass the mask as "
        "the call's attention_mask instead");
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue query = g.in_layout(call.inputs[0], false);
  OnnxValue value = query;
  std::optional<OnnxValue> key, mask;
  for (std::size_t i = 1; i < call.inputs.size(); ++i) {
    const std::string& arg = call.argument_names.at(i - 1);
    const OnnxValue v = g.in_layout(call.inputs[i], false);
    if (arg == "value") value = v;
    else if (arg == "key") key = v;
    else if (arg == "attention_mask") mask = v;
    else call.refuse("unknown call argument '" + arg + "'");
  }
  const std::int64_t tq = query.shape[0], tv = value.shape[0];
  const Tensor& qk = call.weight("query/kernel");
  const std::int64_t heads = qk.dim(1), key_dim = qk.dim(2);
  // GroupedQueryAttention's key/value heads: each serves a group of adjacent query heads, whose
  // rows are stacked for its products ((b, H, Tq, ·) seen as (b, kv heads, group · Tq, ·)).
  const std::int64_t kv_heads = call.weight("key/kernel").dim(1);
  const auto grouped = [&](const std::string& t, std::int64_t cols, const char* what) {
    if (kv_heads == heads) return t;
    return g
        .node(
            "Reshape",
            {t, g.int64s(p + "/" + what + "_grouped", {-1, kv_heads, heads / kv_heads * tq, cols})},
            p)
        .output();
  };
  const auto ungrouped = [&](const std::string& t, std::int64_t cols, const char* what) {
    if (kv_heads == heads) return t;
    return g.node("Reshape", {t, g.int64s(p + "/" + what + "_heads", {-1, heads, tq, cols})}, p)
        .output();
  };
  std::string q = project(call, query, "query");
  q = g.node("Mul", {q, g.scalar(p + "/scale", static_cast<float>(
                                                  1.0 / std::sqrt(static_cast<double>(key_dim))))},
             p)
          .output();
  const std::string k = project(call, key ? *key : value, "key");
  const std::string v = project(call, value, "value");
  const std::string scores = ungrouped(
      g.node("MatMul", {grouped(q, key_dim, "query"), transposed(g, k, {0, 1, 3, 2}, p)}, p)
          .output(),
      tv, "scores");  // (b, H, Tq, Tv)
  // keep (b or 1, 1, Tq, Tv): 1 where a key is seen, and hidden_bias -1e9 where it is not
  // (without an attention_mask both are constants). A row with every key hidden gets what the
  // layer gives it (nn::hidden_attention_rows): Keras 2's adds the bias to the scores (the
  // softmax of the scores less 1e9); Keras 3's without dropout replaces the hidden scores by the
  // bias (scores · keep + bias: uniform), with dropout adds it and multiplies the probabilities
  // by keep (zeros).
  std::vector<float> causal_keep;
  const auto causal = call.options.find("use_causal_mask");
  if (causal != call.options.end() && causal->is_boolean() && causal->get<bool>()) {
    causal_keep.assign(static_cast<std::size_t>(tq * tv), 0.0f);
    for (std::int64_t r = 0; r < tq; ++r)
      for (std::int64_t c = 0; c <= r && c < tv; ++c) causal_keep[r * tv + c] = 1.0f;
  }
  std::string keep, hidden_bias;
  if (mask) {
    const std::string as_bool =
        g.node("Cast", {mask->name}, p).attr("to", std::int64_t{onnx::TensorProto::BOOL}).output();
    const std::string binary =
        g.node("Cast", {as_bool}, p).attr("to", std::int64_t{onnx::TensorProto::FLOAT}).output();
    keep = g.node("Unsqueeze", {binary, g.int64s(p + "/head_axis", {1})}, p).output();
    if (!causal_keep.empty())
      keep = g.node("Mul", {keep, call.constant("causal_mask", {1, 1, tq, tv}, causal_keep)}, p)
                 .output();
    const std::string hidden = g.node("Sub", {keep, g.scalar(p + "/one", 1)}, p).output();
    hidden_bias = g.node("Mul", {hidden, g.scalar(p + "/large", 1e9f)}, p).output();
  } else if (!causal_keep.empty()) {
    std::vector<float> bias(causal_keep.size());
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = (causal_keep[i] - 1.0f) * 1e9f;
    keep = call.constant("causal_mask", {1, 1, tq, tv}, causal_keep);
    hidden_bias = call.constant("causal_bias", {1, 1, tq, tv}, bias);
  }
  const backend::HiddenRows hidden_rows =
      nn::hidden_attention_rows(call.keras2, call.config.value("dropout", 0.0));
  std::string logits = scores;
  if (!keep.empty()) {
    if (hidden_rows == backend::HiddenRows::uniform)
      logits = g.node("Mul", {logits, keep}, p).output();
    logits = g.node("Add", {logits, hidden_bias}, p).output();
  }
  std::string probs = g.node("Softmax", {logits}, p).attr("axis", std::int64_t{-1}).output();
  if (!keep.empty() && hidden_rows == backend::HiddenRows::zeros)
    probs = g.node("Mul", {probs, keep}, p).output();
  const Tensor& ok = call.weight("attention_output/kernel");
  const std::int64_t value_dim = ok.dim(1), out = ok.dim(2);
  const std::string context =
      ungrouped(g.node("MatMul", {grouped(probs, tv, "probs"), v}, p).output(), value_dim,
                "context");  // (b, H, Tq, Vd)
  std::string joined = g.node("Reshape", {transposed(g, context, {0, 2, 1, 3}, p),
                                          g.int64s(p + "/joined_shape", {-1, tq, heads * value_dim})},
                              p)
                           .output();
  std::string y = g.node("MatMul", {joined, call.constant("attention_output/kernel",
                                                       {heads * value_dim, out}, values_of(ok))},
                         p)
                      .output();
  if (call.has_weight("attention_output/bias"))
    y = g.node("Add", {y, call.constant("attention_output/bias", {out},
                                     values_of(call.weight("attention_output/bias")))},
               p)
            .output();
  return {y, call.output_shape, false};
}

}  // namespace

// Attention's and AdditiveAttention's scores (batch, Tq, Tv): MatMul(query, keyᵀ) times the
// scale (score_mode "dot"), or ReduceSum over the features of Tanh(Unsqueezed query + key), the
// sum scaled first (concat, use_scale) or the Tanh weighted by the per-feature scale
// (AdditiveAttention), then times concat_score_weight (concat).
std::string attention_scores(LayerCall& call, const OnnxValue& query, const OnnxValue& key) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const auto& layer = static_cast<nn::AttentionLayer&>(call.layer);
  const bool scaled = call.has_weight("scale");
  const auto scale = [&] {
    const Tensor& s = call.weight("scale");
    return call.constant("scale", {s.size()}, values_of(s));
  };
  if (layer.scores() == nn::AttentionScores::dot) {
    const std::string key_t = g.node("Transpose", {key.name}, p)
                                  .attr("perm", std::vector<std::int64_t>{0, 2, 1})
                                  .output();
    const std::string scores = g.node("MatMul", {query.name, key_t}, p).output();
    return scaled ? g.node("Mul", {scores, scale()}, p).output() : scores;
  }
  const std::string q = g.node("Unsqueeze", {query.name, g.int64s(p + "/query_axis", {2})}, p)
                            .output();  // (b, Tq, 1, dim)
  const std::string k = g.node("Unsqueeze", {key.name, g.int64s(p + "/key_axis", {1})}, p)
                            .output();  // (b, 1, Tv, dim)
  std::string sum = g.node("Add", {q, k}, p).output();
  const bool additive = layer.scores() == nn::AttentionScores::additive;
  if (scaled && !additive) sum = g.node("Mul", {sum, scale()}, p).output();
  std::string terms = g.node("Tanh", {sum}, p).output();
  if (scaled && additive) terms = g.node("Mul", {terms, scale()}, p).output();
  std::string scores = g.node("ReduceSum", {terms, g.int64s(p + "/feature_axis", {-1})}, p)
                           .attr("keepdims", std::int64_t{0})
                           .output();
  if (call.has_weight("concat_score_weight"))
    scores = g.node("Mul",
                    {scores, call.constant("concat_score_weight", {1},
                                           values_of(call.weight("concat_score_weight")))},
                    p)
                 .output();
  return scores;
}

// Attention and AdditiveAttention: their scores, the causal mask as -1e9 on the hidden scores
// (Keras' own way), Softmax over the keys, MatMul with the value.
OnnxValue export_attention(LayerCall& call) {
  if (call.input_masked)
    call.refuse(
        "its inputs carry Keras masks (Embedding's mask_zero, a Masking layer), which "
        "Tandem's ONNX export does not turn into the attention's mask");
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue query = g.in_layout(call.inputs[0], false);
  const OnnxValue value = g.in_layout(call.inputs[1], false);
  const OnnxValue key = call.inputs.size() > 2 ? g.in_layout(call.inputs[2], false) : value;
  const std::int64_t tq = query.shape[0], tv = value.shape[0];
  std::string scores = attention_scores(call, query, key);
  if (static_cast<nn::AttentionLayer&>(call.layer).causal()) {
    std::vector<float> bias(static_cast<std::size_t>(tq * tv), 0.0f);
    for (std::int64_t r = 0; r < tq; ++r)
      for (std::int64_t c = r + 1; c < tv; ++c) bias[static_cast<std::size_t>(r * tv + c)] = -1e9f;
    scores = g.node("Add", {scores, call.constant("causal_bias", {1, tq, tv}, bias)}, p).output();
  }
  const std::string probs = g.node("Softmax", {scores}, p).attr("axis", std::int64_t{-1}).output();
  return {g.node("MatMul", {probs, value.name}, p).output(), call.output_shape, false};
}

void add_merge_exporters(ExporterTable& table) {
  table["Add"] = [](LayerCall& call) { return fold(call, "Add"); };
  table["Subtract"] = [](LayerCall& call) { return fold(call, "Sub"); };
  table["Multiply"] = [](LayerCall& call) { return fold(call, "Mul"); };
  table["Maximum"] = [](LayerCall& call) { return fold(call, "Max"); };
  table["Minimum"] = [](LayerCall& call) { return fold(call, "Min"); };
  table["Average"] = export_average;
  table["Concatenate"] = export_concatenate;
  table["Dot"] = export_dot;
  table["MultiHeadAttention"] = export_multi_head_attention;
  table["GroupedQueryAttention"] = export_multi_head_attention;
  table["Attention"] = export_attention;
  table["AdditiveAttention"] = export_attention;
}

}  // namespace tandem::onnx_export
