// Exporters of the layers that act on the last axis or on no axis in particular: Dense,
// EinsumDense, the
// activation layers, shapes, the normalizations, the embeddings, the layers that are the
// identity at inference (dropout, noise, augmentation), and TimeDistributed (its layer's own
// exporter on the steps as rows).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "backend/kernel_math.hpp"
#include "backend/ops.hpp"
#include "nn/group_normalization.hpp"
#include "nn/indexing_layer.hpp"
#include "nn/integer_lookup.hpp"
#include "nn/permute.hpp"
#include "nn/reduction_layer.hpp"
#include "nn/spectral_normalization.hpp"
#include "nn/time_distributed.hpp"
#include "onnx/layer_export.hpp"

namespace tandem::onnx_export {

namespace {

const nlohmann::json& key(const LayerCall& call, const char* name) {
  static const nlohmann::json null;
  const auto it = call.config.find(name);
  return it == call.config.end() ? null : *it;
}

// Keras' `axis` of a normalization must be the last one: -1, or its index counting the batch.
void require_last_axis(const LayerCall& call) {
  const nlohmann::json& a = key(call, "axis");
  const auto last = static_cast<std::int64_t>(call.inputs[0].shape.size());
  const auto is_last = [&](const nlohmann::json& v) {
    return v.is_number_integer() && (v.get<std::int64_t>() == -1 || v.get<std::int64_t>() == last);
  };
  if (a.is_null() || is_last(a) || (a.is_array() && a.size() == 1 && is_last(a[0]))) return;
  call.refuse("only the last axis is exported, got axis " + a.dump());
}

OnnxValue identity(LayerCall& call) { return call.inputs[0]; }

OnnxValue export_dense(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const Tensor& kernel = call.weight("kernel");
  const std::int64_t in = kernel.dim(0), units = kernel.dim(1);
  const bool bias = call.has_weight("bias");
  OnnxValue y{"", call.output_shape, false};
  if (x.shape.size() == 1) {
    // Gemm with the kernel stored (units, in) and transB: what every runtime maps to its
    // fully-connected layer.
    std::vector<float> transposed(static_cast<std::size_t>(in * units));
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t u = 0; u < units; ++u) transposed[u * in + i] = kernel[i * units + u];
    std::vector<std::string> inputs{x.name, call.constant("kernel", {units, in},
                                                       transposed)};
    if (bias) inputs.push_back(call.constant("bias", {units},
                                          values_of(call.weight("bias"))));
    y.name = g.node("Gemm", inputs, call.prefix).attr("transB", std::int64_t{1}).output();
  } else {
    y.name = g.node("MatMul",
                    {x.name, call.constant("kernel", {in, units}, values_of(kernel))},
                    call.prefix)
                 .output();
    if (bias)
      y.name = g.node("Add",
                      {y.name, call.constant("bias", {units},
                                          values_of(call.weight("bias")))},
                      call.prefix)
                   .output();
  }
  const nlohmann::json& act = key(call, "activation");
  if (!act.is_string()) return y;
  return apply_activation(g, y, call.activation(act), call.prefix);
}

// ONNX's Einsum of Keras' equation, its letters renamed to lower case in order of appearance
// (ONNX takes lower-case letters only), then the bias in Keras' broadcastable shape.
OnnxValue export_einsum_dense(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  std::string equation, letters;
  for (char c : key(call, "equation").get<std::string>()) {
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      equation += c;
      continue;
    }
    std::size_t at = letters.find(c);
    if (at == std::string::npos) {
      if (letters.size() == 26) call.refuse("its equation names more than 26 axes");
      at = letters.size();
      letters += c;
    }
    equation += static_cast<char>('a' + at);
  }
  const Tensor& kernel = call.weight("kernel");
  OnnxValue y{"", call.output_shape, false};
  y.name = g.node("Einsum", {x.name, call.constant("kernel", kernel.shape(), values_of(kernel))},
                  call.prefix)
               .attr("equation", equation)
               .output();
  if (call.has_weight("bias")) {
    const Tensor& bias = call.weight("bias");
    y.name =
        g.node("Add", {y.name, call.constant("bias", bias.shape(), values_of(bias))}, call.prefix)
            .output();
  }
  const nlohmann::json& act = key(call, "activation");
  if (!act.is_string()) return y;
  return apply_activation(g, y, call.activation(act), call.prefix);
}

OnnxValue export_activation(LayerCall& call) {
  // Keras' Softmax over another axis than the last: ONNX's Softmax over that axis.
  const nlohmann::json& softmax_axis = key(call, "axis");
  if (call.layer.class_name() == "Softmax" && !softmax_axis.is_null()) {
    const nlohmann::json& v = softmax_axis.is_array() ? softmax_axis[0] : softmax_axis;
    const auto rank = static_cast<std::int64_t>(call.inputs[0].shape.size());
    const std::int64_t axis =
        v.get<std::int64_t>() < 0 ? v.get<std::int64_t>() + rank + 1 : v.get<std::int64_t>();
    if (axis != rank) {
      const OnnxValue x = call.graph.in_layout(call.inputs[0], false);
      return call.graph.like(
          x, call.graph.node("Softmax", {x.name}, call.prefix).attr("axis", axis).output());
    }
  }
  const nlohmann::json& act = key(call, "activation");
  const nn::ActivationKind kind =
      call.layer.class_name() == "Softmax"
          ? nn::ActivationKind::softmax
          : call.activation(act.is_string() ? act.get<std::string>() : "linear");
  return apply_activation(call.graph, call.inputs[0], kind, call.prefix);
}

// Keras' ReLU (max_value, negative_slope, threshold), LeakyReLU and ELU layers, as
// kernel_math's shaped_activation_value computes them.
OnnxValue export_shaped_activation(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue& x = call.inputs[0];
  const std::string& cls = call.layer.class_name();
  const auto number = [&](const char* k, float fallback) {
    const nlohmann::json& v = key(call, k);
    return v.is_number() ? v.get<float>() : fallback;
  };
  if (cls == "ELU")
    return g.like(x, g.node("Elu", {x.name}, call.prefix).attr("alpha", number("alpha", 1)).output());
  const float slope = number("negative_slope", 0);
  if (cls == "LeakyReLU")
    return g.like(x, g.node("LeakyRelu", {x.name}, call.prefix).attr("alpha", slope).output());
  const float threshold = number("threshold", 0);
  const nlohmann::json& max_value = key(call, "max_value");
  if (threshold == 0 && max_value.is_null())
    return g.like(x, slope == 0 ? g.node("Relu", {x.name}, call.prefix).output()
                                : g.node("LeakyRelu", {x.name}, call.prefix)
                                      .attr("alpha", slope)
                                      .output());
  // positive = x > threshold ? x : 0 (max(x, 0) for threshold 0), clamped to [0, max_value]
  std::string positive;
  if (threshold == 0) {
    positive = g.node("Relu", {x.name}, call.prefix).output();
  } else {
    const std::string above =
        g.node("Greater", {x.name, g.scalar(call.prefix + "/threshold", threshold)}, call.prefix)
            .output();
    const std::string mask =
        g.node("Cast", {above}, call.prefix).attr("to", std::int64_t{onnx::TensorProto::FLOAT})
            .output();
    positive = g.node("Mul", {x.name, mask}, call.prefix).output();
  }
  if (!max_value.is_null())
    positive = g.node("Clip",
                      {positive, g.scalar(call.prefix + "/min", 0),
                       g.scalar(call.prefix + "/max", max_value.get<float>())},
                      call.prefix)
                   .output();
  if (slope == 0) return g.like(x, positive);
  // - slope * max(threshold - x, 0)
  const std::string below =
      g.node("Relu",
             {g.node("Sub", {g.scalar(call.prefix + "/threshold", threshold), x.name}, call.prefix)
                  .output()},
             call.prefix)
          .output();
  const std::string leak =
      g.node("Mul", {below, g.scalar(call.prefix + "/negative_slope", slope)}, call.prefix)
          .output();
  return g.like(x, g.node("Sub", {positive, leak}, call.prefix).output());
}

// PReLU: alpha has the input's per-sample shape with size 1 on the shared axes.
OnnxValue export_prelu(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const Tensor& alpha = call.weight("alpha");
  return g.like(x, g.node("PRelu", {x.name, call.constant("alpha", alpha.shape(),
                                                       values_of(alpha))},
                          call.prefix)
                       .output());
}

// UnitNormalization: l2_normalized over Keras' axes, floor 1e-12, channels last.
OnnxValue export_unit_normalization(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const auto rank = static_cast<std::int64_t>(x.shape.size()) + 1;  // with the batch axis
  const nlohmann::json& axis = call.config.at("axis");
  std::vector<std::int64_t> axes;
  for (const nlohmann::json& a : axis.is_array() ? axis : nlohmann::json::array({axis})) {
    const auto at = a.get<std::int64_t>();
    axes.push_back(at < 0 ? at + rank : at);
  }
  return g.like(x, l2_normalized(g, x.name, axes, 1e-12f, p));
}

OnnxValue export_flatten(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);  // Keras flattens channels last
  return {g.node("Flatten", {x.name}, call.prefix).attr("axis", std::int64_t{1}).output(),
          call.output_shape, false};
}

OnnxValue export_reshape(LayerCall& call) {
  return reshape_to(call.graph, call.inputs[0], call.output_shape, call.prefix);
}

// y = x * scale + offset per channel, as a Mul and an Add (skipped when they are 1 and 0).
OnnxValue affine(LayerCall& call, const std::vector<float>& scale,
                 const std::vector<float>& shift) {
  OnnxGraph& g = call.graph;
  OnnxValue y = call.inputs[0];
  // Images: per-channel constants broadcast channels first, (C, 1, 1), as runtimes expect
  // (OpenCV cannot broadcast over the last axis of a 4-D blob).
  if (y.shape.size() == 3 && (scale.size() > 1 || shift.size() > 1)) y = g.in_layout(y, true);
  const auto all = [](const std::vector<float>& v, float c) {
    for (float f : v)
      if (f != c) return false;
    return true;
  };
  if (!all(scale, 1))
    y = g.like(y, g.node("Mul", {y.name, channel_constant(g, y, call.prefix + "/scale", scale)},
                         call.prefix)
                      .output());
  if (!all(shift, 0))
    y = g.like(y, g.node("Add", {y.name, channel_constant(g, y, call.prefix + "/offset", shift)},
                         call.prefix)
                      .output());
  return y;
}

OnnxValue export_rescaling(LayerCall& call) {
  const auto one = [&](const char* k, float fallback) {
    const nlohmann::json& v = key(call, k);
    if (v.is_number()) return std::vector<float>{v.get<float>()};
    if (v.is_null()) return std::vector<float>{fallback};
    return v.get<std::vector<float>>();
  };
  return affine(call, one("scale", 1), one("offset", 0));
}

// Normalization: (x - mean) / max(sqrt(variance), 1e-7), or its inverse, per feature of the last
// axis; the statistics are the config's (a number or one per feature) or, for an adapted layer
// (null in the config), its weights. The factors are the layer's own (kernel_math.hpp).
OnnxValue export_normalization(LayerCall& call) {
  const auto stats = [&](const char* k) {
    const nlohmann::json& v = key(call, k);
    return v.is_null()     ? values_of(call.weight(k))
           : v.is_number() ? std::vector<float>{v.get<float>()}
                           : v.get<std::vector<float>>();
  };
  std::vector<float> mean = stats("mean"), variance = stats("variance");
  // One number for every feature, the other one per feature: both per feature.
  const std::size_t features = std::max(mean.size(), variance.size());
  for (std::vector<float>* v : {&mean, &variance})
    if (v->size() == 1) v->assign(features, float{(*v)[0]});
  const bool invert = key(call, "invert").is_boolean() && key(call, "invert").get<bool>();
  std::vector<float> scale(mean.size()), shift(mean.size());
  for (std::size_t c = 0; c < mean.size(); ++c)
    backend::math::normalization_factors(mean[c], variance[c], invert, scale[c], shift[c]);
  return affine(call, scale, shift);
}

// BatchNormalization with its moving statistics: ONNX's BatchNormalization, channels first.
OnnxValue export_batch_normalization(LayerCall& call) {
  require_last_axis(call);
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], true);
  const std::int64_t channels = x.shape.back();
  const auto weight_or = [&](const char* name, float fallback) {
    return call.has_weight(name) ? values_of(call.weight(name))
                                 : std::vector<float>(static_cast<std::size_t>(channels), fallback);
  };
  const auto c = [&](const char* name, float fallback) {
    return call.constant(name, {channels}, weight_or(name, fallback));
  };
  const nlohmann::json& eps = key(call, "epsilon");
  return g.like(x, g.node("BatchNormalization",
                          {x.name, c("gamma", 1), c("beta", 0), c("moving_mean", 0),
                           c("moving_variance", 1)},
                          call.prefix)
                       .attr("epsilon", eps.is_number() ? eps.get<float>() : 1e-3f)
                       .output());
}

// LayerNormalization over the last axis: (x - mean) / sqrt(var + epsilon) * gamma + beta,
// written with ReduceMean (ONNX's own LayerNormalization needs opset 17).
// `x` normalised over its last stored axis in the form `desc` names: (x - mean) / sqrt(var +
// epsilon), or, not centred, x / sqrt(var + epsilon) (Keras' rms_scaling) or x / sqrt(mean(x²)
// + epsilon) (RMSNormalization). The epsilon is the call's, `fallback` without one.
std::string normalized_over_last_axis(LayerCall& call, const std::string& x,
                                      const backend::LayerNormDesc& desc, float fallback) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const auto mean_of = [&](const std::string& v) {
    return g.node("ReduceMean", {v}, p).attr("axes", std::vector<std::int64_t>{-1})
        .attr("keepdims", std::int64_t{1}).output();
  };
  const std::string centered =
      desc.centred_variance ? g.node("Sub", {x, mean_of(x)}, p).output() : x;
  const std::string variance =
      mean_of(g.node("Mul", {centered, centered}, p).output());
  const nlohmann::json& eps = key(call, "epsilon");
  const std::string deviation =
      g.node("Sqrt",
             {g.node("Add",
                     {variance,
                      g.scalar(p + "/epsilon", eps.is_number() ? eps.get<float>() : fallback)},
                     p)
                  .output()},
             p)
          .output();
  return g.node("Div", {desc.centred_output ? centered : x, deviation}, p).output();
}

// gamma and beta per channel (the last axis), where the layer has them.
std::string channel_affine(LayerCall& call, std::string y, std::int64_t features) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  if (call.has_weight("gamma"))
    y = g.node("Mul", {y, call.constant("gamma", {features}, values_of(call.weight("gamma")))}, p)
            .output();
  if (call.has_weight("beta"))
    y = g.node("Add", {y, call.constant("beta", {features}, values_of(call.weight("beta")))}, p)
            .output();
  return y;
}

OnnxValue export_layer_normalization(LayerCall& call) {
  require_last_axis(call);
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const bool rms_scaling = call.config.value("rms_scaling", false);
  const backend::LayerNormDesc desc{0, 1e-3, true, !rms_scaling};
  return g.like(x, channel_affine(call, normalized_over_last_axis(call, x.name, desc, 1e-3f),
                                  x.shape.back()));
}

// RMSNormalization: x / Sqrt(ReduceMean(x · x) + epsilon) · scale.
OnnxValue export_rms_normalization(LayerCall& call) {
  require_last_axis(call);
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const backend::LayerNormDesc desc{0, 1e-6, false, false};
  const std::string y = normalized_over_last_axis(call, x.name, desc, 1e-6f);
  const Tensor& scale = call.weight("scale");
  return g.like(
      x, g.node("Mul", {y, call.constant("scale", {scale.size()}, values_of(scale))}, call.prefix)
             .output());
}

// GroupNormalization: the sample as (positions, groups, group channels), each group's values
// one row ((groups, positions · group channels), by a Transpose), normalised, and back; then
// gamma and beta per channel.
OnnxValue export_group_normalization(LayerCall& call) {
  OnnxGraph& g = call.graph;
  auto& layer = static_cast<nn::GroupNormalization&>(call.layer);
  const std::int64_t n = layer.positions(), groups = layer.groups(), k = layer.group_channels();
  const std::string& p = call.prefix;
  const OnnxValue split = reshape_to(g, call.inputs[0], {n, groups, k}, p + "/split");
  const std::vector<std::int64_t> swap{0, 2, 1, 3};
  const std::string grouped = g.node("Transpose", {split.name}, p).attr("perm", swap).output();
  const OnnxValue rows =
      reshape_to(g, {grouped, {groups, n, k}, false}, {groups, n * k}, p + "/rows");
  const OnnxValue normalized{
      normalized_over_last_axis(call, rows.name, {}, 1e-3f), {groups, n * k}, false};
  const OnnxValue back = reshape_to(g, normalized, {groups, n, k}, p + "/groups");
  const std::string ungrouped = g.node("Transpose", {back.name}, p).attr("perm", swap).output();
  const OnnxValue y =
      reshape_to(g, {ungrouped, {n, groups, k}, false}, call.output_shape, p + "/out");
  return {channel_affine(call, y.name, groups * k), call.output_shape, false};
}

// Embedding: the indices (float, as Tandem's data) cast to int64 and gathered from the table.
OnnxValue export_embedding(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const Tensor& table = call.weight("embeddings");
  const std::string indices =
      g.node("Cast", {x.name}, call.prefix).attr("to", std::int64_t{onnx::TensorProto::INT64})
          .output();
  return {g.node("Gather",
                 {call.constant("embeddings", table.shape(), values_of(table)),
                  indices},
                 call.prefix)
              .attr("axis", std::int64_t{0})
              .output(),
          call.output_shape, false};
}

// Masking's output: x times whether any feature of its step differs from mask_value (Not of
// Equal, the maximum over the last axis); the mask itself, which the layers after it read, is
// refused by their exporters (LayerCall::input_masked).
OnnxValue export_masking(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const nlohmann::json& value = key(call, "mask_value");
  const std::string same =
      g.node("Equal",
             {x.name, g.scalar(p + "/mask_value", value.is_number() ? value.get<float>() : 0.0f)},
             p)
          .output();
  const std::string differs = g.node("Cast", {g.node("Not", {same}, p).output()}, p)
                                  .attr("to", std::int64_t{onnx::TensorProto::FLOAT})
                                  .output();
  const std::string kept = g.node("ReduceMax", {differs}, p)
                               .attr("axes", std::vector<std::int64_t>{-1})
                               .attr("keepdims", std::int64_t{1})
                               .output();
  return g.like(x, g.node("Mul", {x.name, kept}, p).output());
}

// PositionEmbedding (keras_nlp): the table's first sequence_length rows, for every sample.
OnnxValue export_position_embedding(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const Tensor& table = call.weight("embeddings");
  const std::int64_t steps = x.shape[0], width = x.shape[1];
  const std::vector<float> rows(table.data(), table.data() + steps * width);
  const std::string shape = g.node("Shape", {x.name}, call.prefix).output();
  return g.like(x, g.node("Expand", {call.constant("embeddings", {steps, width}, rows),
                                     shape},
                          call.prefix)
                       .output());
}

// Category indices (float values) of a call whose input has the per-sample shape `input`,
// encoded as CategoryEncoding encodes them into `depth` values (Keras' output_mode `mode`):
// Equal against 0 .. depth - 1 on a new last axis, then, but for one_hot, its max (multi_hot)
// or sum (count) over the sample's first axis. A category outside [0, depth) (which Tandem
// refuses) encodes as zeros here: ONNX has no error to raise.
OnnxValue encode_categories(LayerCall& call, const std::string& indices, const Shape& input,
                            const std::string& mode, std::int64_t depth) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  std::vector<float> categories;
  for (std::int64_t d = 0; d < depth; ++d) categories.push_back(static_cast<float>(d));
  const std::string column =
      g.node("Unsqueeze", {indices, g.int64s(p + "/last", {-1})}, p).output();
  const std::string equal =
      g.node("Equal", {column, call.constant("categories", {depth}, categories)}, p).output();
  std::string hot =
      g.node("Cast", {equal}, p).attr("to", std::int64_t{onnx::TensorProto::FLOAT}).output();
  if (mode == "one_hot" || input.empty()) {
    std::vector<std::int64_t> shape{-1};
    shape.insert(shape.end(), call.output_shape.begin(), call.output_shape.end());
    hot = g.node("Reshape", {hot, g.int64s(p + "/shape", shape)}, p).output();
  } else if (mode == "count") {
    hot = g.node("ReduceSum", {hot, g.int64s(p + "/axes", {1})}, p)
              .attr("keepdims", std::int64_t{0})
              .output();
  } else {
    hot = g.node("ReduceMax", {hot}, p)
              .attr("axes", std::vector<std::int64_t>{1})
              .attr("keepdims", std::int64_t{0})
              .output();
  }
  return {hot, call.output_shape, false};
}

// Discretization: the bin of each value is how many boundaries are at most it, the sum of a
// GreaterOrEqual against the boundaries on a new last axis (NaN: bin 0, as Tandem's).
OnnxValue export_discretization(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  std::vector<float> boundaries;
  for (const auto& b : key(call, "bin_boundaries")) boundaries.push_back(b.get<float>());
  std::string bins;
  if (boundaries.empty()) {  // one bin: zeros (x < -inf is never true)
    bins = g.node("Less", {x.name, g.scalar(p + "/below_all", -INFINITY)}, p).output();
  } else {
    const std::string column =
        g.node("Unsqueeze", {x.name, g.int64s(p + "/value_axis", {-1})}, p).output();
    const std::string at_least =
        g.node("GreaterOrEqual",
               {column, call.constant("bin_boundaries",
                                      {static_cast<std::int64_t>(boundaries.size())}, boundaries)},
               p)
            .output();
    bins =
        g.node("Cast", {at_least}, p).attr("to", std::int64_t{onnx::TensorProto::FLOAT}).output();
    bins = g.node("ReduceSum", {bins, g.int64s(p + "/bin_axis", {-1})}, p)
               .attr("keepdims", std::int64_t{0})
               .output();
  }
  if (boundaries.empty())
    bins = g.node("Cast", {bins}, p).attr("to", std::int64_t{onnx::TensorProto::FLOAT}).output();
  const nlohmann::json& mode = key(call, "output_mode");
  if (!mode.is_string() || mode == "int") return g.like(x, bins);
  return encode_categories(call, bins, x.shape, mode.get<std::string>(),
                           static_cast<std::int64_t>(boundaries.size()) + 1);
}

// IntegerLookup: each value truncated toward zero (Cast to int64, as Keras casts), compared
// with the table's keys on a new last axis; the matching key's value (a sum of one), or, where
// none matches, the OOV index — several: Mod of the int64 key (fmod 0: Python's floormod) —,
// oov_token (inverted) or -1 (num_oov_indices 0, which Tandem refuses: ONNX has no error to
// raise). The encoded modes then encode those indices as CategoryEncoding's export does (a
// masked value's index, the depth, encodes as zeros), tf_idf times its weights.
OnnxValue export_integer_lookup(LayerCall& call) {
  OnnxGraph& g = call.graph;
  const std::string& p = call.prefix;
  const auto& layer = dynamic_cast<const nn::IntegerLookup&>(call.layer);
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const auto to = [&](const std::string& v, int type) {
    return g.node("Cast", {v}, p).attr("to", std::int64_t{type}).output();
  };
  const std::string keys = to(x.name, onnx::TensorProto::INT64);
  const std::string column =
      g.node("Unsqueeze", {to(keys, onnx::TensorProto::FLOAT), g.int64s(p + "/key_axis", {-1})}, p)
          .output();
  const auto rows = static_cast<std::int64_t>(layer.table_keys().size());
  const std::string hot =
      to(g.node("Equal", {column, call.constant("table_keys", {rows}, layer.table_keys())}, p)
             .output(),
         onnx::TensorProto::FLOAT);
  const auto sum_last = [&](const std::string& v, const std::string& tag) {
    return g.node("ReduceSum", {v, g.int64s(p + "/" + tag, {-1})}, p)
        .attr("keepdims", std::int64_t{0})
        .output();
  };
  const std::string found_value = sum_last(
      g.node("Mul", {hot, call.constant("table_values", {rows}, layer.table_values())}, p).output(),
      "value_axis");
  const std::string not_found =
      g.node("Sub", {g.scalar(p + "/one", 1.0f), sum_last(hot, "found_axis")}, p).output();
  const backend::math::LookupDesc& d = layer.lookup_desc();
  std::string missing = g.scalar(p + "/missing", d.missing);
  if (d.buckets > 0) {
    const std::string bucket = g.node("Mod", {keys, g.int64s(p + "/buckets", {d.buckets})}, p)
                                   .attr("fmod", std::int64_t{0})
                                   .output();
    missing = g.node("Add",
                     {to(bucket, onnx::TensorProto::FLOAT),
                      g.scalar(p + "/bucket_start", d.bucket_start)},
                     p)
                  .output();
  }
  const std::string looked_up =
      g.node("Add", {found_value, g.node("Mul", {not_found, missing}, p).output()}, p).output();
  const std::optional<nn::CategoryMode> mode = layer.encoded_mode();
  if (!mode) return g.like(x, looked_up);
  OnnxValue encoded =
      encode_categories(call, looked_up, x.shape, nn::category_mode_name(*mode), layer.depth());
  if (layer.idf_weights().empty()) return encoded;
  encoded.name =
      g.node("Mul",
             {encoded.name, call.constant("idf_weights", {layer.depth()}, layer.idf_weights())}, p)
          .output();
  return encoded;
}

OnnxValue export_category_encoding(LayerCall& call) {
  const OnnxValue x = call.graph.in_layout(call.inputs[0], false);
  return encode_categories(call, x.name, x.shape, key(call, "output_mode").get<std::string>(),
                           key(call, "num_tokens").get<std::int64_t>());
}

}  // namespace

std::string channel_constant(OnnxGraph& graph, const OnnxValue& like, const std::string& prefix,
                             const std::vector<float>& per_channel) {
  if (per_channel.size() == 1) return graph.scalar(prefix, per_channel[0]);
  std::vector<std::int64_t> dims{static_cast<std::int64_t>(per_channel.size())};
  if (like.channels_first) dims.resize(like.shape.size(), 1);
  return graph.constant(prefix, dims, per_channel);
}

std::string l2_normalized(OnnxGraph& g, const std::string& x, const std::vector<std::int64_t>& axes,
                          float square_floor, const std::string& p) {
  const std::string squares = g.node("Mul", {x, x}, p).output();
  const std::string sum = g.node("ReduceSum", {squares, g.int64s(p + "/axes", axes)}, p)
                              .attr("keepdims", std::int64_t{1})
                              .output();
  const std::string floored =
      g.node("Max", {sum, g.scalar(p + "/floor", square_floor)}, p).output();
  const std::string norm = g.node("Sqrt", {floored}, p).output();
  return g.node("Div", {x, norm}, p).output();
}

OnnxValue reshape_to(OnnxGraph& graph, const OnnxValue& x, const Shape& shape,
                     const std::string& prefix) {
  const OnnxValue in = graph.in_layout(x, false);
  std::vector<std::int64_t> dims{-1};
  dims.insert(dims.end(), shape.begin(), shape.end());
  return {graph.node("Reshape", {in.name, graph.int64s(prefix + "/shape", dims)}, prefix).output(),
          shape, false};
}

OnnxValue apply_activation(OnnxGraph& graph, const OnnxValue& x, nn::ActivationKind kind,
                           const std::string& prefix) {
  using K = nn::ActivationKind;
  const auto unary = [&](const char* op, const OnnxValue& v) {
    return graph.node(op, {v.name}, prefix).output();
  };
  const auto times_x = [&](const std::string& f) {
    return graph.like(x, graph.node("Mul", {x.name, f}, prefix).output());
  };
  const auto hard_sigmoid = [&] {  // relu6(x + 3) / 6
    return graph.node("HardSigmoid", {x.name}, prefix)
        .attr("alpha", 1.0f / 6.0f)
        .attr("beta", 0.5f)
        .output();
  };
  switch (kind) {
    case K::linear:
      return x;
    case K::relu:
      return graph.like(x, unary("Relu", x));
    case K::tanh:
      return graph.like(x, unary("Tanh", x));
    case K::sigmoid:
      return graph.like(x, unary("Sigmoid", x));
    case K::softmax:
    case K::log_softmax: {
      const OnnxValue last = graph.in_layout(x, false);
      return graph.like(last, graph.node(kind == K::softmax ? "Softmax" : "LogSoftmax",
                                         {last.name}, prefix)
                                  .attr("axis", std::int64_t{-1})
                                  .output());
    }
    case K::gelu: {  // x/2 (1 + erf(x/sqrt 2))
      const std::string scaled =
          graph.node("Mul", {x.name, graph.scalar(prefix + "/inv_sqrt2", 0.70710678118654752f)},
                     prefix)
              .output();
      const std::string one_plus =
          graph.node("Add", {graph.node("Erf", {scaled}, prefix).output(),
                             graph.scalar(prefix + "/one", 1)},
                     prefix)
              .output();
      return times_x(
          graph.node("Mul", {one_plus, graph.scalar(prefix + "/half", 0.5f)}, prefix).output());
    }
    case K::elu:
      return graph.like(x, graph.node("Elu", {x.name}, prefix).attr("alpha", 1.0f).output());
    case K::selu:
      return graph.like(x, unary("Selu", x));  // ONNX's defaults are Keras' constants
    case K::softplus:
      return graph.like(x, unary("Softplus", x));
    case K::softsign:
      return graph.like(x, unary("Softsign", x));
    case K::swish:
      return times_x(unary("Sigmoid", x));
    case K::exponential:
      return graph.like(x, unary("Exp", x));
    case K::leaky_relu:
      return graph.like(x, graph.node("LeakyRelu", {x.name}, prefix).attr("alpha", 0.2f).output());
    case K::hard_sigmoid:
      return graph.like(x, hard_sigmoid());
    case K::hard_sigmoid_keras2:  // clip(0.2 x + 0.5, 0, 1): ONNX's defaults
      return graph.like(x, graph.node("HardSigmoid", {x.name}, prefix)
                               .attr("alpha", 0.2f)
                               .attr("beta", 0.5f)
                               .output());
    case K::hard_swish:  // HardSwish needs opset 14
      return times_x(hard_sigmoid());
    case K::mish:
      return times_x(graph.node("Tanh", {unary("Softplus", x)}, prefix).output());
  }
  return x;
}

// Permute: a Transpose of the per-sample axes (the batch stays first).
OnnxValue export_permute(LayerCall& call) {
  const OnnxValue x = call.graph.in_layout(call.inputs[0], false);
  std::vector<std::int64_t> perm{0};
  for (int d : static_cast<nn::Permute&>(call.layer).dims()) perm.push_back(d);
  return {call.graph.node("Transpose", {x.name}, call.prefix).attr("perm", perm).output(),
          call.output_shape, false};
}

// TandemIndexing (x[...], expand_dims, squeeze): a Slice of the axes it takes part of (a
// backwards slice's end past the first position as INT64_MIN: ONNX reads -1 as the last), then a
// Reshape that drops the axes an integer picked and adds the new ones.
OnnxValue export_indexing(LayerCall& call) {
  const auto& layer = static_cast<nn::Indexing&>(call.layer);
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  std::vector<std::int64_t> starts, ends, axes, steps;
  Shape sliced = layer.input_shape();
  for (std::size_t a = 0; a < layer.picks().size(); ++a) {
    const nn::Indexing::AxisPick& p = layer.picks()[a];
    if (p.start == 0 && p.step == 1 && p.count == sliced[a]) continue;
    const std::int64_t end = p.start + p.count * p.step;
    starts.push_back(p.start);
    ends.push_back(end < 0 ? std::numeric_limits<std::int64_t>::min() : end);
    axes.push_back(static_cast<std::int64_t>(a) + 1);
    steps.push_back(p.step);
    sliced[a] = p.count;
  }
  OnnxValue picked = x;
  if (!axes.empty()) {
    const std::string& p = call.prefix;
    picked = {g.node("Slice",
                     {x.name, g.int64s(p + "/starts", starts), g.int64s(p + "/ends", ends),
                      g.int64s(p + "/axes", axes), g.int64s(p + "/steps", steps)},
                     p)
                  .output(),
              sliced, false};
  }
  return reshape_to(g, picked, call.output_shape, call.prefix);
}

// TandemReduction (reduce_sum / mean / max / min): ONNX's reduction over the same axes (the
// batch counted as 0, as Keras counts them), its dims kept, then a Reshape to the output.
OnnxValue export_reduction(LayerCall& call) {
  const auto& layer = static_cast<nn::Reduction&>(call.layer);
  OnnxGraph& g = call.graph;
  const OnnxValue x = g.in_layout(call.inputs[0], false);
  const std::string& p = call.prefix;
  std::string reduced;
  if (layer.kind() == nn::Reduction::Kind::sum) {
    reduced = g.node("ReduceSum", {x.name, g.int64s(p + "/axes", layer.axes())}, p)
                  .attr("keepdims", std::int64_t{1})
                  .output();
  } else {
    const char* op = layer.kind() == nn::Reduction::Kind::mean  ? "ReduceMean"
                     : layer.kind() == nn::Reduction::Kind::max ? "ReduceMax"
                                                                : "ReduceMin";
    reduced = g.node(op, {x.name}, p)
                  .attr("axes", layer.axes())
                  .attr("keepdims", std::int64_t{1})
                  .output();
  }
  Shape kept = x.shape;
  for (std::int64_t a : layer.axes()) kept[static_cast<std::size_t>(a - 1)] = 1;
  return reshape_to(g, {reduced, kept, false}, call.output_shape, p);
}

// TimeDistributed: the steps reshaped into the batch, the wrapped layer's own nodes on them, and
// the rows reshaped back into steps.
OnnxValue export_time_distributed(LayerCall& call) {
  auto& wrapper = static_cast<nn::TimeDistributed&>(call.layer);
  return export_on_view(call, wrapper.inner(), wrapper.step_input_shape(),
                        wrapper.step_output_shape(), wrapper.inner().name());
}

// SpectralNormalization: its layer's own nodes on the weight as it stands (the division is
// training's).
OnnxValue export_spectral_normalization(LayerCall& call) {
  auto& wrapper = static_cast<nn::SpectralNormalization&>(call.layer);
  return export_on_view(call, wrapper.inner(), wrapper.input_shape(), wrapper.output_shape(),
                        wrapper.inner().name());
}

void add_core_exporters(ExporterTable& table) {
  table["Dense"] = export_dense;
  table["EinsumDense"] = export_einsum_dense;
  table["Activation"] = export_activation;
  table["Softmax"] = export_activation;
  table["ReLU"] = export_shaped_activation;
  table["LeakyReLU"] = export_shaped_activation;
  table["ELU"] = export_shaped_activation;
  table["PReLU"] = export_prelu;
  table["Flatten"] = export_flatten;
  table["UnitNormalization"] = export_unit_normalization;
  for (const char* cls : {"Identity", "ActivityRegularization"})  // a penalty is training's
    table[cls] = [](LayerCall& call) { return call.inputs[0]; };
  table["Reshape"] = export_reshape;
  table["Rescaling"] = export_rescaling;
  table["Normalization"] = export_normalization;
  table["BatchNormalization"] = export_batch_normalization;
  table["LayerNormalization"] = export_layer_normalization;
  table["RMSNormalization"] = export_rms_normalization;
  table["GroupNormalization"] = export_group_normalization;
  table["Embedding"] = export_embedding;
  table["Masking"] = export_masking;
  table["Discretization"] = export_discretization;
  table["CategoryEncoding"] = export_category_encoding;
  table["IntegerLookup"] = export_integer_lookup;
  table["PositionEmbedding"] = export_position_embedding;
  table["TimeDistributed"] = export_time_distributed;
  table["SpectralNormalization"] = export_spectral_normalization;
  table["Permute"] = export_permute;
  table["TandemIndexing"] = export_indexing;
  table["TandemReduction"] = export_reduction;
  for (const char* inference_identity :
       {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
        "GaussianDropout", "AlphaDropout", "RandomFlip", "RandomTranslation", "RandomRotation", "RandomZoom",
        "RandomContrast", "RandomBrightness"})
    table[inference_identity] = identity;
}

}  // namespace tandem::onnx_export
