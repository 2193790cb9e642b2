// untrusted_stored_config (stored_config.hpp).
#include "train/stored_config.hpp"

#include <filesystem>
#include <optional>
#include <set>

namespace tandem {

const std::set<std::string>& shipped_plugins() {
  static const std::set<std::string> names = {"backup_and_restore",
                                              "checkpoint",
                                              "csv_logger",
                                              "early_stopping",
                                              "events",
                                              "lr_scheduler",
                                              "progress",
                                              "reduce_lr_on_plateau",
                                              "replica_stats",
                                              "swap_ema_weights",
                                              "terminate_on_nan"};
  return names;
}

namespace {

using nlohmann::json;

// Whether `text`, read as a path, leaves the folder it is relative to: absolute ("/etc/x",
// "~/x" is not expanded and stays inside), with a ".." component ("../x", "a/../../x"), or with a
// template field whose format spec holds a slash ("..{epoch:/>2}" formats to "../2": the text is
// checked, not what it formats to).
bool leaves_the_folder(const std::string& text) {
  const std::filesystem::path path(text);
  if (path.is_absolute()) return true;
  for (const auto& part : path)
    if (part == "..") return true;
  for (std::size_t open = text.find('{'); open != std::string::npos;
       open = text.find('{', open + 1)) {
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const std::string field = text.substr(open, close - open);
    if (field.find('/') != std::string::npos || field.find('\\') != std::string::npos) return true;
  }
  return false;
}

// The first option (a JSON path below "options") whose string value leaves the run folder.
std::optional<std::string> option_leaving_the_folder(const json& value, const std::string& where) {
  if (value.is_string()) {
    if (leaves_the_folder(value.get<std::string>())) return where + " = " + value.dump();
    return std::nullopt;
  }
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it)
      if (auto found = option_leaving_the_folder(it.value(), where + "." + it.key())) return found;
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      if (auto found = option_leaving_the_folder(value[i], where + "[" + std::to_string(i) + "]"))
        return found;
  }
  return std::nullopt;
}

bool named_by_path(const std::string& plugin) {
  return plugin.find('/') != std::string::npos ||
         (plugin.size() >= 3 && plugin.compare(plugin.size() - 3, 3, ".so") == 0);
}

// Why callback `cc` (callbacks[index]) must be left out, or nothing.
std::optional<std::string> reason_to_leave_out(const json& cc, std::size_t index) {
  const std::string where = "callbacks[" + std::to_string(index) + "]";
  if (!cc.is_object()) return std::nullopt;  // malformed: the config parser names it
  const json plugin = cc.value("plugin", json());
  if (plugin.is_string() && named_by_path(plugin.get<std::string>()))
    return where + " (plugin " + plugin.dump() + "): a plugin named by path runs that library";
  if (plugin.is_string() && !shipped_plugins().count(plugin.get<std::string>()))
    return where + " (plugin " + plugin.dump() +
           "): not a plugin Tandem ships; loading it runs a library of your plugin folders";
  // Keras' BackupAndRestore resolves backup_dir against the working folder, not the run folder.
  if (plugin == "backup_and_restore")
    return where +
           " (plugin \"backup_and_restore\"): its backup_dir is relative to the working "
           "folder, outside the run folder";
  if (cc.contains("options")) {
    if (auto option = option_leaving_the_folder(cc["options"], where + ".options"))
      return where + (plugin.is_string() ? " (plugin " + plugin.dump() + ")" : "") + ": " +
             *option + " names a file outside the run folder";
  }
  return std::nullopt;
}

}  // namespace

ReviewedConfig untrusted_stored_config(const json& stored) {
  ReviewedConfig out{stored, {}};
  json& config = out.config;
  if (!config.is_object()) return out;  // the config parser names what is wrong
  if (config.contains("plugin_paths")) {
    const json paths = config["plugin_paths"];
    config.erase("plugin_paths");
    if (!(paths.is_array() && paths.empty()))
      out.left_out.push_back("plugin_paths = " + paths.dump() + ": folders of plugin libraries");
  }
  auto callbacks = config.find("callbacks");
  if (callbacks == config.end() || !callbacks->is_array()) return out;
  json kept = json::array();
  for (std::size_t i = 0; i < callbacks->size(); ++i) {
    if (auto reason = reason_to_leave_out((*callbacks)[i], i))
      out.left_out.push_back(std::move(*reason));
    else
      kept.push_back((*callbacks)[i]);
  }
  *callbacks = std::move(kept);
  return out;
}

}  // namespace tandem
