// PluginHost: finds, checks and loads callback plugins (docs/design.md contract 5).
//
// Search path, in order: folders given by the run config ("plugin_paths"), $TANDEM_PLUGIN_PATH
// (colon-separated), <libdir>/tandem/plugins next to the loaded libtandem (installed trees, found
// from the library's own location, so the tree is relocatable), and the build tree's plugin folder.
// The last two are the built-in folders: a name they hold always loads from them (a folder of the
// config or the environment cannot replace the built-in `events` or `checkpoint`; to run your own
// build of one, name its file by path).
// A plugin named "checkpoint" lives in a file "tandem-checkpoint.so"; a config may also name a
// plugin by the path of its file. Every failure is a PluginError naming the plugin, its path and
// the fix. Thread-compatible: use one host from one thread.
#pragma once

#include <filesystem>
#include <functional>
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

/// A plugin file on the search path, not loaded yet.
struct PluginCandidate {
  std::string name;             // from the file name: tandem-<name>.so
  std::filesystem::path path;
  std::string refused;          // non-empty: it is not used, and why (a built-in has its name)
};

class PluginHost {
 public:
  explicit PluginHost(std::vector<std::filesystem::path> extra_dirs = {});
  const std::vector<std::filesystem::path>& search_path() const { return dirs_; }
  /// Whether search_path()[i] is a built-in folder.
  bool is_builtin_folder(std::size_t i) const { return i >= builtin_from_; }

  /// Every "tandem-*.so" on the search path, in search-path order, the first of a name only; a
  /// file in a user folder named like a built-in plugin comes with `refused` set.
  std::vector<PluginCandidate> candidates() const;
  /// Reads one plugin file's record: by default load_file(path).record, in this process.
  using Probe = std::function<PluginRecord(const std::filesystem::path&)>;
  /// The candidates, each loaded and checked by `probe` (whose errors, and a name that does not
  /// match the file name, become the record's error instead of throwing).
  std::vector<PluginRecord> list(const Probe& probe = {}) const;
  /// By name (searched) or by file path (contains '/' or ends in ".so").
  LoadedPlugin load(const std::string& name_or_path) const;
  LoadedPlugin load_file(const std::filesystem::path& path) const;

 private:
  std::vector<std::filesystem::path> dirs_;
  std::size_t builtin_from_ = 0;  // dirs_[builtin_from_...] are the built-in folders
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
