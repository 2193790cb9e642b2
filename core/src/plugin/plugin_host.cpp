#include "plugin/plugin_host.hpp"

#include <boost/dll/shared_library.hpp>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "plugin/elf_check.hpp"
#include "plugin/options_schema.hpp"
#include "util/library_location.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "tandem-";
constexpr const char* kSuffix = ".so";

std::string where(const fs::path& path) {
  return " (" + path.string() + ")";
}

// "tandem-<name>.so" -> name.
std::string name_of(const fs::path& file) {
  const std::string f = file.filename().string();
  return f.substr(7, f.size() - 7 - 3);
}

std::string misnamed(const fs::path& file, const std::string& calls_itself,
                     const std::string& expected) {
  return file.string() + " calls itself '" + calls_itself + "', not '" + expected +
         "'; rename the file tandem-" + calls_itself + ".so";
}

}  // namespace

PluginHost::PluginHost(std::vector<fs::path> extra_dirs) : dirs_(std::move(extra_dirs)) {
  if (const char* env = std::getenv("TANDEM_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs_.emplace_back(item);
  }
  // A folder named twice (in the config and the environment) is searched once, where it first
  // comes.
  std::vector<fs::path> user;
  for (auto& dir : dirs_)
    if (std::find(user.begin(), user.end(), dir) == user.end()) user.push_back(std::move(dir));
  dirs_ = std::move(user);
  builtin_from_ = dirs_.size();
  const fs::path lib = detail::tandem_library_dir();
  if (!lib.empty()) dirs_.push_back(lib / "tandem" / "plugins");
#ifdef TANDEM_BUILD_PLUGIN_DIR
  // Only a libtandem that is still in its build tree looks in the build tree's plugin folder.
  if (detail::running_from_build_tree()) dirs_.emplace_back(TANDEM_BUILD_PLUGIN_DIR);
#endif
}

LoadedPlugin PluginHost::load_file(const fs::path& path) const {
  LoadedPlugin out;
  out.record.path = path;
  if (!fs::exists(path)) throw PluginError("plugin file " + path.string() + " does not exist");
  // dlopen trusts the headers: a truncated file would end the process with SIGBUS.
  if (const std::string problem = elf_problem(path); !problem.empty())
    throw PluginError("cannot load plugin " + path.string() + ": " + problem);
  auto lib = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  lib->load(path.string(), boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local,
            ec);
  if (ec || !lib->is_loaded()) {
    const char* why = dlerror();
    throw PluginError("cannot load plugin " + path.string() + ": " +
                      (why ? std::string(why) : ec.message()) +
                      ". Is it a shared library built for this machine?");
  }
  // The ABI check, through a plain C function, before any C++ symbol is touched.
  if (!lib->has("tandem_plugin_abi_version"))
    throw PluginError(path.string() +
                      " is not a Tandem plugin: it exports no tandem_plugin_abi_version(). "
                      "Plugins declare themselves with TANDEM_PLUGIN(MyPlugin).");
  const int abi = lib->get<int()>("tandem_plugin_abi_version")();
  if (abi != TANDEM_PLUGIN_ABI_VERSION)
    throw PluginError(path.string() + " was built for plugin ABI version " + std::to_string(abi) +
                      ", this Tandem uses version " + std::to_string(TANDEM_PLUGIN_ABI_VERSION) +
                      ". Rebuild the plugin against this Tandem's SDK.");
  if (!lib->has("tandem_plugin_factory"))
    throw PluginError(path.string() +
                      " has no tandem_plugin_factory alias; declare the plugin "
                      "with TANDEM_PLUGIN(MyPlugin)");
  std::shared_ptr<CallbackPlugin> raw;
  try {
    raw = lib->get_alias<std::shared_ptr<CallbackPlugin>()>("tandem_plugin_factory")();
    if (!raw) throw std::runtime_error("the factory returned nothing");
    out.record.info = raw->info();
    check_options_schema(out.record.info.options_schema, "options schema");
  } catch (const std::exception& e) {
    throw PluginError("plugin " + path.string() + " failed while starting: " + e.what());
  } catch (...) {
    throw PluginError("plugin " + path.string() +
                      " failed while starting: it threw something that is not a std::exception");
  }
  if (out.record.info.name.empty())
    throw PluginError("plugin " + path.string() + " reports an empty name");
  // The plugin object keeps the library loaded; the library is unloaded after it.
  out.plugin = std::shared_ptr<CallbackPlugin>(raw.get(), [raw, lib](CallbackPlugin*) mutable {
    raw.reset();
    lib.reset();
  });
  return out;
}

LoadedPlugin PluginHost::load(const std::string& name_or_path) const {
  if (name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 3 && name_or_path.ends_with(kSuffix)))
    return load_file(name_or_path);
  // The built-in folders first: a user folder cannot replace a built-in plugin.
  std::vector<fs::path> order(dirs_.begin() + static_cast<std::ptrdiff_t>(builtin_from_), dirs_.end());
  order.insert(order.end(), dirs_.begin(), dirs_.begin() + static_cast<std::ptrdiff_t>(builtin_from_));
  for (const auto& dir : order) {
    const fs::path file = dir / (kPrefix + name_or_path + kSuffix);
    if (!fs::exists(file)) continue;
    LoadedPlugin p = load_file(file);
    if (p.record.info.name != name_or_path)
      throw PluginError(misnamed(file, p.record.info.name, name_or_path));
    return p;
  }
  std::string searched;
  for (const auto& d : dirs_) searched += "\n  " + d.string();
  throw PluginError("no plugin named '" + name_or_path + "' (looked for tandem-" + name_or_path +
                    ".so in:" + searched +
                    "\n). Run `tandem plugins` to list the plugins found, or add its folder to "
                    "TANDEM_PLUGIN_PATH or the config's \"plugin_paths\".");
}

std::vector<PluginCandidate> PluginHost::candidates() const {
  std::vector<std::vector<fs::path>> files_of(dirs_.size());
  std::map<std::string, fs::path> builtin;  // name -> its file in the first built-in folder
  for (std::size_t i = 0; i < dirs_.size(); ++i) {
    std::error_code ec;
    if (!fs::is_directory(dirs_[i], ec)) continue;
    for (const auto& entry : fs::directory_iterator(dirs_[i], ec)) {
      const std::string f = entry.path().filename().string();
      if (f.starts_with(kPrefix) && f.ends_with(kSuffix) && f.size() > 10)
        files_of[i].push_back(entry.path());
    }
    std::sort(files_of[i].begin(), files_of[i].end());
    if (is_builtin_folder(i))
      for (const auto& file : files_of[i]) builtin.try_emplace(name_of(file), file);
  }
  std::vector<PluginCandidate> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < dirs_.size(); ++i) {
    for (const auto& file : files_of[i]) {
      const std::string name = name_of(file);
      if (!is_builtin_folder(i) && builtin.count(name)) {
        out.push_back({name, file,
                       "not used: '" + name + "' is a built-in plugin (" +
                           builtin[name].string() +
                           "), which a plugin folder cannot replace; name this file by path in "
                           "\"plugin\" to use it"});
        continue;
      }
      if (seen.insert(name).second) out.push_back({name, file, ""});
    }
  }
  return out;
}

std::vector<PluginRecord> PluginHost::list(const Probe& probe) const {
  std::vector<PluginRecord> out;
  for (const auto& candidate : candidates()) {
    try {
      if (!candidate.refused.empty()) throw PluginError(candidate.refused);
      PluginRecord record = probe ? probe(candidate.path) : load_file(candidate.path).record;
      if (record.info.name != candidate.name)
        throw PluginError(misnamed(candidate.path, record.info.name, candidate.name));
      out.push_back(std::move(record));
    } catch (const std::exception& e) {
      PluginRecord broken;
      broken.info.name = candidate.name;
      broken.path = candidate.path;
      broken.error = e.what();
      out.push_back(broken);
    }
  }
  return out;
}

std::shared_ptr<Callback> LoadedPlugin::create(const nlohmann::json& options,
                                               const CallbackSetup& setup) const {
  const nlohmann::json checked =
      validate_options(record.info.options_schema, options, setup.config_path + ".options");
  std::shared_ptr<Callback> raw;
  try {
    raw = plugin->create(checked, setup);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError("plugin '" + record.info.name + "'" + where(record.path) +
                      " failed to create its callback for " + setup.config_path + ": " + e.what());
  } catch (...) {
    throw PluginError("plugin '" + record.info.name + "'" + where(record.path) +
                      " failed to create its callback for " + setup.config_path +
                      ": it threw something that is not a std::exception");
  }
  if (!raw)
    throw PluginError("plugin '" + record.info.name + "'" + where(record.path) +
                      " created no callback for " + setup.config_path);
  auto keep = plugin;  // the library stays loaded while the callback lives
  return std::shared_ptr<Callback>(raw.get(), [raw, keep](Callback*) mutable {
    raw.reset();
    keep.reset();
  });
}

}  // namespace tandem
