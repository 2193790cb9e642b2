// Private (nn): the Keras keys of a layer with a kernel and a bias (Dense, EinsumDense): their
// initializers, regularizers and constraints, written back into a config and handed to the
// replicas as the weights' rules. A plain value.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/constraint.hpp"
#include "nn/initializer.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/regularizer.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

struct KernelBiasKeys {
  Initializer kernel_initializer{"glorot_uniform", std::nullopt, 0};
  Initializer bias_initializer{"zeros", std::nullopt, 0};
  WeightConstraint kernel_constraint, bias_constraint;
  WeightRegularizer kernel_regularizer, bias_regularizer;

  /// Sets the six keys, and activity_regularizer null (the Model's), in `config`.
  void write(nlohmann::json& config) const {
    config["kernel_initializer"] = kernel_initializer.config();
    config["bias_initializer"] = bias_initializer.config();
    config["kernel_regularizer"] = kernel_regularizer.config();
    config["bias_regularizer"] = bias_regularizer.config();
    config["activity_regularizer"] = nullptr;
    config["kernel_constraint"] = kernel_constraint.config();
    config["bias_constraint"] = bias_constraint.config();
  }

  /// The kernel's rules, then the bias's when the layer has one (`bias` not null). The rules
  /// point into this value: it must outlive them.
  std::vector<RuledWeight> ruled(Parameter& kernel, Parameter* bias) const {
    std::vector<RuledWeight> out{{&kernel, &kernel_constraint, &kernel_regularizer}};
    if (bias) out.push_back({bias, &bias_constraint, &bias_regularizer});
    return out;
  }
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
