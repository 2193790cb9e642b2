// Private (nn): which precision each layer of a model computes in — the run's "precision" key
// and Keras' per-layer dtype policies (Model::layer_dtype_policy) brought together.
//
// A model whose layers carry no mixed policy computes every layer in the run's precision. A
// model where some do (a Keras config saved under mixed_bfloat16 / mixed_float16) computes those
// layers in their policy and the rest in float32, as Keras does (a final softmax layer kept at
// "float32" is the usual case); the run's precision is then the policy's, and a run config
// naming another precision is an error. Plain functions of their arguments; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/model.hpp"
#include "util/config_object.hpp"
#include "util/internal_api.hpp"
#include "util/precision.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

/// A layer's or a model's `dtype`: absent, null, or a Keras dtype policy — its name
/// ("float32", "mixed_bfloat16", "mixed_float16"), Keras 2's {"class_name": "Policy", "config":
/// {"name": ...}} or Keras 3's DTypePolicy object. Returns the entry as given for a mixed
/// policy, else null. Throws ConfigError at the key for anything else.
nlohmann::json read_dtype_policy(ConfigObject& c);

/// The policy name of what read_dtype_policy() kept ("" for none).
std::string policy_name_of(const nlohmann::json& policy);

/// The mixed precision the model's layers name (bf16 or fp16), or none. Throws ConfigError at
/// `model_path` when two layers name different mixed policies.
std::optional<Precision> model_policy_precision(const Model& model, const std::string& model_path);

/// The precision a run computes in: the model's policy if its layers name one, else `run`.
/// `run_given`: whether the run config set "precision" itself; if it did and contradicts the
/// model's policy, throws ConfigError at "precision" naming the layer and both.
Precision effective_precision(const Model& model, Precision run, bool run_given);

/// Per layer, the precision it computes in for a run in `run` (see the header comment).
std::vector<Precision> layer_precisions(const Model& model, Precision run);

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
