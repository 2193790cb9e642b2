#include "plugin/plugin_host.hpp"

#include <boost/dll/shared_library.hpp>
#include <cstdlib>
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

}  // namespace

PluginHost::PluginHost(std::vector<fs::path> extra_dirs) : dirs_(std::move(extra_dirs)) {
  if (const char* env = std::getenv("TANDEM_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs_.emplace_back(item);
  }
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
    check_schema(out.record.info.options_schema, "options schema");
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
  for (const auto& dir : dirs_) {
    const fs::path file = dir / (kPrefix + name_or_path + kSuffix);
    if (!fs::exists(file)) continue;
    LoadedPlugin p = load_file(file);
    if (p.record.info.name != name_or_path)
      throw PluginError(file.string() + " calls itself '" + p.record.info.name + "', not '" +
                        name_or_path + "'; rename the file tandem-" + p.record.info.name + ".so");
    return p;
  }
  std::string searched;
  for (const auto& d : dirs_) searched += "\n  " + d.string();
  throw PluginError("no plugin named '" + name_or_path + "' (looked for tandem-" + name_or_path +
                    ".so in:" + searched +
                    "\n). Run `tandem plugins` to list the plugins found, or add its folder to "
                    "TANDEM_PLUGIN_PATH or the config's \"plugin_paths\".");
}

std::vector<PluginRecord> PluginHost::list() const {
  std::vector<PluginRecord> out;
  std::set<std::string> seen;
  for (const auto& dir : dirs_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string f = entry.path().filename().string();
      if (f.starts_with(kPrefix) && f.ends_with(kSuffix)) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string stem = file.filename().string();
      const std::string name = stem.substr(7, stem.size() - 7 - 3);
      if (!seen.insert(name).second) continue;
      try {
        PluginRecord record = load_file(file).record;
        if (record.info.name != name)
          throw PluginError(file.string() + " calls itself '" + record.info.name + "', not '" +
                            name + "'; rename the file tandem-" + record.info.name + ".so");
        out.push_back(std::move(record));
      } catch (const std::exception& e) {
        PluginRecord broken;
        broken.info.name = name;
        broken.path = file;
        broken.error = e.what();
        out.push_back(broken);
      }
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
