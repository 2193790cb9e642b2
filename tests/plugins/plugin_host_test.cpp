// PluginHost (docs/design.md contract 5): the search path, every failure case as a clear
// PluginError or ConfigError naming the plugin and its path (never a crash), the library's
// lifetime, and the same failures through `tandem train` and `tandem plugins`. The test-only plugins come from
// tests/plugins/bad_plugins/ and are built into TANDEM_TEST_PLUGIN_DIR, which is not on the
// default search path.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "plugins/plugin_test_support.hpp"
#include "tandem/error.hpp"
#include "plugin/options_schema.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

fs::path test_plugin_dir() {
  return TANDEM_TEST_PLUGIN_DIR;
}
fs::path test_plugin(const std::string& name) {
  return test_plugin_dir() / ("tandem-" + name + ".so");
}
fs::path builtin_plugin(const std::string& name) {
  return fs::path(TANDEM_BINARY_DIR) / "plugins" / ("tandem-" + name + ".so");
}

// The message of the PluginError (or other tandem::Error) that `f` throws; fails the test when
// it throws nothing or something else.
template <class E = PluginError, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return {};
}

// Whether the dynamic linker has `path` loaded in this process (RTLD_NOLOAD never loads it).
bool is_loaded(const fs::path& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return false;
  ::dlclose(handle);
  return true;
}
// The same seen through the process's memory map.
bool is_mapped(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const std::string canonical = fs::canonical(path).string();
  while (std::getline(maps, line))
    if (line.ends_with(canonical)) return true;
  return false;
}

class EnvGuard {
 public:
  EnvGuard(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// --- the search path ------------------------------------------------------------------------

TEST(PluginHost, SearchPathIsConfigThenEnvironmentThenInstalledThenBuildTree) {
  EnvGuard env("TANDEM_PLUGIN_PATH", "/env/one::/env/two");
  PluginHost host({"/config/a", "/config/b"});
  const auto& dirs = host.search_path();
  ASSERT_GE(dirs.size(), 5u);
  EXPECT_EQ(dirs[0], "/config/a");
  EXPECT_EQ(dirs[1], "/config/b");
  EXPECT_EQ(dirs[2], "/env/one");  // empty items are skipped
  EXPECT_EQ(dirs[3], "/env/two");
  // <libdir>/tandem/plugins next to the loaded libtandem, then the build tree's plugins/.
  EXPECT_EQ(dirs[4].filename(), "plugins");
  EXPECT_EQ(dirs[4].parent_path().filename(), "tandem");
  EXPECT_EQ(dirs.back(), fs::path(TANDEM_BINARY_DIR) / "plugins");
  for (const auto& d : dirs) EXPECT_NE(d, test_plugin_dir()) << "must not be searched by default";
}

TEST(PluginHost, LoadsABuiltInPluginByNameAndAnyPluginByPath) {
  PluginHost host;
  LoadedPlugin p = host.load("terminate_on_nan");
  EXPECT_EQ(p.record.info.name, "terminate_on_nan");
  EXPECT_EQ(p.record.path, builtin_plugin("terminate_on_nan"));
  EXPECT_TRUE(p.record.error.empty());
  EXPECT_EQ(p.record.info.options_schema["type"], "object");

  LoadedPlugin q = host.load(test_plugin("lifetime").string());
  EXPECT_EQ(q.record.info.name, "lifetime");
  EXPECT_EQ(host.load_file(test_plugin("lifetime")).record.info.version, "0.0.1");
}

TEST(PluginHost, ExtraFoldersComeFirstAndFindTestPluginsByName) {
  EXPECT_THAT(error_of([] { PluginHost().load("lifetime"); }),
              HasSubstr("no plugin named 'lifetime'"));
  PluginHost host({test_plugin_dir()});
  EXPECT_EQ(host.load("lifetime").record.path, test_plugin("lifetime"));
  EnvGuard env("TANDEM_PLUGIN_PATH", test_plugin_dir().string());
  EXPECT_EQ(PluginHost().load("lifetime").record.path, test_plugin("lifetime"));
}

// --- failure cases: each a PluginError naming the plugin's file, never a crash ----------------

TEST(PluginHost, UnknownNameListsWhereItLookedAndHowToFix) {
  const std::string msg = error_of([] { PluginHost({"/nowhere/x"}).load("no_such_plugin"); });
  EXPECT_THAT(msg, HasSubstr("no plugin named 'no_such_plugin'"));
  EXPECT_THAT(msg, HasSubstr("tandem-no_such_plugin.so"));
  EXPECT_THAT(msg, HasSubstr("/nowhere/x"));
  EXPECT_THAT(msg, HasSubstr((fs::path(TANDEM_BINARY_DIR) / "plugins").string()));
  EXPECT_THAT(msg, HasSubstr("tandem plugins"));
  EXPECT_THAT(msg, HasSubstr("TANDEM_PLUGIN_PATH"));
  EXPECT_THAT(msg, HasSubstr("plugin_paths"));
}

TEST(PluginHost, MissingFile) {
  const std::string msg = error_of([] { PluginHost().load("/nowhere/tandem-gone.so"); });
  EXPECT_THAT(msg, HasSubstr("/nowhere/tandem-gone.so"));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
}

TEST(PluginHost, FileThatIsNotASharedLibrary) {
  const fs::path file = scratch_dir("plugin-garbage") / "tandem-garbage.so";
  write_text(file, "this is not an ELF file\n");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr("cannot load plugin " + file.string()));
  EXPECT_THAT(msg, HasSubstr("shared library"));
}

TEST(PluginHost, SharedLibraryThatIsNotATandemPlugin) {
  const fs::path file = test_plugin("not_a_plugin");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr(file.string() + " is not a Tandem plugin"));
  EXPECT_THAT(msg, HasSubstr("tandem_plugin_abi_version"));
  EXPECT_THAT(msg, HasSubstr("TANDEM_PLUGIN(MyPlugin)"));
}

// wrong_abi's factory, info() and create() all abort the process: surviving the load proves the
// host refused it after calling only the plain C function tandem_plugin_abi_version().
TEST(PluginHost, OtherAbiVersionIsRefusedBeforeAnyCppSymbolIsTouched) {
  const fs::path file = test_plugin("wrong_abi");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr(file.string()));
  EXPECT_THAT(msg,
              HasSubstr("plugin ABI version " + std::to_string(TANDEM_PLUGIN_ABI_VERSION + 1)));
  EXPECT_THAT(msg,
              HasSubstr("this Tandem uses version " + std::to_string(TANDEM_PLUGIN_ABI_VERSION)));
  EXPECT_THAT(msg, HasSubstr("Rebuild the plugin"));
  // By name, and listed: the same refusal, no abort.
  EXPECT_THAT(error_of([] { PluginHost({test_plugin_dir()}).load("wrong_abi"); }),
              HasSubstr("plugin ABI version"));
  bool listed = false;
  for (const auto& r : PluginHost({test_plugin_dir()}).list())
    if (r.info.name == "wrong_abi") {
      listed = true;
      EXPECT_THAT(r.error, HasSubstr("plugin ABI version"));
    }
  EXPECT_TRUE(listed);
}

// ...and the factory alias really would abort if the host called it.
TEST(PluginHostDeathTest, TheWrongAbiFactoryAbortsWhenCalled) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path file = test_plugin("wrong_abi");
  EXPECT_DEATH(
      {
        boost::dll::shared_library lib(file.string());
        lib.get_alias<std::shared_ptr<CallbackPlugin>()>("tandem_plugin_factory")();
      },
      "the factory alias tandem_plugin_factory was called despite the ABI mismatch");
}

TEST(PluginHost, FactoryThatThrows) {
  const fs::path file = test_plugin("factory_throws");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr("plugin " + file.string() + " failed while starting"));
  EXPECT_THAT(msg, HasSubstr("factory_throws: cannot start (simulated)"));
}

TEST(PluginHost, InfoThatThrows) {
  const fs::path file = test_plugin("info_throws");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr("plugin " + file.string() + " failed while starting"));
  EXPECT_THAT(msg, HasSubstr("info_throws: no info today (simulated)"));
}

TEST(PluginHost, InvalidOptionsSchema) {
  const fs::path file = test_plugin("bad_schema");
  const std::string msg = error_of([&] { PluginHost().load_file(file); });
  EXPECT_THAT(msg, HasSubstr("plugin " + file.string() + " failed while starting"));
  EXPECT_THAT(msg, HasSubstr("options schema.properties.name"));
  EXPECT_THAT(msg, HasSubstr("schema keyword 'pattern' is not supported"));
}

TEST(PluginHost, CreateThatThrowsNamesThePluginItsPathAndTheConfigEntry) {
  LoadedPlugin p = PluginHost().load_file(test_plugin("create_throws"));
  const std::string msg = error_of([&] {
    p.create(json::object(), {Target::template_model, "callbacks[2]"});
  });
  EXPECT_THAT(msg, HasSubstr("plugin 'create_throws' (" + test_plugin("create_throws").string() +
                             ") failed to create its callback for callbacks[2]"));
  EXPECT_THAT(msg, HasSubstr("create_throws: cannot create (simulated)"));
}

TEST(PluginHost, CreateThatReturnsNothing) {
  LoadedPlugin p = PluginHost().load_file(test_plugin("create_throws"));
  const std::string msg = error_of([&] {
    p.create({{"in", "nothing"}}, {Target::template_model, "callbacks[0]"});
  });
  EXPECT_THAT(msg, HasSubstr("plugin 'create_throws'"));
  EXPECT_THAT(msg, HasSubstr("created no callback for callbacks[0]"));
}

TEST(PluginHost, FileNameThatDoesNotMatchThePluginsName) {
  const std::string msg = error_of([] { PluginHost({test_plugin_dir()}).load("misnamed"); });
  EXPECT_THAT(msg, HasSubstr(test_plugin("misnamed").string() + " calls itself 'somebody_else'"));
  EXPECT_THAT(msg, HasSubstr("rename the file tandem-somebody_else.so"));
}

// --- options: checked against the plugin's schema, errors name callbacks[i].options.<key> ------

std::string option_error(const std::string& plugin, const json& options, int index) {
  PluginHost host({test_plugin_dir()});
  LoadedPlugin p = host.load(plugin);
  try {
    p.create(options, {Target::template_model, "callbacks[" + std::to_string(index) + "]"});
  } catch (const ConfigError& e) {
    return std::string(e.path()) + " | " + e.what();
  }
  ADD_FAILURE() << plugin << " accepted " << options.dump();
  return {};
}

TEST(PluginHost, BadOptionsOfRealPluginsNameTheirJsonPath) {
  // Wrong type.
  EXPECT_THAT(option_error("terminate_on_nan", {{"raise_error", "yes"}}, 3),
              HasSubstr("callbacks[3].options.raise_error | config error at "
                        "'callbacks[3].options.raise_error': expected true or false, got \"yes\""));
  EXPECT_THAT(option_error("epoch_logger", {{"metrics", "loss"}}, 0),
              HasSubstr("callbacks[0].options.metrics | "));
  EXPECT_THAT(option_error("epoch_logger", {{"metrics", {"loss", 3}}}, 0),
              HasSubstr("callbacks[0].options.metrics[1] | "));
  // Out of range.
  EXPECT_THAT(
      option_error("epoch_logger", {{"every", 0}}, 1),
      HasSubstr("callbacks[1].options.every | config error at 'callbacks[1].options.every': "
                "expected an integer >= 1 and <= 2147483647, got 0"));
  EXPECT_THAT(option_error("epoch_logger", {{"precision", 40}}, 1),
              HasSubstr("callbacks[1].options.precision | "));
  EXPECT_THAT(option_error("progress", {{"verbose", 3}}, 2),
              HasSubstr("callbacks[2].options.verbose | "));
  EXPECT_THAT(option_error("epoch_logger", {{"file", ""}}, 0),
              HasSubstr("callbacks[0].options.file | "));
  // Unknown key: the message lists the known ones.
  EXPECT_THAT(option_error("terminate_on_nan", {{"rais_error", true}}, 0),
              HasSubstr("callbacks[0].options.rais_error | config error at "
                        "'callbacks[0].options.rais_error': unknown option (known: raise_error)"));
  EXPECT_THAT(option_error("epoch_logger", {{"metric", json::array({"loss"})}}, 4),
              HasSubstr("callbacks[4].options.metric | "));
  // Options that are not an object at all.
  EXPECT_THAT(option_error("epoch_logger", json::array({1}), 0),
              HasSubstr("callbacks[0].options | "));
  // A check the schema cannot express, made by the plugin's create() (thrown in plugin code).
  EXPECT_THAT(option_error("epoch_logger", {{"metrics", {"loss", "loss"}}}, 5),
              HasSubstr("callbacks[5].options.metrics | config error at "
                        "'callbacks[5].options.metrics': 'loss' is listed twice"));
}

TEST(PluginHost, DefaultsAreFilledInBeforeCreate) {
  LoadedPlugin p = PluginHost({test_plugin_dir()}).load("epoch_logger");
  const json filled = validate_options(p.record.info.options_schema, json::object(), "x");
  EXPECT_EQ(filled["file"], "epochs.log");
  EXPECT_EQ(filled["every"], 1);
  EXPECT_EQ(filled["metrics"], json::array());
}

// --- list() -------------------------------------------------------------------------------------

TEST(PluginHost, ListShowsGoodAndBrokenPluginsWithTheirErrors) {
  const auto records = PluginHost({test_plugin_dir()}).list();
  std::map<std::string, PluginRecord> by_name;
  for (const auto& r : records) {
    EXPECT_TRUE(by_name.emplace(r.info.name, r).second) << "listed twice: " << r.info.name;
  }
  for (const char* good : {"lifetime", "create_throws", "epoch_logger"}) {
    ASSERT_TRUE(by_name.count(good)) << good;
    EXPECT_TRUE(by_name[good].error.empty()) << good << ": " << by_name[good].error;
    EXPECT_EQ(by_name[good].path.parent_path(), test_plugin_dir());
  }
  ASSERT_TRUE(by_name.count("terminate_on_nan"));
  EXPECT_EQ(by_name["terminate_on_nan"].path, builtin_plugin("terminate_on_nan"));
  EXPECT_EQ(by_name["terminate_on_nan"].info.version, "1.0.0");
  const std::map<std::string, std::string> broken = {
      {"not_a_plugin", "is not a Tandem plugin"},
      {"wrong_abi", "plugin ABI version"},
      {"factory_throws", "cannot start (simulated)"},
      {"info_throws", "no info today (simulated)"},
      {"bad_schema", "schema keyword 'pattern' is not supported"}};
  for (const auto& [name, what] : broken) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_THAT(by_name[name].error, HasSubstr(what)) << name;
    EXPECT_THAT(by_name[name].error, HasSubstr(test_plugin(name).string())) << name;
    EXPECT_EQ(by_name[name].path, test_plugin(name));
  }
}

TEST(PluginHost, ListSkipsLaterCopiesOfANameAndIgnoresOtherFiles) {
  const fs::path first = scratch_dir("plugin-list-1"), second = scratch_dir("plugin-list-2");
  fs::copy_file(test_plugin("lifetime"), first / "tandem-lifetime.so");
  fs::copy_file(test_plugin("lifetime"), second / "tandem-lifetime.so");
  write_text(first / "README.txt", "not a plugin\n");
  write_text(first / "libtandem-something.so", "not a plugin either\n");
  std::size_t count = 0;
  for (const auto& r : PluginHost({first, second}).list())
    if (r.info.name == "lifetime") {
      ++count;
      EXPECT_EQ(r.path, first / "tandem-lifetime.so");  // the first folder wins
      EXPECT_EQ(r.error, "");
    }
  EXPECT_EQ(count, 1u);
}

// A plugin folder of the config or the environment cannot replace a built-in plugin: the name
// loads the built-in, and the listing says why the other file is not used.
TEST(PluginHost, APluginFolderCannotReplaceABuiltinPlugin) {
  const fs::path dir = scratch_dir("plugin-shadow");
  // Any library will do: it is never loaded.
  fs::copy_file(test_plugin("lifetime"), dir / "tandem-events.so");
  EnvGuard env("TANDEM_PLUGIN_PATH", dir.string());
  for (const PluginHost& host : {PluginHost({dir}), PluginHost()}) {
    EXPECT_EQ(host.load("events").record.path, builtin_plugin("events"));
    std::vector<PluginRecord> events;
    for (const auto& r : host.list())
      if (r.info.name == "events") events.push_back(r);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].path, dir / "tandem-events.so");
    EXPECT_THAT(events[0].error, HasSubstr("not used: 'events' is a built-in plugin"));
    EXPECT_THAT(events[0].error, HasSubstr("name this file by path"));
    EXPECT_EQ(events[1].path, builtin_plugin("events"));
    EXPECT_EQ(events[1].error, "");
  }
  // By path it is the user's file, loaded as asked (here: a library that calls itself otherwise).
  EXPECT_EQ(PluginHost().load((dir / "tandem-events.so").string()).record.info.name, "lifetime");
}

// --- lifetime: what a plugin creates keeps its library loaded ----------------------------------

TEST(PluginLifetime, ACallbackKeepsTheLibraryLoadedAfterTheHostAndHandleAreGone) {
  const fs::path file = test_plugin("lifetime");
  ASSERT_FALSE(is_loaded(file));
  std::shared_ptr<Callback> cb;
  {
    PluginHost host;
    LoadedPlugin p = host.load_file(file);
    EXPECT_TRUE(is_loaded(file));
    cb = p.create({}, {Target::template_model, "callbacks[0]"});
  }
  ASSERT_TRUE(is_loaded(file));
  EXPECT_TRUE(is_mapped(file));
  EXPECT_EQ(cb->name(), "lifetime");  // a virtual call into the library
  std::weak_ptr<Callback> weak = cb;
  auto second = cb;  // copies share ownership
  cb.reset();
  EXPECT_TRUE(is_loaded(file));
  second.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(is_loaded(file)) << "the library stays loaded after its last object died";
  EXPECT_FALSE(is_mapped(file));
}

TEST(PluginLifetime, TheLoadedPluginHandleAloneKeepsItLoaded) {
  const fs::path file = test_plugin("lifetime");
  std::optional<LoadedPlugin> p;
  {
    PluginHost host;
    p = host.load_file(file);
  }
  EXPECT_TRUE(is_loaded(file));
  EXPECT_EQ(p->plugin->info().name, "lifetime");
  auto copy = *p;
  p.reset();
  EXPECT_TRUE(is_loaded(file));
  copy = LoadedPlugin{};
  EXPECT_FALSE(is_loaded(file));
}

TEST(PluginLifetime, ListingLeavesNothingLoaded) {
  PluginHost({test_plugin_dir()}).list();
  EXPECT_FALSE(is_loaded(test_plugin("lifetime")));
}

// The ConfigError a plugin throws from create() outlives the library: the handle dies while the
// exception unwinds. Reading the error afterwards must not touch the unloaded code.
TEST(PluginLifetime, AnErrorThrownByThePluginOutlivesItsLibrary) {
  const fs::path file = test_plugin("lifetime");
  try {
    PluginHost host;
    LoadedPlugin p = host.load_file(file);
    p.create({{"fail", true}}, {Target::template_model, "callbacks[4]"});
    FAIL() << "create() did not throw";
  } catch (const ConfigError& e) {
    EXPECT_FALSE(is_loaded(file));
    EXPECT_EQ(e.path(), "callbacks[4].options.fail");
    EXPECT_THAT(std::string(e.what()), HasSubstr("asked to fail (test)"));
    EXPECT_EQ(e.code(), ExitCode::bad_input);
  }
}

TEST(PluginLifetime, TrainingThroughAPluginCallbackAfterTheHostIsGone) {
  const fs::path file = test_plugin("lifetime");
  PluginRun run;
  {
    PluginHost host;
    auto cb = host.load_file(file).create({}, {Target::template_model, "callbacks[0]"});
    run.bus.add(cb);
  }
  run.fit(std::make_shared<TableDataset>(32), nullptr, 3);
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto epochs = reinterpret_cast<int (*)()>(::dlsym(handle, "lifetime_epochs_seen"));
  ASSERT_NE(epochs, nullptr);
  EXPECT_EQ(epochs(), 3);
  ::dlclose(handle);
}

// --- the example plugin, in-tree (tests/sdk builds it again out of tree) -----------------------

TEST(ExamplePlugin, WritesTheChosenMetricsOncePerEpoch) {
  EnvGuard env("TANDEM_PLUGIN_PATH", test_plugin_dir().string());  // before the run's host
  PluginRun run;
  run.add("epoch_logger", {{"metrics", {"accuracy", "val_loss", "nope"}}, {"precision", 3}});
  run.fit(std::make_shared<TableDataset>(48), std::make_shared<TableDataset>(16), 2);
  std::istringstream lines(read_text(run.run_dir / "epochs.log"));
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_THAT(got[0],
              ::testing::MatchesRegex("epoch=1 accuracy=[0-9.e-]+ val_loss=[0-9.e-]+ nope=NA"));
  EXPECT_THAT(got[1], ::testing::StartsWith("epoch=2 accuracy="));
}

TEST(ExamplePlugin, MetaTargetAddsReplicaFactsAndEverySkipsEpochs) {
  EnvGuard env("TANDEM_PLUGIN_PATH", test_plugin_dir().string());
  PluginRun run("cpu:2");
  run.add("epoch_logger", {{"file", "meta.log"}, {"every", 2}, {"metrics", json::array({"loss"})}},
          Target::meta);
  run.fit(std::make_shared<TableDataset>(32), nullptr, 4);
  const std::string text = read_text(run.run_dir / "meta.log");
  EXPECT_THAT(text, ::testing::MatchesRegex(
                        "epoch=2 loss=[0-9.e-]+ replicas=2 slowest_step_s=[0-9.e-]+\n"
                        "epoch=4 loss=[0-9.e-]+ replicas=2 slowest_step_s=[0-9.e-]+\n"));
}

// --- through the CLI ----------------------------------------------------------------------------

const char* kSynthetic =
    R"('{"type": "synthetic", "samples": 40, "x_shape": [28, 28], "task": "classes", "classes": 10, "seed": 1}')";

// `tandem train` on the default config with tiny synthetic data and `callbacks` set to `callbacks`.
CommandResult train_with(const std::string& callbacks, const fs::path& run_dir,
                         const std::string& env = "env -u TANDEM_PLUGIN_PATH",
                         const std::string& extra = "") {
  return run_command(env + " " + tandem_cli() + " train --set data.train=" + kSynthetic +
                     " --set data.validation=" + kSynthetic + " --set epochs=1 --set 'callbacks=" +
                     callbacks + "' --run-dir " + run_dir.string() + " -q " + extra);
}

TEST(PluginCli, EveryBrokenPluginIsExitCode2WithAMessageNamingIt) {
  const fs::path dir = scratch_dir("plugin-cli-bad");
  const fs::path garbage = dir / "tandem-garbage.so";
  write_text(garbage, "garbage");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {test_plugin("not_a_plugin").string(), "is not a Tandem plugin"},
      {test_plugin("wrong_abi").string(), "was built for plugin ABI version"},
      {test_plugin("factory_throws").string(), "failed while starting"},
      {test_plugin("info_throws").string(), "failed while starting"},
      {test_plugin("bad_schema").string(), "schema keyword 'pattern' is not supported"},
      {test_plugin("create_throws").string(), "failed to create its callback for callbacks[0]"},
      {garbage.string(), "cannot load plugin"},
      {(dir / "tandem-missing.so").string(), "does not exist"},
  };
  int i = 0;
  for (const auto& [path, what] : cases) {
    const fs::path run_dir = dir / ("run" + std::to_string(i++));
    auto r = train_with(R"([{"plugin": ")" + path + R"("}])", run_dir);
    EXPECT_EQ(r.exit_code, 2) << path << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("tandem: error: ")) << path;
    EXPECT_THAT(r.err, HasSubstr(path)) << r.err;
    EXPECT_THAT(r.err, HasSubstr(what)) << r.err;
    EXPECT_FALSE(fs::exists(run_dir)) << "plugins are checked before the run folder exists";
  }
}

TEST(PluginCli, UnknownNameAndBadOptionsAreExitCode2) {
  const fs::path dir = scratch_dir("plugin-cli-options");
  auto r = train_with(R"([{"plugin": "no_such_plugin"}])", dir / "a");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no plugin named 'no_such_plugin'"));
  r = train_with(R"([{"plugin": "terminate_on_nan", "options": {"raise_error": "yes"}}])",
                 dir / "b");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("'callbacks[0].options.raise_error': expected true or false"));
  r = train_with(
      R"([{"plugin": "terminate_on_nan"}, {"plugin": "terminate_on_nan", "options": {"raise": true}}])",
      dir / "c");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("'callbacks[1].options.raise': unknown option (known: raise_error)"));
  r = train_with(R"([{"plugin": "progress", "options": {"verbose": 7}}])", dir / "d");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("'callbacks[0].options.verbose'"));
}

TEST(PluginCli, ACallbackThatThrowsInAHookFailsTheRunWithExitCode1) {
  const fs::path dir = scratch_dir("plugin-cli-hook");
  auto r = train_with(R"([{"plugin": ")" + test_plugin("create_throws").string() +
                          R"(", "options": {"in": "on_epoch_end"}}])",
                      dir / "run");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("callback 'create_throws' failed in on_epoch_end"));
  EXPECT_THAT(r.err, HasSubstr("hook failed (simulated)"));
}

TEST(PluginCli, TandemPluginPathFindsAPluginByName) {
  const fs::path dir = scratch_dir("plugin-cli-path");
  const std::string callbacks = R"([{"plugin": "epoch_logger", "options": {"metrics": ["loss"]}}])";
  // Not found without the folder on the search path...
  auto r = train_with(callbacks, dir / "a");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no plugin named 'epoch_logger'"));
  // ...found through TANDEM_PLUGIN_PATH...
  r = train_with(callbacks, dir / "b",
                 "env TANDEM_PLUGIN_PATH=/nowhere:" + test_plugin_dir().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(read_text(dir / "b" / "epochs.log"),
              ::testing::MatchesRegex("epoch=1 loss=[0-9.e-]+\n"));
  const auto events = read_events(dir / "b");
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.front()["event"], "run_started");
  bool named = false;
  for (const auto& p : events.front()["plugins"])
    if (p["plugin"] == "epoch_logger") {
      named = true;
      EXPECT_EQ(p["path"], test_plugin("epoch_logger").string());
      EXPECT_EQ(p["version"], "1.0.0");
    }
  EXPECT_TRUE(named);
  // ...and through the config's "plugin_paths".
  r = train_with(callbacks, dir / "c", "env -u TANDEM_PLUGIN_PATH",
                 "--set 'plugin_paths=[\"" + test_plugin_dir().string() + "\"]'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "c" / "epochs.log"));
}

TEST(PluginCli, PluginsCommandListsBuiltInsAndBrokenPlugins) {
  auto r = run_command("env -u TANDEM_PLUGIN_PATH " + tandem_cli() + " plugins");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME"));
  EXPECT_THAT(r.out, HasSubstr("DESCRIPTION"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("terminate_on_nan +1\\.0\\.0 +" +
                                              builtin_plugin("terminate_on_nan").string()));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("BROKEN")));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("wrong_abi")));

  r = run_command("env -u TANDEM_PLUGIN_PATH " + tandem_cli() + " plugins --path " +
                  test_plugin_dir().string() + " --path /nowhere");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Broken plugins"));
  EXPECT_THAT(r.out, HasSubstr("wrong_abi: " + test_plugin("wrong_abi").string() +
                               " was built for plugin ABI version"));
  EXPECT_THAT(r.out, HasSubstr("factory_throws: plugin " + test_plugin("factory_throws").string()));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("epoch_logger +1\\.0\\.0 +" +
                                              test_plugin("epoch_logger").string()));
  EXPECT_THAT(r.out, HasSubstr("/nowhere  (missing)"));
}

TEST(PluginCli, PluginsJsonHasEachPluginsOptionSchema) {
  auto r = run_command("env TANDEM_PLUGIN_PATH=" + test_plugin_dir().string() + " " + tandem_cli() +
                       " plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["plugin_abi_version"], TANDEM_PLUGIN_ABI_VERSION);
  EXPECT_EQ(doc["search_path"][0], test_plugin_dir().string());
  std::map<std::string, json> by_name;
  for (const auto& p : doc["plugins"]) by_name[p["name"]] = p;
  ASSERT_TRUE(by_name.count("terminate_on_nan"));
  EXPECT_EQ(by_name["terminate_on_nan"]["ok"], true);
  EXPECT_EQ(by_name["terminate_on_nan"]["options_schema"]["properties"]["raise_error"]["type"],
            "boolean");
  ASSERT_TRUE(by_name.count("epoch_logger"));
  EXPECT_EQ(by_name["epoch_logger"]["options_schema"]["properties"]["every"]["minimum"], 1);
  ASSERT_TRUE(by_name.count("wrong_abi"));
  EXPECT_EQ(by_name["wrong_abi"]["ok"], false);
  EXPECT_THAT(by_name["wrong_abi"]["error"].get<std::string>(), HasSubstr("plugin ABI version"));
  EXPECT_FALSE(by_name["wrong_abi"].contains("options_schema"));
}

}  // namespace
}  // namespace tandem::test
