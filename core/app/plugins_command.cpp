#include "app/plugins_command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/standard_output.hpp"
#include "tandem/error.hpp"
#include "app/plugin_child.hpp"
#include "plugin/plugin_host.hpp"

namespace tandem::app {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct PluginsOptions {
  bool json = false;
  std::vector<std::string> paths;
};

json to_json(const PluginHost& host, const std::vector<PluginRecord>& records) {
  json plugins = json::array();
  for (const auto& r : records) {
    json p = {{"name", r.info.name}, {"path", r.path.string()}, {"ok", r.error.empty()}};
    if (r.error.empty()) {
      p["version"] = r.info.version;
      p["description"] = r.info.description;
      p["options_schema"] = r.info.options_schema;
    } else {
      p["error"] = r.error;
    }
    plugins.push_back(std::move(p));
  }
  json dirs = json::array();
  for (const auto& d : host.search_path()) dirs.push_back(d.string());
  return {{"schema", 1},
          {"plugin_abi_version", TANDEM_PLUGIN_ABI_VERSION},
          {"search_path", dirs},
          {"plugins", plugins}};
}

std::string to_table(const PluginHost& host, const std::vector<PluginRecord>& records) {
  const std::vector<std::string> head = {"NAME", "VERSION", "PATH", "DESCRIPTION"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : records) {
    if (r.error.empty())
      rows.push_back({r.info.name, r.info.version, r.path.string(), r.info.description});
    else
      rows.push_back({r.info.name, "-", r.path.string(), "BROKEN: see below"});
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      s += cells[c];
      if (c + 1 < cells.size()) s += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    return s + "\n";
  };
  std::string out;
  if (records.empty()) {
    out += "No plugins found.\n";
  } else {
    out += line(head);
    for (const auto& row : rows) out += line(row);
  }
  bool any_broken = false;
  for (const auto& r : records) {
    if (r.error.empty()) continue;
    if (!any_broken) out += "\nBroken plugins (they cannot be used until fixed):\n";
    any_broken = true;
    out += "  " + r.info.name + ": " + r.error + "\n";
  }
  out += "\nSearch path (first match of a name wins; built-in names load from a built-in "
         "folder):\n";
  const auto& dirs = host.search_path();
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    std::error_code ec;
    out += "  " + dirs[i].string() + (host.is_builtin_folder(i) ? "  (built-in)" : "") +
           (fs::is_directory(dirs[i], ec) ? "" : "  (missing)") + "\n";
  }
  return out;
}

int run_plugins(const PluginsOptions& opt) {
  std::vector<fs::path> dirs;
  for (const auto& p : opt.paths) dirs.push_back(fs::absolute(p).lexically_normal());
  const PluginHost host(std::move(dirs));
  const std::vector<PluginRecord> records = host.list(probe_plugin_in_child);
  write_stdout(opt.json ? to_json(host, records).dump(2) + "\n" : to_table(host, records));
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_plugins_command(CLI::App& app, std::function<int()>& selected) {
  auto opt = std::make_shared<PluginsOptions>();
  auto* cmd = app.add_subcommand("plugins", "List the callback plugins that run configs can name");
  cmd->footer(
      "Loads and checks every tandem-<name>.so on the search path: --path folders, then "
      "$TANDEM_PLUGIN_PATH (colon-separated), then the plugins installed with Tandem (built-in "
      "names always load from there). Each file is loaded in a child process, so a broken one "
      "cannot end the listing. Broken plugins are listed with their error. --json adds each "
      "plugin's options schema.\n"
      "Exit codes: 0 (also when some plugins are broken).");
  cmd->add_flag("--json", opt->json, "Print one JSON document, with each plugin's options schema");
  cmd->add_option("--path", opt->paths, "Also search this folder first (repeatable)")
      ->type_name("DIR");
  cmd->callback([opt, &selected] { selected = [opt] { return run_plugins(*opt); }; });
}

}  // namespace tandem::app
