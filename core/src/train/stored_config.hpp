// The run config stored in a checkpoint is data, not instructions (docs/security.md). A checkpoint
// may come from anyone, and the parts of a run config that run code or write files — plugins
// named by path, plugin folders, callback options that name files outside the run folder — would
// let a crafted checkpoint run a library or overwrite a file of the user's. `tandem train
// --resume CKPT`, `evaluate` and `predict` without a run config therefore use the stored config
// only after untrusted_stored_config() has left those parts out (and say so), unless the user
// passes --trust-checkpoint-config. Stateless; thread-safe.
#pragma once

#include <set>
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

/// The plugins Tandem ships (plugins/, installed in its built-in folder): a stored config names
/// no other (by name, a plugin folder of the user's — TANDEM_PLUGIN_PATH — would have the
/// checkpoint pick which of its libraries runs). tests/e2e checks it against the built-in folder.
const std::set<std::string>& shipped_plugins();

/// Leaves out of the stored run config `stored`: "plugin_paths"; each callback whose plugin is
/// not one Tandem ships (named by a path, or by a name a plugin folder of the user's would
/// resolve); backup_and_restore (its backup_dir is relative to the working folder); each
/// callback with an option (at any depth) whose string value is an absolute path, climbs out of
/// the run folder with "..", or holds a template field with a slash in its format spec.
/// Everything else (model, data, optimizer, callbacks of shipped plugins writing inside the run
/// folder) is kept as it is.
ReviewedConfig untrusted_stored_config(const nlohmann::json& stored);

}  // namespace tandem

TANDEM_INTERNAL_API_END
