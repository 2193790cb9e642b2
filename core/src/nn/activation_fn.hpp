// Keras activation names for the Activation layer and the `activation` argument of Dense and
// Conv2D. The functions themselves are the backends' (Backend::activation_forward/backward).
#pragma once

#include <string>
#include <vector>

#include "backend/activation_kind.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

using ActivationKind = backend::ActivationKind;

/// What `kind` is under Keras 2's definitions (hard_sigmoid: clip(0.2 x + 0.5, 0, 1); every
/// other activation is the same in both).
constexpr ActivationKind keras2_definition(ActivationKind kind) {
  return kind == ActivationKind::hard_sigmoid ? ActivationKind::hard_sigmoid_keras2 : kind;
}

/// Parses a Keras activation name ("relu", "silu" = "swish", null/"linear"); throws ConfigError
/// naming `path` and listing the known names.
ActivationKind parse_activation(const std::string& name, const std::string& path);
std::string activation_name(ActivationKind kind);
std::vector<std::string> activation_names();

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
