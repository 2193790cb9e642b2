// The run config stored in a checkpoint is data, not instructions (docs/security.md). A checkpoint
// may come from anyone, and the parts of a run config that run code or write files — plugins
// named by path, plugin folders, callback options that name files outside the run folder — would
// let a crafted checkpoint run a library or overwrite a file of the user's. `tandem train
// --resume CKPT`, `evaluate` and `predict` without a run config therefore use the stored config
// only after untrusted_stored_config() has left those parts out (and say so), unless the user
// passes --trust-checkpoint-config. Stateless; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct ReviewedConfig {
  nlohmann::json config;              // what may be used: the stored config less what was left out
  std::vector<std::string> left_out;  // one line per part left out, naming it and why
};

/// Leaves out of the stored run config `stored`: "plugin_paths"; each callback whose plugin is
/// named by a path (a built-in plugin is named by its name); each callback with an option (at any
/// depth) whose string value is an absolute path or climbs out of the run folder with "..".
/// Everything else (model, data, optimizer, callbacks of built-in plugins writing inside the run
/// folder) is kept as it is.
ReviewedConfig untrusted_stored_config(const nlohmann::json& stored);

}  // namespace tandem

TANDEM_INTERNAL_API_END
