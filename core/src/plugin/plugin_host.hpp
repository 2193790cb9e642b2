// PluginHost: finds, checks and loads callback plugins (docs/design.md contract 5).
//
// Search path, in order: folders given by the run config ("plugin_paths"), $TANDEM_PLUGIN_PATH
// (colon-separated), <libdir>/tandem/plugins next to the loaded libtandem (installed trees, found
// from the library's own location, so the tree is relocatable), and the build tree's plugin folder.
// A plugin named "checkpoint" lives in a file "tandem-checkpoint.so"; a config may also name a
// plugin by the path of its file. Every failure is a PluginError naming the plugin, its path and
// the fix. Thread-compatible: use one host from one thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// A plugin could not be used: exit code 2 (bad configuration or installation).
class PluginError : public Error {
 public:
  explicit PluginError(const std::string& what) : Error(ExitCode::bad_input, what) {}
};

struct PluginRecord {
  PluginInfo info;
  std::filesystem::path path;
  std::string error;  // non-empty when the file is there but cannot be used (tandem plugins)
};

/// A loaded plugin. Objects it makes keep its library loaded; so does this handle.
struct LoadedPlugin {
  PluginRecord record;
  std::shared_ptr<CallbackPlugin> plugin;
  /// Validates `options` against the plugin's schema (path: config_path + ".options") and makes a
  /// callback that keeps the library loaded. Errors from the plugin name it and its path.
  std::shared_ptr<Callback> create(const nlohmann::json& options, const CallbackSetup& setup) const;
};

class PluginHost {
 public:
  explicit PluginHost(std::vector<std::filesystem::path> extra_dirs = {});
  const std::vector<std::filesystem::path>& search_path() const { return dirs_; }

  /// Every "tandem-*.so" on the search path (the first of a name wins), loaded and checked; the
  /// ones that fail carry their error instead of throwing.
  std::vector<PluginRecord> list() const;
  /// By name (searched) or by file path (contains '/' or ends in ".so").
  LoadedPlugin load(const std::string& name_or_path) const;
  LoadedPlugin load_file(const std::filesystem::path& path) const;

 private:
  std::vector<std::filesystem::path> dirs_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
