#include "nn/activation_fn.hpp"

#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

struct NamedKind {
  const char* name;
  ActivationKind kind;
};

constexpr NamedKind kNames[] = {{"linear", ActivationKind::linear},
                                {"relu", ActivationKind::relu},
                                {"tanh", ActivationKind::tanh},
                                {"sigmoid", ActivationKind::sigmoid},
                                {"softmax", ActivationKind::softmax},
                                {"gelu", ActivationKind::gelu},
                                {"elu", ActivationKind::elu},
                                {"selu", ActivationKind::selu},
                                {"softplus", ActivationKind::softplus},
                                {"softsign", ActivationKind::softsign},
                                {"swish", ActivationKind::swish},
                                {"silu", ActivationKind::swish},
                                {"exponential", ActivationKind::exponential},
                                {"leaky_relu", ActivationKind::leaky_relu},
                                {"hard_sigmoid", ActivationKind::hard_sigmoid},
                                {"hard_swish", ActivationKind::hard_swish},
                                {"hard_silu", ActivationKind::hard_swish},
                                {"mish", ActivationKind::mish},
                                {"log_softmax", ActivationKind::log_softmax}};

}  // namespace

ActivationKind parse_activation(const std::string& name, const std::string& path) {
  for (const auto& n : kNames)
    if (name == n.name) return n.kind;
  std::string list;
  for (const auto& n : kNames) list += (list.empty() ? "" : ", ") + std::string(n.name);
  throw ConfigError(path, "unknown activation '" + name + "' (known: " + list + ")");
}

std::string activation_name(ActivationKind kind) {
  if (kind == ActivationKind::hard_sigmoid_keras2) return "hard_sigmoid";  // in a Keras 2 config
  for (const auto& n : kNames)
    if (n.kind == kind) return n.name;
  return "linear";
}

std::vector<std::string> activation_names() {
  std::vector<std::string> out;
  for (const auto& n : kNames) out.emplace_back(n.name);
  return out;
}

}  // namespace tandem::nn
