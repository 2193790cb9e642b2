#include "nn/dtype_policy.hpp"

#include <set>

#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

// The first layer naming a mixed policy, if any.
std::optional<std::size_t> first_policy_layer(const Model& model) {
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    if (!model.layer_dtype_policy(i).empty()) return i;
  return std::nullopt;
}

Precision policy_of_layer(const Model& model, std::size_t i) {
  const std::string policy = model.layer_dtype_policy(i);
  return policy.empty() ? Precision::fp32 : precision_of_policy(policy, "model");
}

}  // namespace

std::optional<Precision> model_policy_precision(const Model& model, const std::string& model_path) {
  const auto first = first_policy_layer(model);
  if (!first) return std::nullopt;
  const Precision p = policy_of_layer(model, *first);
  for (std::size_t i = *first + 1; i < model.layer_count(); ++i) {
    const std::string policy = model.layer_dtype_policy(i);
    if (!policy.empty() && precision_of_policy(policy, model_path) != p)
      throw ConfigError(model_path, "layer '" + model.layer(i).name() + "' has the dtype policy '" +
                                        policy + "' but layer '" + model.layer(*first).name() +
                                        "' has '" + model.layer_dtype_policy(*first) +
                                        "'; a model computes in one mixed precision");
  }
  return p;
}

Precision effective_precision(const Model& model, Precision run, bool run_given) {
  const auto policy = model_policy_precision(model, "model");
  if (!policy) return run;
  if (run_given && run != *policy) {
    const std::size_t i = *first_policy_layer(model);
    throw ConfigError("precision", "'" + precision_name(run) + "' contradicts the model: layer '" +
                                       model.layer(i).name() + "' has the dtype policy '" +
                                       model.layer_dtype_policy(i) + "' (" +
                                       precision_name(*policy) +
                                       "); drop the run's precision (--set precision=null) or the layers' "
                                       "policies");
  }
  return *policy;
}

std::vector<Precision> layer_precisions(const Model& model, Precision run) {
  const bool by_policy = first_policy_layer(model).has_value();
  std::vector<Precision> out;
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    out.push_back(by_policy ? policy_of_layer(model, i) : run);
  return out;
}

nlohmann::json read_dtype_policy(ConfigObject& c) {
  using nlohmann::json;
  const json* d = c.find("dtype");
  if (!d || d->is_null()) return json();
  std::string name;
  // Keras 2's Policy, Keras 3's DTypePolicy (FloatDTypePolicy before Keras 3.4).
  static const std::set<std::string> policy_classes = {"Policy", "DTypePolicy", "FloatDTypePolicy"};
  if (d->is_string()) {
    name = d->get<std::string>();
  } else if (d->is_object() && d->contains("class_name") && (*d)["class_name"].is_string() &&
             !policy_classes.count((*d)["class_name"].get<std::string>())) {
    throw ConfigError(c.path_of("dtype") + ".class_name",
                      "expected a Keras dtype policy (Policy, DTypePolicy or FloatDTypePolicy), "
                      "got " +
                          (*d)["class_name"].dump());
  } else if (d->is_object() && d->contains("config") && (*d)["config"].is_object() &&
             (*d)["config"].contains("name") && (*d)["config"]["name"].is_string()) {
    name = (*d)["config"]["name"].get<std::string>();
    // What Keras writes around a policy (Keras 3 adds its module), and nothing else: a key
    // Tandem would not read is refused as everywhere in a config.
    for (const auto& [key, value] : d->items())
      if (key != "class_name" && key != "config" && key != "module" && key != "registered_name")
        throw ConfigError(c.path_of("dtype") + "." + key, "unknown key in a dtype policy");
    for (const auto& [key, value] : (*d)["config"].items())
      if (key != "name")
        throw ConfigError(c.path_of("dtype") + ".config." + key,
                          "unknown key in a dtype policy's config (it has only a name)");
  } else
    throw ConfigError(c.path_of("dtype"),
                      "expected a dtype policy name or a Keras policy "
                      "object with config.name, got " +
                          d->dump());
  return is_mixed(precision_of_policy(name, c.path_of("dtype"))) ? *d : json();
}

std::string policy_name_of(const nlohmann::json& policy) {
  if (policy.is_null()) return "";
  return policy.is_string() ? policy.get<std::string>()
                            : policy["config"]["name"].get<std::string>();
}

}  // namespace tandem::nn
