// Private: the optimizers a run config can name, for listings (`tandem optimizers`, tandem-gui's
// optimizer choice). make_optimizer() (tandem/optimizer.hpp) stays the one that builds them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct OptimizerCatalogEntry {
  std::string class_name;            // as make_optimizer() reports it: "Adam"
  std::vector<std::string> aliases;  // other spellings make_optimizer() accepts: "adam"
  nlohmann::json config;             // its Keras config at the defaults (Optimizer::config())
};

/// The class names make_optimizer() accepts, each with its lowercase alias, in the order a user is
/// offered them: the one table of names (make_optimizer() resolves through it). Thread-safe.
const std::vector<std::pair<std::string, std::string>>& optimizer_names();

/// Every optimizer make_optimizer() knows, in the order a user is offered them. Each config comes
/// from make_optimizer() itself, so the defaults are never restated here. Thread-safe.
std::vector<OptimizerCatalogEntry> optimizer_catalog();

}  // namespace tandem

TANDEM_INTERNAL_API_END
