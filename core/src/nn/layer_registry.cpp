#include "nn/layer_registry.hpp"

#include <cctype>
#include <cmath>

#include "nn/activation.hpp"
#include "nn/adaptive_pooling.hpp"
#include "nn/attention_layer.hpp"
#include "nn/batch_normalization.hpp"
#include "nn/bidirectional.hpp"
#include "nn/category_encoding.hpp"
#include "nn/constraint.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv2d_transpose.hpp"
#include "nn/conv_lstm.hpp"
#include "nn/dense.hpp"
#include "nn/discretization.hpp"
#include "nn/dot.hpp"
#include "nn/dropout.hpp"
#include "nn/einsum_dense.hpp"
#include "nn/elementwise_merge.hpp"
#include "nn/embedding.hpp"
#include "nn/flatten.hpp"
#include "nn/functional_config.hpp"
#include "nn/gaussian_noise.hpp"
#include "nn/global_average_pooling.hpp"
#include "nn/group_normalization.hpp"
#include "nn/image_layers.hpp"
#include "nn/indexing_layer.hpp"
#include "nn/integer_lookup.hpp"
#include "nn/layer_normalization.hpp"
#include "nn/masking_layer.hpp"
#include "nn/merge.hpp"
#include "nn/multi_head_attention.hpp"
#include "nn/normalization.hpp"
#include "nn/permute.hpp"
#include "nn/pooling.hpp"
#include "nn/position_embedding.hpp"
#include "nn/prelu.hpp"
#include "nn/random_color.hpp"
#include "nn/random_flip.hpp"
#include "nn/random_warp.hpp"
#include "nn/recurrent.hpp"
#include "nn/reduction_layer.hpp"
#include "nn/rescaling.hpp"
#include "nn/reshape.hpp"
#include "nn/reshaped_2d.hpp"
#include "nn/resizing.hpp"
#include "nn/separable_conv2d.hpp"
#include "nn/shaped_activation.hpp"
#include "nn/spectral_normalization.hpp"
#include "nn/stacked_rnn.hpp"
#include "nn/time_distributed.hpp"
#include "nn/unit_normalization.hpp"
#include "nn/volume_cells.hpp"
#include "tandem/error.hpp"
#include "util/warn_once.hpp"

namespace tandem::nn {

namespace {

ActivationKind read_activation(ConfigObject& c, const std::string& key) {
  const nlohmann::json* v = c.find(key);
  if (!v) return ActivationKind::linear;
  if (!v->is_string())
    throw ConfigError(c.path_of(key), "expected an activation name, got " + json_type_name(*v));
  return parse_activation(v->get<std::string>(), c.path_of(key));
}

void require_null(ConfigObject& c, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (c.find(k))
      throw ConfigError(c.path_of(k),
                        "is not supported by Tandem yet; remove it or set it to null");
  }
}

// kernel_regularizer and bias_regularizer (Dense and Conv2D).
void read_regularizers(ConfigObject& c, WeightRegularizer& kernel, WeightRegularizer& bias) {
  if (const auto* k = c.find("kernel_regularizer"))
    kernel = WeightRegularizer(parse_regularizer(*k, c.path_of("kernel_regularizer")));
  if (const auto* b = c.find("bias_regularizer"))
    bias = WeightRegularizer(parse_regularizer(*b, c.path_of("bias_regularizer")));
}

// kernel_constraint and bias_constraint (Dense and Conv2D).
void read_constraints(ConfigObject& c, WeightConstraint& kernel, WeightConstraint& bias) {
  if (const auto* k = c.find("kernel_constraint"))
    kernel = WeightConstraint(parse_constraint(*k, c.path_of("kernel_constraint")));
  if (const auto* b = c.find("bias_constraint"))
    bias = WeightConstraint(parse_constraint(*b, c.path_of("bias_constraint")));
}

// One weight's Keras keys <weight>_initializer, <weight>_regularizer and <weight>_constraint
// (DepthwiseConv2D's and SeparableConv2D's depthwise and pointwise kernels).
void read_weight_keys(ConfigObject& c, const std::string& weight, Initializer& initializer,
                      WeightRegularizer& regularizer, WeightConstraint& constraint) {
  if (const auto* v = c.find(weight + "_initializer"))
    initializer = parse_initializer(*v, c.path_of(weight + "_initializer"));
  if (const auto* v = c.find(weight + "_regularizer"))
    regularizer = WeightRegularizer(parse_regularizer(*v, c.path_of(weight + "_regularizer")));
  if (const auto* v = c.find(weight + "_constraint"))
    constraint = WeightConstraint(parse_constraint(*v, c.path_of(weight + "_constraint")));
}

std::unique_ptr<Layer> make_dense(ConfigObject& c, const std::string& name) {
  DenseOptions o;
  o.units = c.positive_int("units");
  o.activation = read_activation(c, "activation");
  o.use_bias = c.get_bool("use_bias", true);
  if (const auto* k = c.find("kernel_initializer"))
    o.kernel_initializer = parse_initializer(*k, c.path_of("kernel_initializer"));
  if (const auto* b = c.find("bias_initializer"))
    o.bias_initializer = parse_initializer(*b, c.path_of("bias_initializer"));
  require_null(c, {"lora_rank"});
  read_constraints(c, o.kernel_constraint, o.bias_constraint);
  read_regularizers(c, o.kernel_regularizer, o.bias_regularizer);
  return std::make_unique<Dense>(name, o);
}

// Entries `from` on of a shape list (Keras' noise_shape, EinsumDense's output_shape): each null
// or a positive integer, else a ConfigError at the entry's path.
std::vector<std::optional<std::int64_t>> read_optional_sizes(const nlohmann::json& v,
                                                             std::size_t from,
                                                             const std::string& path) {
  std::vector<std::optional<std::int64_t>> shape;
  for (std::size_t i = from; i < v.size(); ++i) {
    if (v[i].is_null())
      shape.emplace_back();
    else if (v[i].is_number_integer() && v[i].get<std::int64_t>() > 0)
      shape.emplace_back(v[i].get<std::int64_t>());
    else
      throw ConfigError(path + "[" + std::to_string(i) + "]",
                        "expected null or a positive integer, got " + v[i].dump());
  }
  return shape;
}

// Keras' EinsumDense output_shape: an integer, or a list of null or positive integers (the
// output's axes after the batch's).
std::vector<std::optional<std::int64_t>> read_einsum_output_shape(ConfigObject& c) {
  const nlohmann::json& v = c.at("output_shape");
  const std::string path = c.path_of("output_shape");
  if (v.is_number_integer() && v.get<std::int64_t>() > 0) return {v.get<std::int64_t>()};
  if (!v.is_array())
    throw ConfigError(path,
                      "expected a positive integer or a list (null or a positive integer "
                      "per axis after the batch's), got " +
                          v.dump());
  return read_optional_sizes(v, 0, path);
}

std::unique_ptr<Layer> make_einsum_dense(ConfigObject& c, const std::string& name) {
  EinsumDenseOptions o;
  o.equation = c.get_string("equation");
  const auto specs = split_einsum_equation(o.equation);
  if (!specs)
    throw ConfigError(c.path_of("equation"),
                      "expected Keras' form '[X],[Y]->[Z]', '...[X],[Y]->...[Z]' or "
                      "'[X]...,[Y]->[Z]...' (a letter per axis: the input's, the kernel's, the "
                      "output's), got '" +
                          o.equation + "'");
  o.specs = *specs;
  if (auto problem = einsum_spec_problem(o.specs, std::nullopt))
    throw ConfigError(c.path_of("equation"), *problem);
  o.output_shape = read_einsum_output_shape(c);
  if (const auto* b = c.find("bias_axes")) {
    if (!b->is_string())
      throw ConfigError(c.path_of("bias_axes"),
                        "expected null or a string of output axes, got " + b->dump());
    o.bias_axes = b->get<std::string>();
    if (auto problem = einsum_spec_problem(o.specs, o.bias_axes))
      throw ConfigError(c.path_of("bias_axes"), *problem);
  }
  o.activation = read_activation(c, "activation");
  require_null(c, {"lora_rank", "lora_alpha", "quantization_config"});
  read_weight_keys(c, "kernel", o.kernel_initializer, o.kernel_regularizer, o.kernel_constraint);
  read_weight_keys(c, "bias", o.bias_initializer, o.bias_regularizer, o.bias_constraint);
  return std::make_unique<EinsumDense>(name, o);
}

std::unique_ptr<Layer> make_activation(ConfigObject& c, const std::string& name) {
  return std::make_unique<Activation>(
      name, parse_activation(c.get_string("activation"), c.path_of("activation")));
}

// ReLU, LeakyReLU and ELU: with their plain activation's parameters an Activation under Keras'
// class name; otherwise a ShapedActivationLayer (nn/shaped_activation.hpp).
float read_finite(ConfigObject& c, const char* key, double fallback, bool non_negative) {
  const nlohmann::json* v = c.find(key);
  if (!v || v->is_null()) {
    c.ignore({key});
    return static_cast<float>(fallback);
  }
  if (!v->is_number() || !std::isfinite(v->get<double>()) ||
      (non_negative && v->get<double>() < 0))
    throw ConfigError(c.path_of(key), std::string("expected a ") +
                                          (non_negative ? "non-negative" : "finite") +
                                          " number, got " + v->dump());
  return static_cast<float>(v->get<double>());
}

std::unique_ptr<Layer> make_relu(ConfigObject& c, const std::string& name) {
  backend::ShapedActivation a;
  if (const nlohmann::json* m = c.find("max_value"); m && !m->is_null()) {
    a.capped = true;
    a.max_value = read_finite(c, "max_value", 0, true);
  } else {
    c.ignore({"max_value"});
  }
  a.negative_slope = read_finite(c, "negative_slope", 0, true);
  a.threshold = read_finite(c, "threshold", 0, true);  // Keras refuses a negative one
  if (!a.capped && a.negative_slope == 0 && a.threshold == 0)
    return std::make_unique<Activation>(
        name, ActivationKind::relu, "ReLU",
        nlohmann::json{{"max_value", nullptr}, {"negative_slope", 0.0}, {"threshold", 0.0}});
  return std::make_unique<ShapedActivationLayer>(name, "ReLU", a);
}

std::unique_ptr<Layer> make_leaky_relu(ConfigObject& c, const std::string& name) {
  if (c.has("negative_slope") && c.has("alpha"))
    throw ConfigError(c.path_of("alpha"),
                      "give negative_slope (Keras 3) or alpha (Keras 2's name), not both");
  backend::ShapedActivation a;
  a.negative_slope = read_finite(c, c.has("alpha") ? "alpha" : "negative_slope", 0.3, true);
  if (c.has("alpha"))
    warn_once(c.path_of("alpha") + ": Keras 2's name; read as negative_slope, its name in Keras 3");
  c.ignore({"alpha", "negative_slope"});
  return std::make_unique<ShapedActivationLayer>(name, "LeakyReLU", a);
}

std::unique_ptr<Layer> make_elu(ConfigObject& c, const std::string& name) {
  backend::ShapedActivation a;
  a.elu = true;
  a.alpha = read_finite(c, "alpha", 1.0, false);
  if (a.alpha == 1.0f)
    return std::make_unique<Activation>(name, ActivationKind::elu, "ELU",
                                        nlohmann::json{{"alpha", 1.0}});
  return std::make_unique<ShapedActivationLayer>(name, "ELU", a);
}

std::unique_ptr<Layer> make_flatten(ConfigObject& c, const std::string& name) {
  std::string fmt = c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<Flatten>(name);
}

template <class Merge>
std::unique_ptr<Layer> make_merge(ConfigObject& /*c*/, const std::string& name) {
  return std::make_unique<Merge>(name);
}

template <bool kMaximum>
std::unique_ptr<Layer> make_extremum(ConfigObject& /*c*/, const std::string& name) {
  return std::make_unique<Extremum>(name, kMaximum);
}

// A value Keras takes alone or as a list of one (an axis, output_shape): the value itself.
const nlohmann::json& sole_entry(const nlohmann::json& v) {
  return v.is_array() && v.size() == 1 ? v[0] : v;
}

// Keras' axis of a normalization or Softmax: -1, or the last axis's index counting the batch
// axis (checked in build(), against the input), alone or as a list of one.
std::int64_t read_last_axis(ConfigObject& c) {
  const auto* a = c.find("axis");
  if (!a) return -1;
  const nlohmann::json& v = sole_entry(*a);
  if (!v.is_number_integer() || (v != -1 && v.get<std::int64_t>() < 1))
    throw ConfigError(c.path_of("axis"),
                      "only the last axis is supported (-1, or its index counting the batch "
                      "axis), got " +
                          a->dump());
  return v.get<std::int64_t>();
}

// Keras' Softmax: its axis one integer (alone or in a list), not the batch's; the input's rank
// says which axis it is (Activation::build).
std::unique_ptr<Layer> make_softmax(ConfigObject& c, const std::string& name) {
  const nlohmann::json* given = c.find("axis");  // written back as given
  if (given) {
    const nlohmann::json& v = sole_entry(*given);
    if (!v.is_number_integer() || v == 0)
      throw ConfigError(c.path_of("axis"),
                        "expected one axis after the batch (an integer: 1, 2, ..., or -1 for "
                        "the last), got " +
                            given->dump());
  }
  return std::make_unique<Activation>(
      name, ActivationKind::softmax, "Softmax",
      nlohmann::json{{"axis", given ? *given : nlohmann::json(-1)}});
}

double read_epsilon(ConfigObject& c, double fallback) {
  const double epsilon = c.get_number("epsilon", fallback);
  if (!(epsilon > 0))
    throw ConfigError(c.path_of("epsilon"),
                      "expected a positive number, got " + c.at("epsilon").dump());
  return epsilon;
}

// What LayerNormalization and GroupNormalization share (nn/normalization_affine.hpp): axis,
// epsilon, center, scale and the initializers; gamma's and beta's regularizers and constraints
// must be null.
void read_affine_normalization(ConfigObject& c, AffineNormalizationOptions& o) {
  o.axis = read_last_axis(c);
  o.epsilon = read_epsilon(c, 1e-3);
  o.center = c.get_bool("center", true);
  o.scale = c.get_bool("scale", true);
  if (const auto* v = c.find("beta_initializer"))
    o.beta_initializer = parse_initializer(*v, c.path_of("beta_initializer"));
  if (const auto* v = c.find("gamma_initializer"))
    o.gamma_initializer = parse_initializer(*v, c.path_of("gamma_initializer"));
  require_null(c, {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                   "gamma_constraint"});
}

std::unique_ptr<Layer> make_layer_normalization(ConfigObject& c, const std::string& name) {
  LayerNormalizationOptions o;
  read_affine_normalization(c, o);
  o.rms_scaling = c.get_bool("rms_scaling", false);
  if (o.rms_scaling)
    warn_once(c.path_of("rms_scaling") +
              ": computed as Keras defines it, x / sqrt(variance + epsilon) * gamma (the "
              "mean left in, no beta), which Keras has deprecated; RMSNormalization divides by "
              "the root mean square");
  return std::make_unique<LayerNormalization>(name, o);
}

// Keras 3's AdaptiveAveragePooling1D/2D/3D and AdaptiveMaxPooling1D/2D/3D: output_size, one
// positive int for every axis or a list of one per axis; channels_last.
template <bool Max, int Axes>
std::unique_ptr<Layer> make_adaptive_pooling(ConfigObject& c, const std::string& name) {
  const nlohmann::json& given = c.at("output_size");
  std::vector<std::int64_t> sizes;
  const auto size_of = [&](const nlohmann::json& v) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 24))
      throw ConfigError(c.path_of("output_size"), "expected a positive integer or a list of " +
                                                      std::to_string(Axes) + " of them, got " +
                                                      given.dump());
    return v.get<std::int64_t>();
  };
  if (given.is_array()) {
    if (given.size() != Axes) size_of(nullptr);
    for (const auto& v : given) sizes.push_back(size_of(v));
  } else {
    sizes.assign(Axes, size_of(given));
  }
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<AdaptivePooling>(name, Max, sizes);
}

// Keras 3's RMSNormalization: axis (the last) and epsilon (1e-6).
std::unique_ptr<Layer> make_rms_normalization(ConfigObject& c, const std::string& name) {
  const std::int64_t axis = read_last_axis(c);
  return std::make_unique<RmsNormalization>(name, axis, read_epsilon(c, 1e-6));
}

std::unique_ptr<Layer> make_group_normalization(ConfigObject& c, const std::string& name) {
  GroupNormalizationOptions o;
  o.groups = c.get_int("groups", 32);
  if (o.groups != -1 && (o.groups < 1 || o.groups > kMaxConfigSize))
    throw ConfigError(c.path_of("groups"),
                      "expected a positive number of groups, or -1 (one "
                      "per channel), got " +
                          c.at("groups").dump());
  read_affine_normalization(c, o);
  return std::make_unique<GroupNormalization>(name, o);
}

std::unique_ptr<Layer> make_prelu(ConfigObject& c, const std::string& name) {
  Initializer init{"zeros", std::nullopt, 0};
  if (const auto* v = c.find("alpha_initializer"))
    init = parse_initializer(*v, c.path_of("alpha_initializer"));
  std::vector<std::int64_t> shared;
  if (const auto* v = c.find("shared_axes")) {
    const nlohmann::json list = v->is_array() ? *v : nlohmann::json::array({*v});
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer())
        throw ConfigError(c.path_of("shared_axes"),
                          "expected an axis or a list of axes (integers), got " + v->dump());
      shared.push_back(list[i].get<std::int64_t>());
    }
  }
  require_null(c, {"alpha_regularizer", "alpha_constraint"});
  return std::make_unique<PReLU>(name, init, shared);
}

// Keras' UnitNormalization: axis an integer or a list of integers (default -1).
std::unique_ptr<Layer> make_unit_normalization(ConfigObject& c, const std::string& name) {
  const nlohmann::json* v = c.find("axis");
  const nlohmann::json list = !v              ? nlohmann::json::array({-1})
                              : v->is_array() ? *v
                                              : nlohmann::json::array({*v});
  std::vector<std::int64_t> axes;
  for (const nlohmann::json& axis : list) {
    if (!axis.is_number_integer())
      throw ConfigError(c.path_of("axis"),
                        "expected an axis or a list of axes (integers), got " + v->dump());
    axes.push_back(axis.get<std::int64_t>());
  }
  if (axes.empty()) throw ConfigError(c.path_of("axis"), "expected at least one axis, got []");
  return std::make_unique<UnitNormalization>(name, axes, v && v->is_array());
}

// Keras' ActivityRegularization: l1 and l2 (default 0), each at least 0.
std::unique_ptr<Layer> make_activity_regularization(ConfigObject& c, const std::string& name) {
  const double l1 = c.number_in("l1", 0.0, 0.0, 1e30);
  const double l2 = c.number_in("l2", 0.0, 0.0, 1e30);
  return std::make_unique<ActivityRegularization>(name, l1, l2);
}

// KerasHub's (keras_nlp's) PositionEmbedding.
std::unique_ptr<Layer> make_position_embedding(ConfigObject& c, const std::string& name) {
  const std::int64_t length = c.positive_int("sequence_length");
  Initializer init{"glorot_uniform", std::nullopt, 0};
  if (const auto* v = c.find("initializer")) init = parse_initializer(*v, c.path_of("initializer"));
  return std::make_unique<PositionEmbedding>(name, length, init);
}

// What MultiHeadAttention and GroupedQueryAttention read alike: dropout, use_bias, the
// initializers, seed and flash_attention (an implementation choice with the same result);
// regularizers and constraints must be null.
void read_attention_weights_and_dropout(ConfigObject& c, MultiHeadAttentionOptions& o) {
  o.dropout = c.number_in("dropout", 0.0, 0.0, 1.0, false, true);
  o.use_bias = c.get_bool("use_bias", true);
  if (const auto* k = c.find("kernel_initializer"))
    o.kernel_initializer = parse_initializer(*k, c.path_of("kernel_initializer"));
  if (const auto* b = c.find("bias_initializer"))
    o.bias_initializer = parse_initializer(*b, c.path_of("bias_initializer"));
  if (const auto* s = c.find("seed"); s && !s->is_null())
    o.seed = static_cast<std::uint64_t>(c.get_int("seed"));
  else
    c.ignore({"seed"});
  if (const auto* f = c.find("flash_attention"); f && !f->is_null() && !f->is_boolean())
    throw ConfigError(c.path_of("flash_attention"), "expected null or a boolean");
  c.ignore({"flash_attention"});
  require_null(c,
               {"kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint"});
}

std::unique_ptr<Layer> make_multi_head_attention(ConfigObject& c, const std::string& name) {
  MultiHeadAttentionOptions o;
  o.num_heads = c.positive_int("num_heads");
  o.key_dim = c.positive_int("key_dim");
  if (c.has("value_dim"))
    o.value_dim = c.positive_int("value_dim");
  else
    c.ignore({"value_dim"});
  read_attention_weights_and_dropout(c, o);
  if (const auto* v = c.find("output_shape"); v && !v->is_null()) {
    const nlohmann::json& d = sole_entry(*v);
    if (!d.is_number_integer() || d.get<std::int64_t>() <= 0 || d.get<std::int64_t>() > (1 << 24))
      throw ConfigError(c.path_of("output_shape"),
                        "expected the output's features (a positive integer, or [n]), got " +
                            v->dump());
    o.output_dim = d.get<std::int64_t>();
  } else {
    c.ignore({"output_shape"});
  }
  // Keras' attention_axes: an axis or a list of them, counting the batch axis; on the sequences
  // this layer takes (batch, time, features) the time axis is 1, or -2 from the end.
  if (const auto* v = c.find("attention_axes"); v && !v->is_null()) {
    const nlohmann::json& one = sole_entry(*v);
    if (!one.is_number_integer() || (one != 1 && one != -2))
      throw ConfigError(c.path_of("attention_axes"),
                        "only attention over the time axis (null, 1 or -2, or a list of one of "
                        "them) is supported, got " +
                            v->dump());
  }
  c.ignore({"attention_axes"});
  // Keras 2 records the shapes it was built with; Tandem takes them from the graph.
  c.ignore({"query_shape", "key_shape", "value_shape"});
  return std::make_unique<MultiHeadAttention>(name, o);
}

// Keras 3's GroupedQueryAttention: MultiHeadAttention with num_key_value_heads (dividing
// num_query_heads) key and value heads, key_dim = value_dim = head_dim.
std::unique_ptr<Layer> make_grouped_query_attention(ConfigObject& c, const std::string& name) {
  MultiHeadAttentionOptions o;
  o.key_dim = c.positive_int("head_dim");
  o.num_heads = c.positive_int("num_query_heads");
  o.key_value_heads = c.positive_int("num_key_value_heads");
  if (o.num_heads % o.key_value_heads != 0)
    throw ConfigError(c.path_of("num_key_value_heads"),
                      std::to_string(o.key_value_heads) + " key/value heads do not divide " +
                          std::to_string(o.num_heads) + " query heads (num_query_heads)");
  read_attention_weights_and_dropout(c, o);
  return std::make_unique<GroupedQueryAttention>(name, o);
}

std::unique_ptr<Layer> make_concatenate(ConfigObject& c, const std::string& name) {
  const auto axis = c.get_int("axis", -1);
  if (axis == 0 || axis < -32 || axis > 32)
    throw ConfigError(c.path_of("axis"), "expected a non-batch axis (-1 for the last, 1 for the "
                                         "first after the batch axis), got " + std::to_string(axis));
  return std::make_unique<Concatenate>(name, static_cast<int>(axis));
}

std::unique_ptr<Layer> make_dot(ConfigObject& c, const std::string& name) {
  const nlohmann::json& v = c.at("axes");
  auto axis = [&](const nlohmann::json& e, const std::string& at) {
    if (!e.is_number_integer() || e.get<std::int64_t>() == 0 || e.get<std::int64_t>() < -2 ||
        e.get<std::int64_t>() > 2)
      throw ConfigError(at, "expected a non-batch axis (1, 2, or -1, -2), got " + e.dump());
    return static_cast<int>(e.get<std::int64_t>());
  };
  std::array<int, 2> axes{};
  if (v.is_array() && v.size() == 2) {
    axes = {axis(v[0], c.path_of("axes") + "[0]"), axis(v[1], c.path_of("axes") + "[1]")};
  } else if (!v.is_array()) {
    axes[0] = axes[1] = axis(v, c.path_of("axes"));
  } else {
    throw ConfigError(c.path_of("axes"), "expected an axis or a pair of axes, got " + v.dump());
  }
  return std::make_unique<Dot>(name, axes, c.get_bool("normalize", false));
}

// A random layer's optional seed.
std::optional<std::uint64_t> read_seed(ConfigObject& c) {
  if (!c.has("seed")) {
    c.ignore({"seed"});
    return std::nullopt;
  }
  const std::int64_t seed = c.get_int("seed");
  if (seed < 0)
    throw ConfigError(c.path_of("seed"), "expected an integer >= 0, got " + std::to_string(seed));
  return static_cast<std::uint64_t>(seed);
}

// Keras' noise_shape: [null | batch, d1, ...], each sample entry null or a positive integer.
std::vector<std::optional<std::int64_t>> read_noise_shape(const nlohmann::json& v,
                                                           const std::string& path) {
  if (!v.is_array() || v.empty())
    throw ConfigError(path, "expected a list (null or an integer per axis, the batch's first), got " +
                                v.dump());
  if (!v[0].is_null())
    throw ConfigError(path + "[0]", "Tandem draws one mask per sample; the batch entry must be "
                                    "null, got " + v[0].dump());
  return read_optional_sizes(v, 1, path);
}

// What Keras' two attention layers without projections read alike (their scores aside).
AttentionLayerOptions read_attention_options(ConfigObject& c, AttentionScores scores,
                                             bool use_scale_default) {
  AttentionLayerOptions o;
  o.scores = scores;
  o.use_scale = c.get_bool("use_scale", use_scale_default);
  o.dropout = c.number_in("dropout", 0.0, 0.0, 1.0, false, true);
  o.seed = read_seed(c);
  o.causal = c.get_bool("causal", false);
  return o;
}

// Keras' Attention: score_mode "dot" (Luong) or "concat" (Bahdanau-style, tanh of the sums).
std::unique_ptr<Layer> make_attention(ConfigObject& c, const std::string& name) {
  const bool concat = c.one_of("score_mode", "dot", {"dot", "concat"}) == "concat";
  return std::make_unique<AttentionLayer>(
      name,
      read_attention_options(c, concat ? AttentionScores::concat : AttentionScores::dot, false));
}

// Keras' AdditiveAttention (Bahdanau): a scale per feature, use_scale true by default.
std::unique_ptr<Layer> make_additive_attention(ConfigObject& c, const std::string& name) {
  return std::make_unique<AttentionLayer>(
      name, read_attention_options(c, AttentionScores::additive, true));
}

// Dropout and AlphaDropout (kAlpha): rate, seed, noise_shape.
template <bool kAlpha>
std::unique_ptr<Layer> make_dropout(ConfigObject& c, const std::string& name) {
  DropoutOptions o;
  o.alpha = kAlpha;
  o.rate = c.number_in("rate", 0.0, 0.0, 1.0, false, true);
  if (!c.has("rate")) throw ConfigError(c.path_of("rate"), "required key is missing");
  o.seed = read_seed(c);
  if (const auto* v = c.find("noise_shape")) o.noise_shape = read_noise_shape(*v, c.path_of("noise_shape"));
  return std::make_unique<Dropout>(name, o);
}

template <int Rank>
std::unique_ptr<Layer> make_spatial_dropout(ConfigObject& c, const std::string& name) {
  DropoutOptions o;
  o.rate = c.number_in("rate", 0.0, 0.0, 1.0, false, true);
  if (!c.has("rate")) throw ConfigError(c.path_of("rate"), "required key is missing");
  o.seed = read_seed(c);
  o.spatial_rank = Rank;
  c.one_of("data_format", "channels_last", {"channels_last"});
  require_null(c, {"noise_shape"});
  return std::make_unique<Dropout>(name, o);
}

template <GaussianNoise::Kind kind>
std::unique_ptr<Layer> make_gaussian_noise(ConfigObject& c, const std::string& name) {
  const bool additive = kind == GaussianNoise::Kind::additive;
  const char* key = additive ? "stddev" : "rate";
  if (!c.has(key)) throw ConfigError(c.path_of(key), "required key is missing");
  const double amount = additive ? c.number_in(key, 0.0, 0.0, 1e30)
                                 : c.number_in(key, 0.0, 0.0, 1.0, false, true);
  return std::make_unique<GaussianNoise>(name, kind, amount, read_seed(c));
}

std::unique_ptr<Layer> make_random_flip(ConfigObject& c, const std::string& name) {
  const std::string mode = c.one_of("mode", "horizontal_and_vertical",
                                    {"horizontal", "vertical", "horizontal_and_vertical"});
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomFlip>(name, mode, read_seed(c));
}

// Keras' factor arguments of the preprocessing layers: f means (-f, f) (or (f, f) where
// `symmetric` is false), [lower, upper] as given; each bound in [lo, hi], lower <= upper.
struct FactorRange {
  double lower = 0, upper = 0;
  nlohmann::json as_given;
};

FactorRange read_factor(ConfigObject& c, const std::string& key, double lo, double hi,
                        bool symmetric) {
  const nlohmann::json& v = c.at(key);
  const std::string path = c.path_of(key);
  const std::string wanted = "a number or [lower, upper], each from " +
                             std::to_string(lo).substr(0, 4) + " to " +
                             std::to_string(hi).substr(0, 4);
  FactorRange r;
  r.as_given = v;
  if (v.is_number()) {
    const double f = v.get<double>();
    r.lower = symmetric ? -f : f;
    r.upper = f;
  } else if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()) {
    r.lower = v[0].get<double>();
    r.upper = v[1].get<double>();
  } else {
    throw ConfigError(path, "expected " + wanted + ", got " + json_type_name(v));
  }
  if (!(r.lower >= lo && r.upper <= hi && r.lower <= r.upper) ||
      (symmetric && v.is_number() && v.get<double>() < 0))
    throw ConfigError(path, "expected " + wanted + " (lower <= upper), got " + v.dump());
  return r;
}

// fill_mode, interpolation and fill_value of the warping layers, into `d` and `keys`.
void read_warp_fill(ConfigObject& c, backend::WarpDesc& d, nlohmann::json& keys) {
  using backend::WarpDesc;
  const std::string fill =
      c.one_of("fill_mode", "reflect", {"reflect", "wrap", "constant", "nearest"});
  d.fill = fill == "reflect"    ? WarpDesc::reflect
           : fill == "wrap"     ? WarpDesc::wrap
           : fill == "constant" ? WarpDesc::constant
                                : WarpDesc::nearest_edge;
  const std::string interpolation = c.one_of("interpolation", "bilinear", {"bilinear", "nearest"});
  d.interpolation = interpolation == "bilinear" ? WarpDesc::bilinear : WarpDesc::nearest;
  d.fill_value = static_cast<float>(c.number_in("fill_value", 0.0, -3e38, 3e38));
  keys["fill_mode"] = fill;
  keys["interpolation"] = interpolation;
  keys["fill_value"] = d.fill_value;
}

// A warp's first draw range (height, or rotation) and, when given, its second (width).
void set_warp_ranges(backend::WarpDesc& d, const FactorRange& first, const FactorRange* second) {
  d.lo0 = static_cast<float>(first.lower);
  d.hi0 = static_cast<float>(first.upper);
  d.width_follows_height = second == nullptr;
  if (second == nullptr) return;
  d.lo1 = static_cast<float>(second->lower);
  d.hi1 = static_cast<float>(second->upper);
}

std::unique_ptr<Layer> make_random_translation(ConfigObject& c, const std::string& name) {
  backend::WarpDesc d;
  d.kind = backend::WarpDesc::translate;
  const FactorRange h = read_factor(c, "height_factor", -1, 1, true);
  const FactorRange w = read_factor(c, "width_factor", -1, 1, true);
  set_warp_ranges(d, h, &w);
  nlohmann::json keys = {{"height_factor", h.as_given}, {"width_factor", w.as_given}};
  read_warp_fill(c, d, keys);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomWarp>(name, d, 0, 0, read_seed(c), keys);
}

std::unique_ptr<Layer> make_random_rotation(ConfigObject& c, const std::string& name) {
  backend::WarpDesc d;
  d.kind = backend::WarpDesc::rotate;
  const FactorRange f = read_factor(c, "factor", -1e6, 1e6, true);
  set_warp_ranges(d, f, nullptr);  // one draw: the angle
  nlohmann::json keys = {{"factor", f.as_given}};
  read_warp_fill(c, d, keys);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomWarp>(name, d, 0, 0, read_seed(c), keys);
}

std::unique_ptr<Layer> make_random_zoom(ConfigObject& c, const std::string& name) {
  backend::WarpDesc d;
  d.kind = backend::WarpDesc::zoom;
  // Keras: a zoom factor below -1 would flip the image; exactly -1 collapses it.
  const FactorRange h = read_factor(c, "height_factor", -0.999999, 1e6, true);
  nlohmann::json keys = {{"height_factor", h.as_given}, {"width_factor", nullptr}};
  std::optional<FactorRange> w;
  if (c.find("width_factor")) {
    w = read_factor(c, "width_factor", -0.999999, 1e6, true);
    keys["width_factor"] = w->as_given;
  } else {
    c.ignore({"width_factor"});  // absent or null: the width zooms with the height
  }
  set_warp_ranges(d, h, w ? &*w : nullptr);
  read_warp_fill(c, d, keys);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomWarp>(name, d, 0, 0, read_seed(c), keys);
}

std::unique_ptr<Layer> make_random_crop(ConfigObject& c, const std::string& name) {
  backend::WarpDesc d;
  d.kind = backend::WarpDesc::crop;
  d.interpolation = backend::WarpDesc::nearest;  // whole-pixel offsets
  d.fill = backend::WarpDesc::constant;
  const std::int64_t rows = c.positive_int("height"), cols = c.positive_int("width");
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomWarp>(name, d, rows, cols, read_seed(c),
                                      nlohmann::json{{"height", rows}, {"width", cols}});
}

// Keras' Resizing: bilinear or nearest as tf.image.resize computes them; the other
// interpolations and Keras 3's padding to the aspect ratio are refused at their key.
std::unique_ptr<Layer> make_resizing(ConfigObject& c, const std::string& name) {
  const std::int64_t rows = c.positive_int("height"), cols = c.positive_int("width");
  const std::string how = c.get_string("interpolation", "bilinear");
  if (how != "bilinear" && how != "nearest")
    throw ConfigError(c.path_of("interpolation"),
                      "Tandem resizes bilinear or nearest (tf.image.resize's, half-pixel centres), "
                      "not '" +
                          how + "'");
  const bool crop = c.get_bool("crop_to_aspect_ratio", false);
  const bool pad = c.get_bool("pad_to_aspect_ratio", false);
  if (crop && pad)
    throw ConfigError(c.path_of("pad_to_aspect_ratio"),
                      "crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be true (Keras "
                      "refuses it too)");
  // Keras 3 fills the padding with a constant only.
  c.one_of("fill_mode", "constant", {"constant"});
  const auto fill_value = static_cast<float>(c.number_in("fill_value", 0.0, -1e30, 1e30));
  c.one_of("data_format", "channels_last", {"channels_last"});
  const ResizeWindow window = crop  ? ResizeWindow::crop_to_aspect_ratio
                              : pad ? ResizeWindow::pad_to_aspect_ratio
                                    : ResizeWindow::whole;
  return std::make_unique<Resizing>(
      name, rows, cols, how == "nearest" ? backend::WarpDesc::nearest : backend::WarpDesc::bilinear,
      window, fill_value);
}

std::unique_ptr<Layer> make_center_crop(ConfigObject& c, const std::string& name) {
  const std::int64_t rows = c.positive_int("height"), cols = c.positive_int("width");
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<CenterCrop>(name, rows, cols);
}

// value_range: [low, high], low < high (Keras' default [0, 255]).
std::pair<float, float> read_value_range(ConfigObject& c) {
  if (!c.has("value_range")) {
    c.ignore({"value_range"});
    return {0.0f, 255.0f};
  }
  const nlohmann::json& v = c.at("value_range");
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() ||
      !(v[0].get<double>() < v[1].get<double>()))
    throw ConfigError(c.path_of("value_range"),
                      "expected [low, high] with low < high, got " + v.dump());
  return {v[0].get<float>(), v[1].get<float>()};
}

std::unique_ptr<Layer> make_random_contrast(ConfigObject& c, const std::string& name) {
  backend::AdjustDesc d;
  d.kind = backend::AdjustDesc::contrast;
  // Keras: factor f or (lower, upper), both in [0, 1]; the contrast factor is drawn in
  // [1 - lower, 1 + upper].
  const FactorRange f = read_factor(c, "factor", 0, 1e6, false);
  if (f.lower > 1.0)
    throw ConfigError(
        c.path_of("factor"),
        "expected lower <= 1 (a contrast factor of 1 - lower must not be negative), got " +
            f.as_given.dump());
  d.lo = static_cast<float>(1.0 - f.lower);
  d.hi = static_cast<float>(1.0 + f.upper);
  std::tie(d.value_lo, d.value_hi) = read_value_range(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomColor>(
      name, d, read_seed(c),
      nlohmann::json{{"factor", f.as_given}, {"value_range", {d.value_lo, d.value_hi}}});
}

std::unique_ptr<Layer> make_random_brightness(ConfigObject& c, const std::string& name) {
  backend::AdjustDesc d;
  d.kind = backend::AdjustDesc::brightness;
  const FactorRange f = read_factor(c, "factor", -1, 1, true);
  d.lo = static_cast<float>(f.lower);
  d.hi = static_cast<float>(f.upper);
  std::tie(d.value_lo, d.value_hi) = read_value_range(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<RandomColor>(
      name, d, read_seed(c),
      nlohmann::json{{"factor", f.as_given}, {"value_range", {d.value_lo, d.value_hi}}});
}

// Keras' int-or-tuple arguments (kernel_size, strides, pool_size, ...): 3 or [3, 3] (a list
// of `count`), each > 0. Absent or null gives `fallback` (a missing required key when there is
// none).
template <std::size_t kCount>
std::array<std::int64_t, kCount> read_sizes(
    ConfigObject& c, const std::string& key,
    std::optional<std::array<std::int64_t, kCount>> fallback) {
  if (!c.has(key) && fallback) {
    c.ignore({key.c_str()});
    return *fallback;
  }
  const nlohmann::json& v = c.at(key);
  auto positive = [](const nlohmann::json& e, const std::string& path) {
    if (!e.is_number_integer())
      throw ConfigError(path, "expected a positive integer, got " + json_type_name(e));
    const auto n = e.get<std::int64_t>();
    if (n <= 0 || n > kMaxConfigSize)
      throw ConfigError(path, "expected a positive integer up to " +
                                  std::to_string(kMaxConfigSize) + ", got " + e.dump());
    return n;
  };
  std::array<std::int64_t, kCount> out{};
  if (v.is_number_integer()) {
    out.fill(positive(v, c.path_of(key)));
    return out;
  }
  if (v.is_array() && v.size() == kCount) {
    for (std::size_t i = 0; i < kCount; ++i)
      out[i] = positive(v[i], c.path_of(key) + "[" + std::to_string(i) + "]");
    return out;
  }
  throw ConfigError(
      c.path_of(key),
      "expected an integer or a list of " + std::to_string(kCount) + " integers, got " +
          (v.is_array() ? "a list of " + std::to_string(v.size()) : json_type_name(v)));
}

Pair read_pair(ConfigObject& c, const std::string& key, std::optional<Pair> fallback) {
  return read_sizes<2>(c, key, fallback);
}

// A volume's sizes (depth, rows, cols): Conv3D's and the 3-D pooling layers'.
using Triple = std::array<std::int64_t, 3>;

Triple read_triple(ConfigObject& c, const std::string& key, std::optional<Triple> fallback) {
  return read_sizes<3>(c, key, fallback);
}

// "valid" or "same", case-insensitive as in Keras.
Padding read_padding(ConfigObject& c) {
  return c.one_of_any_case("padding", "valid", {"valid", "same"}) == "same" ? Padding::same
                                                                            : Padding::valid;
}

// What Conv1D and Conv2D read alike, after their sizes (a 1-D size is the pair (1, n)): the
void check_dilation_with_strides(ConfigObject& c, std::int64_t largest_stride,
                                 std::int64_t largest_dilation) {
  if (largest_stride > 1 && largest_dilation > 1)
    throw ConfigError(
        c.path_of("dilation_rate"),
        "dilation_rate > 1 cannot be combined with strides > 1 (Keras rejects it too)");
}

void check_dilation_with_strides(ConfigObject& c, const Conv2DOptions& o) {
  const DepthWindow z = o.depth.value_or(DepthWindow{});
  check_dilation_with_strides(c, std::max({o.strides[0], o.strides[1], z.stride}),
                              std::max({o.dilation_rate[0], o.dilation_rate[1], z.dilation}));
}

// activation and use_bias (no LoRA).
void read_activation_and_bias(ConfigObject& c, Conv2DOptions& o) {
  o.activation = read_activation(c, "activation");
  o.use_bias = c.get_bool("use_bias", true);
  require_null(c, {"lora_rank", "lora_alpha"});
}

// activation, bias and initializers.
void read_convolution_rest(ConfigObject& c, Conv2DOptions& o) {
  read_activation_and_bias(c, o);
  if (const auto* k = c.find("kernel_initializer"))
    o.kernel_initializer = parse_initializer(*k, c.path_of("kernel_initializer"));
  if (const auto* b = c.find("bias_initializer"))
    o.bias_initializer = parse_initializer(*b, c.path_of("bias_initializer"));
}

// Keras' `groups` where Tandem takes only 1 (Conv1D; Keras 2 writes it into Conv2DTranspose's
// config too).
void require_one_group(ConfigObject& c) {
  if (const std::int64_t groups = c.get_int("groups", 1); groups != 1)
    throw ConfigError(c.path_of("groups"),
                      "only groups=1 is supported for this layer, got " + std::to_string(groups));
}

// The sliding window of the 2-D convolutions: kernel_size, strides, padding, data_format,
// dilation_rate.
void read_window(ConfigObject& c, Conv2DOptions& o) {
  o.kernel_size = read_pair(c, "kernel_size", std::nullopt);
  o.strides = read_pair(c, "strides", Pair{1, 1});
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  o.dilation_rate = read_pair(c, "dilation_rate", Pair{1, 1});
  check_dilation_with_strides(c, o);
}

// The sliding window of Conv3D: as read_window's, each size a triple (depth, rows, cols).
void read_window_3d(ConfigObject& c, Conv2DOptions& o) {
  const Triple k = read_triple(c, "kernel_size", std::nullopt);
  const Triple s = read_triple(c, "strides", Triple{1, 1, 1});
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  const Triple d = read_triple(c, "dilation_rate", Triple{1, 1, 1});
  o.kernel_size = {k[1], k[2]};
  o.strides = {s[1], s[2]};
  o.dilation_rate = {d[1], d[2]};
  o.depth = DepthWindow{k[0], s[0], d[0]};
  check_dilation_with_strides(c, o);
}

// Conv2D and Conv3D (kVolume): filters, the window, groups, activation, bias, initializers,
// constraints and regularizers.
template <bool kVolume>
std::unique_ptr<Layer> make_convolution(ConfigObject& c, const std::string& name) {
  Conv2DOptions o;
  o.filters = c.positive_int("filters");
  if (kVolume)
    read_window_3d(c, o);
  else
    read_window(c, o);
  o.groups = c.positive_int("groups", 1);
  if (o.filters % o.groups != 0)
    throw ConfigError(c.path_of("groups"), "groups " + std::to_string(o.groups) +
                                               " must divide filters (" +
                                               std::to_string(o.filters) + ")");
  read_convolution_rest(c, o);
  read_constraints(c, o.kernel_constraint, o.bias_constraint);
  read_regularizers(c, o.kernel_regularizer, o.bias_regularizer);
  if (kVolume) return std::make_unique<Conv3D>(name, o);
  return std::make_unique<Conv2D>(name, o);
}

// Keras' output_padding of a transposed convolution: null, n or one per axis ([rows, cols];
// Conv1DTranspose's [n], as the pair (0, n)), each >= 0 and below its stride.
std::optional<Pair> read_output_padding(ConfigObject& c, const Conv2DOptions& conv, bool one_d) {
  const auto* v = c.find("output_padding");
  if (!v) return std::nullopt;
  const auto integer = [](const nlohmann::json& e) { return e.is_number_integer(); };
  const bool single = v->is_number_integer();
  const bool listed =
      v->is_array() && v->size() == (one_d ? 1u : 2u) && std::all_of(v->begin(), v->end(), integer);
  if (!single && !listed)
    throw ConfigError(c.path_of("output_padding"),
                      std::string("expected null, an integer or ") +
                          (one_d ? "a list of one integer" : "a pair of integers") + ", got " +
                          v->dump());
  const std::int64_t first = single ? v->get<std::int64_t>() : (*v)[0].get<std::int64_t>();
  const Pair p = one_d    ? Pair{0, first}
                 : single ? Pair{first, first}
                          : Pair{first, (*v)[1].get<std::int64_t>()};
  for (int a = 0; a < 2; ++a)
    if (p[a] < 0 || p[a] >= conv.strides[a])
      throw ConfigError(c.path_of("output_padding"),
                        "each output padding must be at least 0 and less than its stride " +
                            (one_d ? std::to_string(conv.strides[1])
                                   : shape_to_string({conv.strides[0], conv.strides[1]})) +
                            ", got " + v->dump());
  return p;
}

// Conv3DTranspose: Conv2DTranspose's keys over volumes, each size an int or a triple (depth,
// rows, cols); output_padding null, n or a triple, each below its stride.
std::unique_ptr<Layer> make_conv3d_transpose(ConfigObject& c, const std::string& name) {
  Conv2DTransposeOptions o;
  Conv2DOptions& conv = o.conv;
  conv.filters = c.positive_int("filters");
  read_window_3d(c, conv);
  require_one_group(c);
  if (const auto* v = c.find("output_padding"); v && !v->is_null()) {
    const Triple strides{conv.depth->stride, conv.strides[0], conv.strides[1]};
    Triple padding{};
    if (v->is_number_integer()) {
      padding.fill(v->get<std::int64_t>());
    } else if (v->is_array() && v->size() == 3 &&
               std::all_of(v->begin(), v->end(),
                           [](const auto& e) { return e.is_number_integer(); })) {
      for (std::size_t a = 0; a < 3; ++a) padding[a] = (*v)[a].get<std::int64_t>();
    } else {
      throw ConfigError(c.path_of("output_padding"),
                        "expected null, an integer or a list of 3 integers, got " + v->dump());
    }
    for (std::size_t a = 0; a < 3; ++a)
      if (padding[a] < 0 || padding[a] >= strides[a])
        throw ConfigError(c.path_of("output_padding"),
                          "each output padding must be at least 0 and less than its stride " +
                              nlohmann::json(strides).dump() + ", got " + v->dump());
    conv.depth->output_padding = padding[0];
    o.output_padding = Pair{padding[1], padding[2]};
  }
  read_convolution_rest(c, conv);
  read_constraints(c, conv.kernel_constraint, conv.bias_constraint);
  read_regularizers(c, conv.kernel_regularizer, conv.bias_regularizer);
  return std::make_unique<Conv3DTranspose>(name, o);
}

std::unique_ptr<Layer> make_conv2d_transpose(ConfigObject& c, const std::string& name) {
  Conv2DTransposeOptions o;
  Conv2DOptions& conv = o.conv;
  conv.filters = c.positive_int("filters");
  read_window(c, conv);
  require_one_group(c);
  o.output_padding = read_output_padding(c, conv, false);
  read_convolution_rest(c, conv);
  read_constraints(c, conv.kernel_constraint, conv.bias_constraint);
  read_regularizers(c, conv.kernel_regularizer, conv.bias_regularizer);
  return std::make_unique<Conv2DTranspose>(name, o);
}

// What DepthwiseConv1D and DepthwiseConv2D read alike, after their window.
void read_depthwise(ConfigObject& c, Conv2DOptions& o) {
  o.depth_multiplier = c.positive_int("depth_multiplier", 1);
  read_activation_and_bias(c, o);
  read_weight_keys(c, "depthwise", o.kernel_initializer, o.kernel_regularizer,
                   o.kernel_constraint);
  read_weight_keys(c, "bias", o.bias_initializer, o.bias_regularizer, o.bias_constraint);
}

std::unique_ptr<Layer> make_depthwise_conv2d(ConfigObject& c, const std::string& name) {
  Conv2DOptions o;
  read_window(c, o);
  read_depthwise(c, o);
  return std::make_unique<DepthwiseConv2D>(name, o);
}

// What SeparableConv1D and SeparableConv2D read alike, after their window (the depthwise
// part's).
void read_separable(ConfigObject& c, SeparableConv2DOptions& o) {
  Conv2DOptions& depthwise = o.depthwise;
  Conv2DOptions& pointwise = o.pointwise;
  depthwise.depth_multiplier = c.positive_int("depth_multiplier", 1);
  read_activation_and_bias(c, pointwise);  // the activation and the bias are the pointwise part's
  depthwise.use_bias = false;
  read_weight_keys(c, "depthwise", depthwise.kernel_initializer, depthwise.kernel_regularizer,
                   depthwise.kernel_constraint);
  read_weight_keys(c, "pointwise", pointwise.kernel_initializer, pointwise.kernel_regularizer,
                   pointwise.kernel_constraint);
  read_weight_keys(c, "bias", pointwise.bias_initializer, pointwise.bias_regularizer,
                   pointwise.bias_constraint);
}

std::unique_ptr<Layer> make_separable_conv2d(ConfigObject& c, const std::string& name) {
  SeparableConv2DOptions o;
  o.pointwise.filters = c.positive_int("filters");
  read_window(c, o.depthwise);
  read_separable(c, o);
  return std::make_unique<SeparableConv2D>(name, o);
}

// MaxPooling2D / AveragePooling2D: pool_size (default 2), strides (default: pool_size).
std::unique_ptr<Layer> make_pooling2d(ConfigObject& c, const std::string& name, PoolKind kind) {
  Pooling2DOptions o;
  o.kind = kind;
  o.pool_size = read_pair(c, "pool_size", Pair{2, 2});
  o.strides = read_pair(c, "strides", o.pool_size);
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<Pooling2D>(name, o);
}

// MaxPooling3D / AveragePooling3D: as the 2-D layers, each size a triple (depth, rows, cols).
template <PoolKind kKind>
std::unique_ptr<Layer> make_pooling3d(ConfigObject& c, const std::string& name) {
  Pooling2DOptions o;
  o.kind = kKind;
  const Triple size = read_triple(c, "pool_size", Triple{2, 2, 2});
  const Triple strides = read_triple(c, "strides", size);
  o.pool_size = {size[1], size[2]};
  o.strides = {strides[1], strides[2]};
  o.depth = DepthWindow{size[0], strides[0], 1};
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<Pooling2D>(name, o);
}

// Keras' 1-D size arguments: 3 or [3], > 0; as the (1, n) pair of the 2-D layer computing it.
Pair read_single(ConfigObject& c, const std::string& key, std::optional<std::int64_t> fallback) {
  const nlohmann::json* v = c.find(key);
  if ((!v || v->is_null()) && fallback) {
    c.ignore({key.c_str()});
    return {1, *fallback};
  }
  const nlohmann::json& e = v && v->is_array() && v->size() == 1 ? (*v)[0] : c.at(key);
  if (!e.is_number_integer() || e.get<std::int64_t>() <= 0)
    throw ConfigError(c.path_of(key),
                      "expected a positive integer or a list of 1, got " + c.at(key).dump());
  return {1, e.get<std::int64_t>()};
}

// The sliding window of the 1-D convolutions, as the (1, n) pairs of the 2-D layer computing
// them: kernel_size, strides, padding, data_format, dilation_rate. Returns whether the padding is
// "causal" (taken where `causal_allowed`; the convolution then pads none itself).
bool read_window_1d(ConfigObject& c, Conv2DOptions& o, bool causal_allowed) {
  o.kernel_size = read_single(c, "kernel_size", std::nullopt);
  o.strides = read_single(c, "strides", 1);
  const nlohmann::json* padding = c.find("padding");
  const bool causal = causal_allowed && padding && padding->is_string() && *padding == "causal";
  o.padding = causal ? Padding::valid : read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  o.dilation_rate = read_single(c, "dilation_rate", 1);
  check_dilation_with_strides(c, o);
  return causal;
}

std::unique_ptr<Layer> make_conv1d(ConfigObject& c, const std::string& name) {
  Conv2DOptions o;
  o.filters = c.positive_int("filters");
  const bool causal = read_window_1d(c, o, true);
  require_one_group(c);
  read_convolution_rest(c, o);
  read_constraints(c, o.kernel_constraint, o.bias_constraint);  // Keras' axes of (k, in, filters)
  read_regularizers(c, o.kernel_regularizer, o.bias_regularizer);
  return std::make_unique<Conv1D>(name, o, causal);
}

std::unique_ptr<Layer> make_depthwise_conv1d(ConfigObject& c, const std::string& name) {
  Conv2DOptions o;
  const bool causal = read_window_1d(c, o, true);  // Keras 2 pads causally; Keras 3 refuses it
  read_depthwise(c, o);
  return std::make_unique<DepthwiseConv1D>(name, o, causal);
}

std::unique_ptr<Layer> make_separable_conv1d(ConfigObject& c, const std::string& name) {
  SeparableConv2DOptions o;
  o.pointwise.filters = c.positive_int("filters");
  const bool causal = read_window_1d(c, o.depthwise, true);
  read_separable(c, o);
  return std::make_unique<SeparableConv1D>(name, o, causal);
}

std::unique_ptr<Layer> make_conv1d_transpose(ConfigObject& c, const std::string& name) {
  Conv2DTransposeOptions o;
  Conv2DOptions& conv = o.conv;
  conv.filters = c.positive_int("filters");
  read_window_1d(c, conv, false);
  o.output_padding = read_output_padding(c, conv, true);
  read_convolution_rest(c, conv);
  read_constraints(c, conv.kernel_constraint, conv.bias_constraint);  // Keras' (k, filters, in)
  read_regularizers(c, conv.kernel_regularizer, conv.bias_regularizer);
  return std::make_unique<Conv1DTranspose>(name, o);
}

template <PoolKind kKind>
std::unique_ptr<Layer> make_pooling1d(ConfigObject& c, const std::string& name) {
  Pooling2DOptions o;
  o.kind = kKind;
  o.pool_size = read_single(c, "pool_size", 2);
  o.strides = read_single(c, "strides", o.pool_size[1]);
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<Pooling1D>(name, o);
}

template <int kSpatialAxes>
std::unique_ptr<Layer> make_global_max_pooling(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<GlobalMaxPooling>(name, kSpatialAxes, c.get_bool("keepdims", false));
}

// Normalization's mean / variance, given (not null): a number or a list of numbers (variances
// >= 0).
std::vector<double> read_statistics(ConfigObject& c, const char* key, bool non_negative) {
  const nlohmann::json& v = *c.find(key);
  std::vector<double> out;
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& e = list[i];
    if (!e.is_number() || !std::isfinite(e.get<double>()) || (non_negative && e.get<double>() < 0))
      throw ConfigError(c.path_of(key) + (v.is_array() ? "[" + std::to_string(i) + "]" : ""),
                        std::string("expected a ") + (non_negative ? "non-negative" : "finite") +
                            " number, got " + e.dump());
    out.push_back(e.get<double>());
  }
  if (out.empty()) throw ConfigError(c.path_of(key), "expected at least one value");
  return out;
}

// Normalization with the config's statistics, or, when both are null (Keras' config of a layer
// whose adapt() computed them), with its statistics as weights, loaded from the model's file.
std::unique_ptr<Layer> make_normalization(ConfigObject& c, const std::string& name) {
  if (const nlohmann::json* a = c.find("axis"); a && !(*a == -1 || *a == nlohmann::json{-1}))
    throw ConfigError(c.path_of("axis"),
                      "only the last axis (-1) is supported, got " + a->dump());
  c.ignore({"axis"});
  const auto given = [&c](const char* key) { return c.find(key) != nullptr; };
  const bool invert = c.get_bool("invert", false);
  if (!given("mean") && !given("variance")) {
    c.ignore({"mean", "variance"});
    return std::make_unique<Normalization>(name, invert);
  }
  for (const char* key : {"mean", "variance"})
    if (!given(key))
      throw ConfigError(c.path_of(key),
                        "give both mean and variance (the statistics adapt() computed), or "
                        "neither (null, as Keras writes an adapted layer: its statistics are "
                        "then weights, loaded with --weights or a checkpoint, or computed from "
                        "the training data by a fresh run)");
  std::vector<double> mean = read_statistics(c, "mean", false);
  std::vector<double> variance = read_statistics(c, "variance", true);
  return std::make_unique<Normalization>(name, std::move(mean), std::move(variance), invert);
}

// CategoryEncoding's and Discretization's output_mode, and `sparse` (false: Tandem's tensors are
// dense). Discretization's "int" is none.
std::optional<CategoryMode> read_category_mode(ConfigObject& c, const std::string& fallback,
                                               bool allow_int) {
  std::vector<std::string> modes = {"one_hot", "multi_hot", "count"};
  if (allow_int) modes.insert(modes.begin(), "int");
  const std::string mode = c.one_of("output_mode", fallback, modes);
  if (c.get_bool("sparse", false))
    throw ConfigError(c.path_of("sparse"), "Tandem's tensors are dense: sparse must be false");
  if (mode == "int") return std::nullopt;
  return mode == "one_hot" ? CategoryMode::one_hot
         : mode == "count" ? CategoryMode::count
                           : CategoryMode::multi_hot;
}

std::unique_ptr<Layer> make_category_encoding(ConfigObject& c, const std::string& name) {
  if (!c.has("num_tokens")) throw ConfigError(c.path_of("num_tokens"), "required key is missing");
  const std::int64_t tokens = c.positive_int("num_tokens");
  return std::make_unique<CategoryEncoding>(name, tokens,
                                            *read_category_mode(c, "multi_hot", false));
}

// bin_boundaries ascending (Keras 3 writes an adapted layer's there); num_bins, when given too,
// must be their count plus one; null boundaries are adapt()'s to compute, which Tandem does not.
std::unique_ptr<Layer> make_discretization(ConfigObject& c, const std::string& name) {
  const nlohmann::json* given = c.find("bin_boundaries");
  const nlohmann::json* bins = c.find("num_bins");
  if (!given)
    throw ConfigError(c.path_of("bin_boundaries"),
                      "null: the boundaries are Keras' adapt()'s to compute (num_bins " +
                          (bins ? bins->dump() : std::string("null")) +
                          "), which Tandem does not do; give them (Keras 3 writes an adapted "
                          "layer's boundaries in its config)");
  if (!given->is_array())
    throw ConfigError(c.path_of("bin_boundaries"),
                      "expected a list of ascending numbers, got " + given->dump());
  std::vector<float> boundaries;
  for (std::size_t i = 0; i < given->size(); ++i) {
    const nlohmann::json& b = (*given)[i];
    const std::string at = c.path_of("bin_boundaries") + "[" + std::to_string(i) + "]";
    if (!b.is_number() || !std::isfinite(b.get<double>()))
      throw ConfigError(at, "expected a finite number, got " + b.dump());
    boundaries.push_back(b.get<float>());
    if (i > 0 && boundaries[i] < boundaries[i - 1])
      throw ConfigError(at, b.dump() +
                                " is below the boundary before it: bin_boundaries must "
                                "ascend");
  }
  if (bins && c.positive_int("num_bins") != static_cast<std::int64_t>(boundaries.size()) + 1)
    throw ConfigError(c.path_of("num_bins"),
                      bins->dump() + " bins, but " + std::to_string(boundaries.size()) +
                          " bin_boundaries make " + std::to_string(boundaries.size() + 1));
  const double epsilon = c.number_in("epsilon", 0.01, 0.0, 1.0);  // adapt()'s: unused here
  return std::make_unique<Discretization>(name, std::move(boundaries),
                                          read_category_mode(c, "int", true), epsilon);
}

std::unique_ptr<Layer> make_rescaling(ConfigObject& c, const std::string& name) {
  const auto scalar = [&](const char* key, double fallback) {
    const nlohmann::json* v = c.find(key);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      throw ConfigError(c.path_of(key),
                        "expected a finite number (Tandem takes a scalar), got " + v->dump());
    return v->get<double>();
  };
  const double scale = scalar("scale", 1.0);
  if (!c.has("scale")) throw ConfigError(c.path_of("scale"), "required key is missing");
  return std::make_unique<Rescaling>(name, scale, scalar("offset", 0.0));
}

// ZeroPadding2D's padding and Cropping2D's cropping: n, [rows, cols] or [[top, bottom],
// [left, right]], each >= 0.
// A border amount (padding, cropping): an integer from 0 to 2^20, at `path`.
std::int64_t read_amount(const nlohmann::json& e, const std::string& path) {
  if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() > (1 << 20))
    throw ConfigError(path, "expected a non-negative integer, got " + e.dump());
  return e.get<std::int64_t>();
}

Borders read_borders(ConfigObject& c, const char* key, std::int64_t fallback) {
  const nlohmann::json* v = c.find(key);
  if (!v) return {fallback, fallback, fallback, fallback};
  const std::string path = c.path_of(key);
  if (v->is_number()) {
    const std::int64_t n = read_amount(*v, path);
    return {n, n, n, n};
  }
  if (v->is_array() && v->size() == 2) {
    const nlohmann::json &rows = (*v)[0], &cols = (*v)[1];
    if (rows.is_array() && cols.is_array() && rows.size() == 2 && cols.size() == 2)
      return {read_amount(rows[0], path + "[0][0]"), read_amount(rows[1], path + "[0][1]"),
              read_amount(cols[0], path + "[1][0]"), read_amount(cols[1], path + "[1][1]")};
    if (!rows.is_array() && !cols.is_array()) {
      const std::int64_t r = read_amount(rows, path + "[0]"), k = read_amount(cols, path + "[1]");
      return {r, r, k, k};
    }
  }
  throw ConfigError(path, "expected n, [rows, cols] or [[top, bottom], [left, right]], got " +
                              v->dump());
}

// ZeroPadding1D's padding and Cropping1D's cropping: n, or [left, right] (Keras' int or tuple).
std::pair<std::int64_t, std::int64_t> read_sequence_borders(ConfigObject& c, const char* key,
                                                            std::int64_t fallback) {
  const nlohmann::json* v = c.find(key);
  if (!v) return {fallback, fallback};
  const std::string path = c.path_of(key);
  if (v->is_number()) {
    const std::int64_t n = read_amount(*v, path);
    return {n, n};
  }
  if (v->is_array() && v->size() == 2)
    return {read_amount((*v)[0], path + "[0]"), read_amount((*v)[1], path + "[1]")};
  throw ConfigError(path, "expected n or [left, right], got " + v->dump());
}

std::unique_ptr<Layer> make_zero_padding1d(ConfigObject& c, const std::string& name) {
  const auto [left, right] = read_sequence_borders(c, "padding", 1);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<SequenceBorder>(name, true, left, right);
}

std::unique_ptr<Layer> make_cropping1d(ConfigObject& c, const std::string& name) {
  const auto [left, right] = read_sequence_borders(c, "cropping", 1);
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<SequenceBorder>(name, false, left, right);
}

std::unique_ptr<Layer> make_up_sampling1d(ConfigObject& c, const std::string& name) {
  return std::make_unique<UpSampling1D>(name, read_single(c, "size", 2)[1]);
}

std::unique_ptr<Layer> make_repeat_vector(ConfigObject& c, const std::string& name) {
  return std::make_unique<RepeatVector>(name, c.positive_int("n"));
}

// Keras' dims: a permutation of the per-sample axes, counted from 1.
std::unique_ptr<Layer> make_permute(ConfigObject& c, const std::string& name) {
  const nlohmann::json& dims = c.at("dims");
  const std::string path = c.path_of("dims");
  if (!dims.is_array() || dims.empty() || dims.size() > 8)
    throw ConfigError(path,
                      "expected a list of the per-sample axes (1, 2, ...) in their new "
                      "order, got " +
                          dims.dump());
  std::vector<int> order;
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const nlohmann::json& d = dims[i];
    const auto n = static_cast<std::int64_t>(dims.size());
    if (!d.is_number_integer() || d.get<std::int64_t>() < 1 || d.get<std::int64_t>() > n ||
        seen[static_cast<std::size_t>(d.get<std::int64_t>() - 1)])
      throw ConfigError(
          path + "[" + std::to_string(i) + "]",
          "expected each axis from 1 to " + std::to_string(n) + " once, got " + dims.dump());
    seen[static_cast<std::size_t>(d.get<std::int64_t>() - 1)] = true;
    order.push_back(static_cast<int>(d.get<std::int64_t>() - 1));
  }
  return std::make_unique<Permute>(name, order);
}

std::unique_ptr<Layer> make_zero_padding2d(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<ImageBorder>(name, true, read_borders(c, "padding", 1));
}

std::unique_ptr<Layer> make_cropping2d(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<ImageBorder>(name, false, read_borders(c, "cropping", 0));
}

// ZeroPadding3D's padding and Cropping3D's cropping: n, [depth, rows, cols] or
// [[before, after] of depth, of rows, of cols] (Keras' int, tuple of 3 or tuple of 3 pairs).
VolumeBorders read_volume_borders(ConfigObject& c, const char* key, std::int64_t fallback) {
  const nlohmann::json* v = c.find(key);
  VolumeBorders b{};
  if (!v) {
    for (auto& axis : b) axis = {fallback, fallback};
    return b;
  }
  const std::string path = c.path_of(key);
  if (v->is_number()) {
    const std::int64_t n = read_amount(*v, path);
    for (auto& axis : b) axis = {n, n};
    return b;
  }
  bool pairs = v->is_array() && v->size() == 3, numbers = pairs;
  for (std::size_t a = 0; v->is_array() && a < v->size(); ++a) {
    pairs = pairs && (*v)[a].is_array() && (*v)[a].size() == 2;
    numbers = numbers && !(*v)[a].is_array();
  }
  if (!pairs && !numbers)
    throw ConfigError(path,
                      "expected n, [depth, rows, cols] or [[before, after] of depth, of "
                      "rows, of cols], got " +
                          v->dump());
  for (std::size_t a = 0; a < 3; ++a) {
    const std::string at = path + "[" + std::to_string(a) + "]";
    if (numbers) {
      const std::int64_t n = read_amount((*v)[a], at);
      b[a] = {n, n};
    } else {
      b[a] = {read_amount((*v)[a][0], at + "[0]"), read_amount((*v)[a][1], at + "[1]")};
    }
  }
  return b;
}

std::unique_ptr<Layer> make_zero_padding3d(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<VolumeBorder>(name, true, read_volume_borders(c, "padding", 1));
}

std::unique_ptr<Layer> make_cropping3d(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<VolumeBorder>(name, false, read_volume_borders(c, "cropping", 0));
}

std::unique_ptr<Layer> make_up_sampling3d(ConfigObject& c, const std::string& name) {
  const Triple size = read_triple(c, "size", Triple{2, 2, 2});
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<UpSampling3D>(name, size);
}

std::unique_ptr<Layer> make_up_sampling2d(ConfigObject& c, const std::string& name) {
  const Pair size = read_pair(c, "size", Pair{2, 2});
  c.one_of("data_format", "channels_last", {"channels_last"});
  c.one_of("interpolation", "nearest", {"nearest"});
  return std::make_unique<UpSampling2D>(name, size[0], size[1]);
}

std::unique_ptr<Layer> make_max_pooling2d(ConfigObject& c, const std::string& name) {
  return make_pooling2d(c, name, PoolKind::max);
}

std::unique_ptr<Layer> make_average_pooling2d(ConfigObject& c, const std::string& name) {
  return make_pooling2d(c, name, PoolKind::average);
}

template <int kSpatialAxes>
std::unique_ptr<Layer> make_global_average_pooling(ConfigObject& c, const std::string& name) {
  c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<GlobalAveragePooling>(name, kSpatialAxes, c.get_bool("keepdims", false));
}

// Keras 3 BatchNormalization, plus the tf.keras keys (axis as [n], renorm, fused, ...).
std::unique_ptr<Layer> make_batch_normalization(ConfigObject& c, const std::string& name) {
  BatchNormalizationOptions o;
  o.axis = read_last_axis(c);
  o.momentum = c.number_in("momentum", 0.99, 0.0, 1.0);
  o.epsilon = read_epsilon(c, 1e-3);
  o.center = c.get_bool("center", true);
  o.scale = c.get_bool("scale", true);
  const std::pair<const char*, Initializer*> inits[] = {
      {"beta_initializer", &o.beta_initializer},
      {"gamma_initializer", &o.gamma_initializer},
      {"moving_mean_initializer", &o.moving_mean_initializer},
      {"moving_variance_initializer", &o.moving_variance_initializer}};
  for (const auto& [key, init] : inits)
    if (const auto* v = c.find(key)) *init = parse_initializer(*v, c.path_of(key));
  o.synchronized = c.get_bool("synchronized", false);
  if (c.get_bool("renorm", false))
    throw ConfigError(c.path_of("renorm"), "batch renormalization is not supported by Tandem");
  c.get_number("renorm_momentum", 0.99);  // only used with renorm
  c.get_bool("fused", false);             // an implementation choice of tf.keras, no effect
  require_null(c, {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                   "renorm_clipping", "virtual_batch_size", "adjustment"});
  return std::make_unique<BatchNormalization>(name, o);
}

std::unique_ptr<Layer> make_reshape(ConfigObject& c, const std::string& name) {
  const auto dims = c.get_int_list("target_shape", false);
  Shape target;
  bool inferred = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = *dims[i];
    const std::string path = c.path_of("target_shape") + "[" + std::to_string(i) + "]";
    if (d == -1 && inferred) throw ConfigError(path, "only one dimension may be -1");
    if (d == -1)
      inferred = true;
    else if (d <= 0)
      throw ConfigError(path, "expected a positive dimension or -1, got " + std::to_string(d));
    target.push_back(d);
  }
  return std::make_unique<Reshape>(name, target);
}

std::unique_ptr<Layer> make_embedding(ConfigObject& c, const std::string& name) {
  EmbeddingOptions o;
  o.input_dim = c.positive_int("input_dim");
  o.output_dim = c.positive_int("output_dim");
  if (const auto* k = c.find("embeddings_initializer"))
    o.embeddings_initializer = parse_initializer(*k, c.path_of("embeddings_initializer"));
  o.mask_zero = c.get_bool("mask_zero", false);
  if (c.has("input_length"))
    o.input_length = c.positive_int("input_length");
  else
    c.ignore({"input_length"});
  require_null(c, {"lora_rank", "lora_alpha", "quantization_config"});
  if (const auto* v = c.find("embeddings_regularizer"))
    o.embeddings_regularizer =
        WeightRegularizer(parse_regularizer(*v, c.path_of("embeddings_regularizer")));
  if (const auto* v = c.find("embeddings_constraint"))
    o.embeddings_constraint =
        WeightConstraint(parse_constraint(*v, c.path_of("embeddings_constraint")));
  return std::make_unique<Embedding>(name, o);
}

// A recurrent layer's activation and recurrent_activation: an element-wise kind (Keras' default
// when absent; null is linear, as Keras reads None).
ActivationKind read_cell_activation(ConfigObject& c, const std::string& key,
                                    ActivationKind fallback) {
  if (!c.given(key)) return fallback;
  const ActivationKind kind = read_activation(c, key);
  if (kind == ActivationKind::softmax || kind == ActivationKind::log_softmax)
    throw ConfigError(c.path_of(key), "a recurrent cell needs an element-wise activation, got " +
                                          activation_name(kind));
  return kind;
}

// What Keras' RNN layers accept and Tandem runs differently or not at all: the same results
// (unroll, implementation), or a ConfigError naming the key (states carried over between
// batches, time-major inputs).
void read_recurrent_flags(ConfigObject& c) {
  if (c.get_bool("stateful", false))
    throw ConfigError(c.path_of("stateful"),
                      "states carried from batch to batch are not supported by Tandem (batches "
                      "are shuffled and split across devices); set it to false");
  if (c.get_bool("time_major", false))
    throw ConfigError(c.path_of("time_major"),
                      "Tandem reads sequences as (batch, steps, features); set it to false");
  c.get_bool("unroll", false);                // the same arithmetic either way
  c.int_in("implementation", 2, 1, 2);        // Keras 2's kernel layout choice: the same
}

std::unique_ptr<Layer> make_masking(ConfigObject& c, const std::string& name) {
  const double value = c.get_number("mask_value", 0.0);
  if (!std::isfinite(value)) throw ConfigError(c.path_of("mask_value"), "expected a finite number");
  return std::make_unique<Masking>(name, static_cast<float>(value));
}

// A recurrent cell's keys (its units, activations, weights, dropout, seed) into `o`: the keys of
// an LSTM layer's config, or of an LSTMCell's inside an RNN's.
void read_cell_keys(ConfigObject& c, RecurrentOptions& o) {
  o.units = c.positive_int("units");
  o.activation = read_cell_activation(c, "activation", ActivationKind::tanh);
  if (o.kind != RecurrentKind::simple_rnn)
    o.recurrent_activation =
        read_cell_activation(c, "recurrent_activation", ActivationKind::sigmoid);
  o.use_bias = c.get_bool("use_bias", true);
  if (o.kind == RecurrentKind::lstm) o.unit_forget_bias = c.get_bool("unit_forget_bias", true);
  if (o.kind == RecurrentKind::gru) o.reset_after = c.get_bool("reset_after", true);
  o.dropout = c.number_in("dropout", 0.0, 0.0, 1.0, false, true);
  o.recurrent_dropout = c.number_in("recurrent_dropout", 0.0, 0.0, 1.0, false, true);
  o.seed = read_seed(c);
  read_weight_keys(c, "kernel", o.kernel_initializer, o.kernel_regularizer, o.kernel_constraint);
  read_weight_keys(c, "recurrent", o.recurrent_initializer, o.recurrent_regularizer,
                   o.recurrent_constraint);
  read_weight_keys(c, "bias", o.bias_initializer, o.bias_regularizer, o.bias_constraint);
}

// An RNN layer's keys over the steps (what it returns, their order, the flags Keras' RNN takes).
void read_sequence_keys(ConfigObject& c, RecurrentOptions& o) {
  o.return_sequences = c.get_bool("return_sequences", false);
  o.return_state = c.get_bool("return_state", false);
  o.go_backwards = c.get_bool("go_backwards", false);
  o.zero_output_for_mask = c.get_bool("zero_output_for_mask", false);
  read_recurrent_flags(c);
}

std::unique_ptr<Recurrent> read_recurrent(ConfigObject& c, const std::string& name,
                                          RecurrentKind kind) {
  RecurrentOptions o;
  o.kind = kind;
  read_cell_keys(c, o);
  read_sequence_keys(c, o);
  return std::make_unique<Recurrent>(name, o);
}

// The config object of an entry ({"class_name", "config"} and the keys Keras 3 writes beside them:
// module, registered_name, build_config), the entry finished. Throws ConfigError at the config's
// path unless it is an object.
const nlohmann::json& entry_config(ConfigObject& entry) {
  entry.ignore({"module", "registered_name", "build_config"});
  const nlohmann::json& config = entry.at("config");
  entry.finish();
  if (!config.is_object())
    throw ConfigError(entry.path_of("config"), "expected an object, got " + json_type_name(config));
  return config;
}

// A cell's entry ({"class_name": "LSTMCell", "config": {...}}) as its layer's options: the
// cell's keys read at its config, its name kept for its weights'.
RecurrentOptions read_cell_entry(ConfigObject& entry) {
  const std::string cls = entry.get_string("class_name");
  const std::map<std::string, RecurrentKind> kinds{{"SimpleRNNCell", RecurrentKind::simple_rnn},
                                                   {"LSTMCell", RecurrentKind::lstm},
                                                   {"GRUCell", RecurrentKind::gru}};
  if (!kinds.count(cls))
    throw ConfigError(entry.path_of("class_name"),
                      "Tandem's RNN takes an LSTMCell, GRUCell, SimpleRNNCell or StackedRNNCells "
                      "of them, got '" +
                          cls + "' (a cell written in Python cannot be read)");
  const nlohmann::json& config = entry_config(entry);
  RecurrentOptions o;
  o.kind = kinds.at(cls);
  ConfigObject cell(config, entry.path_of("config"));
  o.rnn_cell = cell.has("name") ? cell.get_string("name") : recurrent_cell_name(o.kind);
  cell.ignore({"trainable", "dtype"});
  cell.int_in("implementation", 2, 1, 2);  // Keras 2's kernel layout choice: the same
  read_cell_keys(cell, o);
  cell.finish();
  return o;
}

// RNN over StackedRNNCells: each cell's layer, all over every step but the last, which returns
// what the RNN returns (nn/stacked_rnn.hpp).
std::unique_ptr<Layer> make_stacked_rnn(ConfigObject& c, ConfigObject& entry,
                                        const std::string& name) {
  const nlohmann::json& config = entry_config(entry);
  ConfigObject stack(config, entry.path_of("config"));
  const std::string stack_name =
      stack.has("name") ? stack.get_string("name") : std::string("stacked_rnn_cells");
  stack.ignore({"trainable", "dtype"});
  const nlohmann::json& list = stack.at("cells");
  if (!list.is_array() || list.empty())
    throw ConfigError(stack.path_of("cells"),
                      "expected a list of one or more cells, got " + list.dump());
  RecurrentOptions flags;
  read_sequence_keys(c, flags);
  if (flags.return_state)
    throw ConfigError(c.path_of("return_state"),
                      "the final states of stacked cells are not supported by Tandem; set it to "
                      "false (or write the cells as layers one after the other, the last with "
                      "return_state)");
  std::vector<std::unique_ptr<Recurrent>> cells;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigObject one(list[i], stack.path_of("cells") + "[" + std::to_string(i) + "]");
    if (!list[i].is_object())
      throw ConfigError(stack.path_of("cells") + "[" + std::to_string(i) + "]",
                        "expected a cell, {\"class_name\", \"config\"}, got " + list[i].dump());
    RecurrentOptions o = read_cell_entry(one);
    const bool last = i + 1 == list.size();
    o.return_sequences = last ? flags.return_sequences : true;
    o.go_backwards = i == 0 && flags.go_backwards;
    o.zero_output_for_mask = last && flags.zero_output_for_mask;
    cells.push_back(std::make_unique<Recurrent>(name + "/" + *o.rnn_cell, o));
  }
  stack.finish();
  return std::make_unique<StackedRnn>(name, std::move(cells), stack_name);
}

// Keras' RNN over one of its cells (LSTMCell, GRUCell, SimpleRNNCell): the cell's layer under the
// class name RNN, the cell's keys read at cell.config; over StackedRNNCells, make_stacked_rnn.
std::unique_ptr<Layer> make_rnn(ConfigObject& c, const std::string& name) {
  ConfigObject entry(c.at("cell"), c.path_of("cell"));
  if (entry.get_string("class_name") == "StackedRNNCells") return make_stacked_rnn(c, entry, name);
  RecurrentOptions o = read_cell_entry(entry);
  read_sequence_keys(c, o);
  return std::make_unique<Recurrent>(name, o);
}

// ConvLSTM1D, ConvLSTM2D, ConvLSTM3D (kRank spatial axes): the convolution's window, sizes
// int or a list of kRank, and the LSTM's keys.
template <std::size_t kRank>
std::unique_ptr<Layer> make_conv_lstm(ConfigObject& c, const std::string& name) {
  using Sizes = std::array<std::int64_t, kRank>;
  const auto listed = [](const Sizes& a) { return std::vector<std::int64_t>(a.begin(), a.end()); };
  Sizes ones;
  ones.fill(1);
  ConvLstmOptions o;
  o.rank = static_cast<int>(kRank);
  o.filters = c.positive_int("filters");
  o.kernel_size = listed(read_sizes<kRank>(c, "kernel_size", std::nullopt));
  o.strides = listed(read_sizes<kRank>(c, "strides", ones));
  o.padding = read_padding(c);
  c.one_of("data_format", "channels_last", {"channels_last"});
  o.dilation_rate = listed(read_sizes<kRank>(c, "dilation_rate", ones));
  check_dilation_with_strides(c, *std::max_element(o.strides.begin(), o.strides.end()),
                              *std::max_element(o.dilation_rate.begin(), o.dilation_rate.end()));
  o.activation = read_cell_activation(c, "activation", ActivationKind::tanh);
  o.recurrent_activation =
      read_cell_activation(c, "recurrent_activation", ActivationKind::sigmoid);
  o.use_bias = c.get_bool("use_bias", true);
  o.unit_forget_bias = c.get_bool("unit_forget_bias", true);
  o.return_sequences = c.get_bool("return_sequences", false);
  o.go_backwards = c.get_bool("go_backwards", false);
  o.return_state = c.get_bool("return_state", false);
  read_recurrent_flags(c);
  o.dropout = c.number_in("dropout", 0.0, 0.0, 1.0, false, true);
  o.recurrent_dropout = c.number_in("recurrent_dropout", 0.0, 0.0, 1.0, false, true);
  o.seed = read_seed(c);
  read_weight_keys(c, "kernel", o.kernel_initializer, o.kernel_regularizer, o.kernel_constraint);
  read_weight_keys(c, "recurrent", o.recurrent_initializer, o.recurrent_regularizer,
                   o.recurrent_constraint);
  read_weight_keys(c, "bias", o.bias_initializer, o.bias_regularizer, o.bias_constraint);
  return std::make_unique<ConvLstm>(name, o);
}

template <RecurrentKind Kind>
std::unique_ptr<Layer> make_recurrent(ConfigObject& c, const std::string& name) {
  return read_recurrent(c, name, Kind);
}

// A recurrent layer a Bidirectional wraps, from its entry ({"class_name", "config"}) at `key`,
// named as Keras names it (direction_layer_name: "forward_lstm"); with `flip`, go_backwards
// turned over.
std::unique_ptr<Recurrent> make_wrapped(ConfigObject& c, const char* key, const std::string& prefix,
                                        bool flip) {
  ConfigObject entry(c.at(key), c.path_of(key));
  const std::string cls = entry.get_string("class_name");
  const std::map<std::string, RecurrentKind> kinds{{"SimpleRNN", RecurrentKind::simple_rnn},
                                                   {"LSTM", RecurrentKind::lstm},
                                                   {"GRU", RecurrentKind::gru}};
  if (!kinds.count(cls) && cls != "RNN")
    throw ConfigError(entry.path_of("class_name"),
                      "Bidirectional wraps a SimpleRNN, LSTM, GRU or RNN, got '" + cls + "'");
  entry.ignore({"name"});
  nlohmann::json config = entry_config(entry);
  const std::string inner = config.contains("name") && config["name"].is_string()
                                ? config["name"].get<std::string>()
                                : layer_registry().at(cls).default_name;
  if (flip) {
    const nlohmann::json& b = config.contains("go_backwards") ? config["go_backwards"] : nullptr;
    config["go_backwards"] = !(b.is_boolean() && b.get<bool>());
  }
  ConfigObject lc(config, entry.path_of("config"));
  lc.ignore({"name", "trainable", "dtype"});
  require_null(lc, {"activity_regularizer"});
  const std::string layer_name = direction_layer_name(prefix, inner);
  std::unique_ptr<Recurrent> layer;
  if (cls == "RNN") {  // over one cell: the cell's layer (a stack of cells has no one direction)
    ConfigObject cell(lc.at("cell"), lc.path_of("cell"));
    if (cell.get_string("class_name") == "StackedRNNCells")
      throw ConfigError(cell.path_of("class_name"),
                        "Bidirectional wraps an RNN over one cell, got StackedRNNCells, which "
                        "Tandem does not run in two directions");
    RecurrentOptions o = read_cell_entry(cell);
    read_sequence_keys(lc, o);
    layer = std::make_unique<Recurrent>(layer_name, o);
  } else {
    layer = read_recurrent(lc, layer_name, kinds.at(cls));
  }
  lc.finish();
  return layer;
}

std::unique_ptr<Layer> make_bidirectional(ConfigObject& c, const std::string& name) {
  if (c.given("merge_mode") && !c.find("merge_mode"))
    throw ConfigError(c.path_of("merge_mode"),
                      "null (the two directions' outputs as two tensors) is not supported by "
                      "Tandem; choose concat, sum, ave or mul");
  const MergeMode mode =
      *merge_mode_named(c.one_of("merge_mode", "concat", {"concat", "sum", "ave", "mul"}));
  auto forward = make_wrapped(c, "layer", "forward_", false);
  const bool own_backward = c.has("backward_layer");
  if (!own_backward) c.ignore({"backward_layer"});
  auto backward = own_backward ? make_wrapped(c, "backward_layer", "backward_", false)
                               : make_wrapped(c, "layer", "backward_", true);
  if (own_backward && backward->goes_backwards() == forward->goes_backwards())
    throw ConfigError(c.path_of("backward_layer"),
                      "its go_backwards must be the opposite of the forward layer's");
  if (own_backward && backward->returns_sequences() != forward->returns_sequences())
    throw ConfigError(c.path_of("backward_layer"),
                      "its return_sequences must be the forward layer's");
  if (own_backward && backward->returns_state() != forward->returns_state())
    throw ConfigError(c.path_of("backward_layer"), "its return_state must be the forward layer's");
  if (own_backward && backward->state_count() != forward->state_count())
    throw ConfigError(c.path_of("backward_layer"),
                      "its states must be the forward layer's (an LSTM's two, a GRU's one)");
  return std::make_unique<Bidirectional>(name, std::move(forward), std::move(backward), mode,
                                         own_backward);
}

// The layer a TimeDistributed wraps, from its entry ({"class_name", "config"}) at "layer": any
// layer of one input whose rows are samples of their own, named as its config names it. The
// wrapper's trainable and dtype policy govern it; what Keras computes otherwise is refused at its
// key.
// The layer a wrapper holds under "layer" (TimeDistributed, SpectralNormalization), made by the
// registry from its entry: one input, no whole model.
struct WrappedLayer {
  std::unique_ptr<Layer> layer;
  std::string class_name, class_path;  // its class and where the config names it
};

WrappedLayer read_wrapped_layer(ConfigObject& c, const std::string& wrapper) {
  ConfigObject entry(c.at("layer"), c.path_of("layer"));
  const std::string cls = entry.get_string("class_name");
  if (is_model_entry(c.at("layer")))
    throw ConfigError(entry.path_of("class_name"),
                      wrapper +
                          " of a whole model is not supported by Tandem; wrap its "
                          "layers one by one");
  const auto it = layer_registry().find(cls);
  if (it == layer_registry().end())
    throw ConfigError(entry.path_of("class_name"), "unknown layer class '" + cls + "'");
  entry.ignore({"name"});
  const nlohmann::json& config = entry_config(entry);
  ConfigObject lc(config, entry.path_of("config"));
  const std::string inner_name = lc.get_string("name", it->second.default_name);
  lc.ignore({"trainable", "dtype", "batch_input_shape", "batch_shape", "input_shape", "input_dim",
             "batch_size"});
  require_null(lc, {"activity_regularizer"});
  auto inner = it->second.make(lc, inner_name);
  lc.finish();
  if (inner->takes_several_inputs())
    throw ConfigError(entry.path_of("class_name"),
                      wrapper + " wraps a layer of one input, got " + cls);
  return {std::move(inner), cls, entry.path_of("class_name")};
}

std::unique_ptr<Layer> make_time_distributed(ConfigObject& c, const std::string& name) {
  WrappedLayer wrapped = read_wrapped_layer(c, "TimeDistributed");
  const std::string& cls = wrapped.class_name;
  // Keras 2 reshapes the steps into the batch (its statistics over every step), Keras 3 calls the
  // layer step by step (statistics per step): the same layer outside TimeDistributed normalizes
  // over every axis but the channels already.
  if (cross_replica_statistics_of(*wrapped.layer))
    throw ConfigError(wrapped.class_path,
                      "TimeDistributed of a " + cls +
                          " is not supported by Tandem (Keras 2 and 3 "
                          "take its batch statistics differently); a " +
                          cls +
                          " outside "
                          "TimeDistributed normalizes over the steps and the batch");
  return std::make_unique<TimeDistributed>(name, std::move(wrapped.layer));
}

// SpectralNormalization: the wrapped layer, power_iterations (a positive integer, default 1).
std::unique_ptr<Layer> make_spectral_normalization(ConfigObject& c, const std::string& name) {
  WrappedLayer wrapped = read_wrapped_layer(c, "SpectralNormalization");
  const auto iterations = static_cast<int>(c.positive_int("power_iterations", 1));
  return std::make_unique<SpectralNormalization>(name, std::move(wrapped.layer), iterations);
}

}  // namespace

const std::map<std::string, LayerClass>& layer_registry() {
  static const std::map<std::string, LayerClass> registry = {
      {"Dense", {"dense", make_dense}},
      {"EinsumDense", {"einsum_dense", make_einsum_dense}},
      {"Activation", {"activation", make_activation}},
      {"ReLU", {"re_lu", make_relu}},
      {"ELU", {"elu", make_elu}},
      {"PReLU", {"p_re_lu", make_prelu}},
      {"UnitNormalization", {"unit_normalization", make_unit_normalization}},
      {"Identity",
       {"identity",
        [](ConfigObject&, const std::string& name) -> std::unique_ptr<Layer> {
          return std::make_unique<Identity>(name);
        }}},
      {"ActivityRegularization", {"activity_regularization", make_activity_regularization}},
      {"LeakyReLU", {"leaky_re_lu", make_leaky_relu}},
      {"Softmax", {"softmax", make_softmax}},
      {"Flatten", {"flatten", make_flatten}},
      {"Add", {"add", make_merge<Add>}},
      {"Subtract", {"subtract", make_merge<Subtract>}},
      {"Multiply", {"multiply", make_merge<Multiply>}},
      {"Average", {"average", make_merge<Average>}},
      {"Maximum", {"maximum", make_extremum<true>}},
      {"Minimum", {"minimum", make_extremum<false>}},
      {"LayerNormalization", {"layer_normalization", make_layer_normalization}},
      {"GroupNormalization", {"group_normalization", make_group_normalization}},
      {"RMSNormalization", {"rms_normalization", make_rms_normalization}},
      {"AdaptiveAveragePooling1D", {"adaptive_average_pooling1d", make_adaptive_pooling<false, 1>}},
      {"AdaptiveAveragePooling2D", {"adaptive_average_pooling2d", make_adaptive_pooling<false, 2>}},
      {"AdaptiveAveragePooling3D", {"adaptive_average_pooling3d", make_adaptive_pooling<false, 3>}},
      {"AdaptiveMaxPooling1D", {"adaptive_max_pooling1d", make_adaptive_pooling<true, 1>}},
      {"AdaptiveMaxPooling2D", {"adaptive_max_pooling2d", make_adaptive_pooling<true, 2>}},
      {"AdaptiveMaxPooling3D", {"adaptive_max_pooling3d", make_adaptive_pooling<true, 3>}},
      {"MultiHeadAttention", {"multi_head_attention", make_multi_head_attention}},
      {"GroupedQueryAttention", {"grouped_query_attention", make_grouped_query_attention}},
      {"Attention", {"attention", make_attention}},
      {"AdditiveAttention", {"additive_attention", make_additive_attention}},
      {"PositionEmbedding", {"position_embedding", make_position_embedding}},
      {"Concatenate", {"concatenate", make_concatenate}},
      {"Dot", {"dot", make_dot}},
      {"Dropout", {"dropout", make_dropout<false>}},
      {"AlphaDropout", {"alpha_dropout", make_dropout<true>}},
      {"SpatialDropout1D", {"spatial_dropout1d", make_spatial_dropout<1>}},
      {"SpatialDropout2D", {"spatial_dropout2d", make_spatial_dropout<2>}},
      {"SpatialDropout3D", {"spatial_dropout3d", make_spatial_dropout<3>}},
      {"GaussianNoise", {"gaussian_noise", make_gaussian_noise<GaussianNoise::Kind::additive>}},
      {"GaussianDropout",
       {"gaussian_dropout", make_gaussian_noise<GaussianNoise::Kind::multiplicative>}},
      {"RandomFlip", {"random_flip", make_random_flip}},
      {"RandomTranslation", {"random_translation", make_random_translation}},
      {"RandomRotation", {"random_rotation", make_random_rotation}},
      {"RandomZoom", {"random_zoom", make_random_zoom}},
      {"RandomCrop", {"random_crop", make_random_crop}},
      {"Resizing", {"resizing", make_resizing}},
      {"CenterCrop", {"center_crop", make_center_crop}},
      {"RandomContrast", {"random_contrast", make_random_contrast}},
      {"RandomBrightness", {"random_brightness", make_random_brightness}},
      {"Conv1D", {"conv1d", make_conv1d}},
      {"Conv2D", {"conv2d", make_convolution<false>}},
      {"Conv3D", {"conv3d", make_convolution<true>}},
      {"Conv2DTranspose", {"conv2d_transpose", make_conv2d_transpose}},
      {"Conv3DTranspose", {"conv3d_transpose", make_conv3d_transpose}},
      {"Conv1DTranspose", {"conv1d_transpose", make_conv1d_transpose}},
      {"DepthwiseConv1D", {"depthwise_conv1d", make_depthwise_conv1d}},
      {"SeparableConv1D", {"separable_conv1d", make_separable_conv1d}},
      {"DepthwiseConv2D", {"depthwise_conv2d", make_depthwise_conv2d}},
      {"SeparableConv2D", {"separable_conv2d", make_separable_conv2d}},
      {"MaxPooling1D", {"max_pooling1d", make_pooling1d<PoolKind::max>}},
      {"AveragePooling1D", {"average_pooling1d", make_pooling1d<PoolKind::average>}},
      {"GlobalMaxPooling1D", {"global_max_pooling1d", make_global_max_pooling<1>}},
      {"GlobalMaxPooling2D", {"global_max_pooling2d", make_global_max_pooling<2>}},
      {"GlobalMaxPooling3D", {"global_max_pooling3d", make_global_max_pooling<3>}},
      {"Rescaling", {"rescaling", make_rescaling}},
      {"CategoryEncoding", {"category_encoding", make_category_encoding}},
      {"Discretization", {"discretization", make_discretization}},
      {"IntegerLookup", {"integer_lookup", make_integer_lookup}},
      {"Normalization", {"normalization", make_normalization}},
      {"ZeroPadding2D", {"zero_padding2d", make_zero_padding2d}},
      {"Cropping2D", {"cropping2d", make_cropping2d}},
      {"UpSampling2D", {"up_sampling2d", make_up_sampling2d}},
      {"ZeroPadding3D", {"zero_padding3d", make_zero_padding3d}},
      {"Cropping3D", {"cropping3d", make_cropping3d}},
      {"UpSampling3D", {"up_sampling3d", make_up_sampling3d}},
      {"MaxPooling2D", {"max_pooling2d", make_max_pooling2d}},
      {"AveragePooling2D", {"average_pooling2d", make_average_pooling2d}},
      {"MaxPooling3D", {"max_pooling3d", make_pooling3d<PoolKind::max>}},
      {"AveragePooling3D", {"average_pooling3d", make_pooling3d<PoolKind::average>}},
      {"GlobalAveragePooling1D", {"global_average_pooling1d", make_global_average_pooling<1>}},
      {"GlobalAveragePooling2D", {"global_average_pooling2d", make_global_average_pooling<2>}},
      {"GlobalAveragePooling3D", {"global_average_pooling3d", make_global_average_pooling<3>}},
      {"BatchNormalization", {"batch_normalization", make_batch_normalization}},
      {"Reshape", {"reshape", make_reshape}},
      {"Embedding", {"embedding", make_embedding}},
      {"SimpleRNN", {"simple_rnn", make_recurrent<RecurrentKind::simple_rnn>}},
      {"LSTM", {"lstm", make_recurrent<RecurrentKind::lstm>}},
      {"RNN", {"rnn", make_rnn}},
      {"GRU", {"gru", make_recurrent<RecurrentKind::gru>}},
      {"Bidirectional", {"bidirectional", make_bidirectional}},
      {"ConvLSTM1D", {"conv_lstm1d", make_conv_lstm<1>}},
      {"ConvLSTM2D", {"conv_lstm2d", make_conv_lstm<2>}},
      {"ConvLSTM3D", {"conv_lstm3d", make_conv_lstm<3>}},
      {"Masking", {"masking", make_masking}},
      {"TimeDistributed", {"time_distributed", make_time_distributed}},
      {"SpectralNormalization", {"spectral_normalization", make_spectral_normalization}},
      {"ZeroPadding1D", {"zero_padding1d", make_zero_padding1d}},
      {"Cropping1D", {"cropping1d", make_cropping1d}},
      {"UpSampling1D", {"up_sampling1d", make_up_sampling1d}},
      {"RepeatVector", {"repeat_vector", make_repeat_vector}},
      {"Permute", {"permute", make_permute}},
      {"TandemIndexing", {"tandem_indexing", make_indexing_layer}},
      {"TandemReduction", {"tandem_reduction", make_reduction_layer}},
  };
  return registry;
}

}  // namespace tandem::nn
