#include "nn/dtype_policy.hpp"

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

}  // namespace tandem::nn
