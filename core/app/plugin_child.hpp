// Plugin code run in a child process: `tandem plugins` (which loads every plugin file it finds)
// and `tandem check` (which tandem-gui runs on every edit of a config) load plugins in a child
// `tandem plugin-child` process, never in their own, so that a broken or hostile library — a
// truncated file, a constructor that crashes, loops or calls exit() — cannot take the listing or
// the check down with it, and is reported as a plugin error naming the file (docs/security.md).
// `tandem train` loads its plugins in its own process: it runs them.
//
// The protocol: the parent writes one JSON request to the child's standard input and closes it;
// the child answers on standard output with JSON lines — {"checking": "callbacks[1]", "plugin":
// ...} before it loads each plugin of a check, so that a crash can be pinned on one — and a last
// line {"result": ...} or {"error": {"code": 2, "message": ...}}. Its standard error is the
// parent's. Thread-compatible: each call spawns and waits for its own child.
#pragma once

#include <filesystem>
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "plugin/plugin_host.hpp"
#include "train/run.hpp"
#include "train/run_config.hpp"

namespace tandem::app {

/// The record of the plugin file `path` (info and options schema), read by a child process.
/// Throws PluginError when the child reports an error, crashes or does not answer in time.
PluginRecord probe_plugin_in_child(const std::filesystem::path& path);

/// check_plugins (train/run.hpp) in a child process: the plugins summary, or the error the child
/// reports (a ConfigError or PluginError, exit code 2, as in-process), or a PluginError naming the
/// callback whose plugin crashed the child.
nlohmann::json check_plugins_in_child(const std::vector<CallbackConfig>& callbacks,
                                      const std::vector<std::filesystem::path>& plugin_paths,
                                      const RunLength& length = {});

/// The hidden `tandem plugin-child` command that answers both.
void add_plugin_child_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
