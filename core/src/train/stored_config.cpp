// untrusted_stored_config (stored_config.hpp).
#include "train/stored_config.hpp"

#include <filesystem>
#include <optional>

namespace tandem {

namespace {

using nlohmann::json;

// Whether `text`, read as a path, leaves the folder it is relative to: absolute ("/etc/x",
// "~/x" is not expanded and stays inside) or with a ".." component ("../x", "a/../../x").
bool leaves_the_folder(const std::string& text) {
  const std::filesystem::path path(text);
  if (path.is_absolute()) return true;
  for (const auto& part : path)
    if (part == "..") return true;
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
