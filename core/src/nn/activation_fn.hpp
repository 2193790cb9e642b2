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

/// Parses a Keras activation name ("relu", "silu" = "swish", null/"linear"); throws ConfigError
/// naming `path` and listing the known names.
ActivationKind parse_activation(const std::string& name, const std::string& path);
std::string activation_name(ActivationKind kind);
std::vector<std::string> activation_names();

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
