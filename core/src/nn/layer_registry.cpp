#include "nn/layer_registry.hpp"

#include "nn/activation.hpp"
#include "nn/dense.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "tandem/error.hpp"

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

std::unique_ptr<Layer> make_dense(ConfigObject& c, const std::string& name) {
  DenseOptions o;
  o.units = c.positive_int("units");
  o.activation = read_activation(c, "activation");
  o.use_bias = c.get_bool("use_bias", true);
  if (const auto* k = c.find("kernel_initializer"))
    o.kernel_initializer = parse_initializer(*k, c.path_of("kernel_initializer"));
  if (const auto* b = c.find("bias_initializer"))
    o.bias_initializer = parse_initializer(*b, c.path_of("bias_initializer"));
  require_null(c, {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                   "kernel_constraint", "bias_constraint", "lora_rank"});
  return std::make_unique<Dense>(name, o);
}

std::unique_ptr<Layer> make_activation(ConfigObject& c, const std::string& name) {
  return std::make_unique<Activation>(
      name, parse_activation(c.get_string("activation"), c.path_of("activation")));
}

std::unique_ptr<Layer> make_flatten(ConfigObject& c, const std::string& name) {
  std::string fmt = c.one_of("data_format", "channels_last", {"channels_last"});
  return std::make_unique<Flatten>(name);
}

std::unique_ptr<Layer> make_dropout(ConfigObject& c, const std::string& name) {
  double rate = c.number_in("rate", 0.0, 0.0, 1.0, false, true);
  if (!c.has("rate")) throw ConfigError(c.path_of("rate"), "required key is missing");
  std::optional<std::uint64_t> seed;
  if (c.has("seed"))
    seed = static_cast<std::uint64_t>(c.get_int("seed"));
  else
    c.ignore({"seed"});
  require_null(c, {"noise_shape"});
  return std::make_unique<Dropout>(name, rate, seed);
}

}  // namespace

const std::map<std::string, LayerClass>& layer_registry() {
  static const std::map<std::string, LayerClass> registry = {
      {"Dense", {"dense", make_dense}},
      {"Activation", {"activation", make_activation}},
      {"Flatten", {"flatten", make_flatten}},
      {"Dropout", {"dropout", make_dropout}},
  };
  return registry;
}

}  // namespace tandem::nn
