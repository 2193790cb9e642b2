// The trust model of docs/security.md, through the real `tandem` binary:
//   - `tandem check` (which tandem-gui runs on every edit) and `tandem plugins` load plugin code in
//     a child process only, and survive a library that crashes while it is loaded;
//   - a checkpoint's stored run config is data: `train --resume CKPT`, `evaluate` and `predict`
//     without a config leave out its plugin libraries, plugin folders and file paths outside the
//     run folder, unless --trust-checkpoint-config;
//   - the checkpoint plugin never adopts (and so never deletes) a file outside its folder that a
//     checkpoint index names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

fs::path test_plugin(const std::string& name) {
  return fs::path(TANDEM_TEST_PLUGIN_DIR) / ("tandem-" + name + ".so");
}
fs::path crashing_plugin() {
  return fs::path(TANDEM_TEST_PLUGIN_DIR) / "crashing" / "tandem-crashes_on_load.so";
}

// --- plugin code runs in a child process ------------------------------------------------------

TEST(PluginIsolationCli, CheckLoadsPluginsInAChildProcessOnly) {
  const fs::path dir = scratch_dir("check-child");
  json config = tiny_regression_config();
  config["callbacks"] = {{{"plugin", test_plugin("announces_load").string()},
                          {"options", {{"level", 1}}}}};
  write_text(dir / "run.json", config.dump());
  const fs::path marker = dir / "loaded-by.txt";
  auto r = run_command("TANDEM_TEST_LOAD_MARKER=" + marker.string() + " " + tandem_cli() +
                       " check " + (dir / "run.json").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"ok\":true"));
  EXPECT_THAT(r.out, HasSubstr("announces_load"));  // in the summary's plugins
  const std::string loaded_by = read_text(marker);
  EXPECT_THAT(loaded_by, HasSubstr("plugin-child"));
  EXPECT_THAT(loaded_by, Not(HasSubstr(" check ")));

  // Options are still checked against the plugin's schema, with the JSON path.
  config["callbacks"][0]["options"]["level"] = -1;
  write_text(dir / "run.json", config.dump());
  r = run_command(tandem_cli() + " check " + (dir / "run.json").string() + " --json");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["ok"], false);
  EXPECT_EQ(out["path"], "callbacks[0].options.level");
  EXPECT_THAT(out["error"].get<std::string>(), HasSubstr("expected an integer >= 0"));
}

TEST(PluginIsolationCli, APluginThatCrashesWhileLoadingIsAnErrorOfCheckAndOfTheListing) {
  ASSERT_TRUE(fs::exists(crashing_plugin()));
  const fs::path dir = scratch_dir("check-crash");
  json config = tiny_regression_config();
  config["callbacks"] = {{{"plugin", "checkpoint"}},
                         {{"plugin", crashing_plugin().string()}}};
  write_text(dir / "run.json", config.dump());
  auto r = run_command(tandem_cli() + " check " + (dir / "run.json").string() + " --json");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["ok"], false);
  const std::string error = out["error"].get<std::string>();
  EXPECT_THAT(error, HasSubstr("callbacks[1]"));
  EXPECT_THAT(error, HasSubstr(crashing_plugin().string()));
  EXPECT_THAT(error, HasSubstr("crashed the process (signal 6"));
  EXPECT_EQ(out["path"], "callbacks[1].plugin");  // was null: a form could not point at it

  // A plugin that is not there: the same place (was null too).
  json missing = config;
  missing["callbacks"][1]["plugin"] = "does_not_exist";
  write_text(dir / "missing.json", missing.dump());
  const auto m =
      run_command(tandem_cli() + " check " + (dir / "missing.json").string() + " --json");
  EXPECT_EQ(m.exit_code, 2) << m.out << m.err;
  const json missing_out = json::parse(m.out);
  EXPECT_EQ(missing_out["path"], "callbacks[1].plugin");
  EXPECT_THAT(missing_out["error"].get<std::string>(),
              HasSubstr("no plugin named 'does_not_exist'"));

  // train loads such a plugin in a child first: the same error, exit 2, no run folder (it used
  // to abort in the middle of the run without naming the plugin).
  r = run_command(tandem_cli() + " train " + (dir / "run.json").string() + " -q --run-dir " +
                  (dir / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("crashed the process (signal 6"));
  EXPECT_THAT(r.err, HasSubstr(crashing_plugin().string()));
  EXPECT_FALSE(fs::exists(dir / "run"));

  r = run_command(tandem_cli() + " plugins --path " + crashing_plugin().parent_path().string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("crashes_on_load"));
  EXPECT_THAT(r.out, HasSubstr("crashed the process"));
  EXPECT_THAT(r.out, HasSubstr("checkpoint"));  // the others are still listed
}

// A plugin that crashes the process in a hook of a training run (no child there: it runs in
// the run's process) is named before the process dies of the signal, whatever the crash: a bad
// memory access, an abort, a stack overflow (reported from the alternate stack). Before, the
// shell's "Segmentation fault" was all, with nothing naming the plugin.
TEST(PluginIsolationCli, APluginThatCrashesTheRunInAHookIsNamed) {
  const fs::path dir = scratch_dir("hook-crash");
  for (const auto& [how, signal] :
       std::vector<std::pair<std::string, int>>{{"segv", 11}, {"abort", 6}, {"overflow", 11}}) {
    SCOPED_TRACE(how);
    json config = tiny_regression_config();
    config["callbacks"] = {
        {{"plugin", test_plugin("crashes_in_hook").string()}, {"options", {{"how", how}}}}};
    write_text(dir / (how + ".json"), config.dump());
    const auto r = run_command(tandem_cli() + " train " + (dir / (how + ".json")).string() +
                               " -q --run-dir " + (dir / how).string());
    EXPECT_EQ(r.exit_code, 128 + signal) << r.err;  // it still dies of the signal
    EXPECT_THAT(r.err, HasSubstr("tandem: callback 'crashes_in_hook' crashed the process in "
                                 "on_train_batch_end (SIG"));
    EXPECT_THAT(r.err, HasSubstr(signal == 6 ? "SIGABRT" : "SIGSEGV"));
  }
}

// A callback that fails after the training ended (in on_train_end: a report it could not send)
// fails the run, but the trained weights are the run's result and are saved first: they were
// lost, with nothing to resume.
TEST(PluginIsolationCli, ACallbackFailingInOnTrainEndKeepsTheTrainedModel) {
  const fs::path dir = scratch_dir("train-end-failure");
  json config = tiny_regression_config();
  config["callbacks"] = {{{"plugin", test_plugin("crashes_in_hook").string()},
                          {"options", {{"how", "throw_at_end"}}}}};
  write_text(dir / "run.json", config.dump());
  const auto r = run_command(tandem_cli() + " train " + (dir / "run.json").string() +
                             " -q --run-dir " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("callback 'crashes_in_hook' failed in on_train_end: cannot upload "
                               "the report (test) (training had ended: its weights are saved in"));
  ASSERT_TRUE(fs::exists(dir / "run" / "model.h5"));
  const std::string events = read_text(dir / "run" / "events.jsonl");
  EXPECT_THAT(events, HasSubstr("\"reason\":\"final\""));
  EXPECT_THAT(events, HasSubstr("\"event\":\"run_failed\""));
  const auto inspect =
      run_command(tandem_cli() + " inspect " + (dir / "run" / "model.h5").string());
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
}

// --- a checkpoint's stored config is data -----------------------------------------------------

// A run whose config holds everything a crafted checkpoint could use: a plugin named by path, a
// plugin folder, and a checkpoint callback writing outside the run folder.
struct StoredConfigRun {
  fs::path dir, victim, marker, checkpoint;
  StoredConfigRun() {
    dir = scratch_dir("stored-config");
    victim = dir / "outside" / "victim.h5";
    marker = dir / "loaded-by.txt";
    fs::create_directories(victim.parent_path());
    json config = tiny_regression_config();
    config["epochs"] = 1;
    config["plugin_paths"] = {TANDEM_TEST_PLUGIN_DIR};
    config["callbacks"] = {
        {{"plugin", test_plugin("announces_load").string()}},
        {{"plugin", "checkpoint"},
         {"options", {{"filepath", victim.string()}, {"monitor", "loss"}}}},
        {{"plugin", "checkpoint"},
         {"options", {{"filepath", "kept/epoch{epoch}.h5"}, {"monitor", "loss"}}}},
        // By name, from a plugin folder of the user's; a field formatting a slash ("../2").
        {{"plugin", "announces_load"}},
        {{"plugin", "checkpoint"},
         {"options", {{"filepath", "..{epoch:/>2}_escaped.h5"}, {"monitor", "loss"}}}}};
    const CommandResult r = train_in(dir, "run", config);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    checkpoint = dir / "run" / "model.h5";
    EXPECT_TRUE(fs::exists(victim));
    fs::remove(victim);
    fs::remove(marker);
  }
  CommandResult resume(const std::string& extra) const {
    return run_command("TANDEM_TEST_LOAD_MARKER=" + marker.string() +
                       " TANDEM_PLUGIN_PATH=" + TANDEM_TEST_PLUGIN_DIR + " " + tandem_cli() +
                       " train --resume " + checkpoint.string() + " --set epochs=2 -q " + extra);
  }
};

TEST(StoredConfigTrust, ResumingFromACheckpointAloneLeavesOutItsPluginLibrariesAndOutsidePaths) {
  const StoredConfigRun run;
  const CommandResult r = run.resume("");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(run.victim)) << "a stored path outside the run folder was written";
  EXPECT_FALSE(fs::exists(run.marker)) << "a stored plugin library was loaded";
  // What was left out is named, with the way to trust the file.
  EXPECT_THAT(r.err, HasSubstr("plugin_paths"));
  EXPECT_THAT(r.err, HasSubstr("callbacks[0]"));
  EXPECT_THAT(r.err, HasSubstr("a plugin named by path runs that library"));
  EXPECT_THAT(r.err, HasSubstr("callbacks[1]"));
  EXPECT_THAT(r.err, HasSubstr(run.victim.string()));
  EXPECT_THAT(r.err, HasSubstr("--trust-checkpoint-config"));
  EXPECT_THAT(r.err, Not(HasSubstr("callbacks[2]")));
  EXPECT_THAT(r.err, HasSubstr("callbacks[3] (plugin \"announces_load\"): not a plugin Tandem "
                               "ships"));
  EXPECT_THAT(r.err, HasSubstr("callbacks[4]"));
  EXPECT_FALSE(fs::exists(run.dir / "2_escaped.h5")) << "a formatted slash left the run folder";
  // The callback writing inside the run folder was kept: epoch 2 has its checkpoint.
  EXPECT_TRUE(fs::exists(run.dir / "run" / "kept" / "epoch2.h5"));
}

TEST(StoredConfigTrust, TrustCheckpointConfigUsesTheStoredConfigAsItIs) {
  const StoredConfigRun run;
  const CommandResult r = run.resume("--trust-checkpoint-config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(run.victim));
  EXPECT_TRUE(fs::exists(run.marker));
  EXPECT_THAT(r.err, Not(HasSubstr("left out")));
}

TEST(StoredConfigTrust, EvaluateWithTheStoredConfigIgnoresItsPluginFolders) {
  const StoredConfigRun run;
  // A folder of the stored config holding a "progress" of its own would otherwise be loaded by
  // evaluate's progress bar; here the stored folder is simply left out, and said so.
  const CommandResult r = run_command("TANDEM_TEST_LOAD_MARKER=" + run.marker.string() + " " +
                                      tandem_cli() + " evaluate --weights " +
                                      run.checkpoint.string() + " --split train");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plugin_paths"));
  EXPECT_FALSE(fs::exists(run.marker));
  EXPECT_THAT(r.out, HasSubstr("\"loss\""));
}

// --- a checkpoint index is data -----------------------------------------------------------------

TEST(StoredConfigTrust, TopKNeverDeletesAFileOutsideItsFolderThatTheIndexNames) {
  const fs::path dir = scratch_dir("index-outside");
  const fs::path precious = dir / "precious.txt";
  write_text(precious, "the user's own file\n");
  json config = tiny_regression_config();
  config["epochs"] = 1;
  config["callbacks"] = {{{"plugin", "checkpoint"},
                          {"options",
                           {{"filepath", "ckpt/e{epoch}.h5"},
                            {"monitor", "loss"},
                            {"save_top_k", 1}}}}};
  ASSERT_EQ(train_in(dir, "run", config).exit_code, 0);
  // A crafted index entry naming a file outside the folder, with the worst value of all.
  const fs::path index = dir / "run" / "ckpt" / "checkpoints.json";
  json doc = json::parse(read_text(index));
  json entry = doc["checkpoints"][0];
  entry["path"] = precious.string();
  entry.erase("file");
  entry["value"] = 1e30;  // the worst: the first to go
  entry["step"] = 0;
  doc["checkpoints"].push_back(entry);
  write_text(index, doc.dump(2));
  const CommandResult r = run_command(tandem_cli() + " train --resume " +
                                      (dir / "run" / "model.h5").string() +
                                      " --set epochs=3 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(precious)) << "a file outside the checkpoint folder was deleted";
  EXPECT_THAT(r.err, HasSubstr("names a file outside the folder"));
}

}  // namespace
}  // namespace tandem::test
