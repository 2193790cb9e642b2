// End-to-end runs of the `tandem` binary, the way users run it.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

extern char** environ;

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

std::string cli() {
  return test::tandem_cli();
}

std::vector<json> read_events(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));  // throws if malformed
  return out;
}

// The "event" of every line of an event stream written to stdout (throws if a line is not JSON).
std::vector<std::string> event_names(const std::string& out) {
  std::istringstream lines(out);
  std::string line;
  std::vector<std::string> names;
  while (std::getline(lines, line)) names.push_back(json::parse(line)["event"]);
  return names;
}

TEST(Cli, TrainOneEpochEvaluatePredictAndResume) {
  const fs::path dir = test::scratch_dir("cli-train") / "run";
  auto r = run_command(cli() + " train --set epochs=1 --run-dir " + dir.string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir / "config.json"));
  ASSERT_TRUE(fs::exists(dir / "model.h5"));
  auto events = read_events(dir / "events.jsonl");
  ASSERT_GE(events.size(), 5u);
  for (const auto& e : events) {
    EXPECT_EQ(e["schema"], 1);
    EXPECT_TRUE(e.contains("time"));
  }
  EXPECT_EQ(events.front()["event"], "run_started");
  EXPECT_EQ(events.front()["config"]["epochs"], 1);
  EXPECT_EQ(events.back()["event"], "run_finished");
  std::size_t batches = 0;
  double val_accuracy = -1;
  for (const auto& e : events) {
    if (e["event"] == "batch_ended") ++batches;
    if (e["event"] == "epoch_ended") val_accuracy = e["logs"]["val_accuracy"];
  }
  EXPECT_EQ(batches, 469u);  // ceil(60000 / 128), last partial batch kept
  EXPECT_GE(val_accuracy, 0.82) << "fashion-mlp after one epoch";

  // evaluate with the run config stored in the checkpoint: same weights, same data.
  auto ev = run_command(cli() + " evaluate --weights " + (dir / "model.h5").string() + " -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  json logs = json::parse(ev.out);
  EXPECT_NEAR(logs["accuracy"].get<double>(), val_accuracy, 1e-9);

  auto pr = run_command(cli() + " predict --weights " + (dir / "model.h5").string() + " -o " +
                        (dir / "p.npy").string());
  ASSERT_EQ(pr.exit_code, 0) << pr.err;
  EXPECT_EQ(fs::file_size(dir / "p.npy"), 128u + 10000u * 10u * 4u);  // header + float32 rows

  // Resume for one more epoch from the final checkpoint.
  auto rs =
      run_command(cli() + " train --resume " + (dir / "model.h5").string() + " --set epochs=2 -q");
  ASSERT_EQ(rs.exit_code, 0) << rs.err;
  auto after = read_events(dir / "events.jsonl");
  EXPECT_EQ(after.back()["event"], "run_finished");
  EXPECT_EQ(after.back()["epochs_done"], 2);
  EXPECT_EQ(after.back()["history"].size(), 2u);
}

TEST(Cli, SigintStopsAtABatchBoundaryAndLeavesAResumableCheckpoint) {
  const fs::path dir = test::scratch_dir("cli-sigint") / "run";
  std::vector<std::string> args = {cli(),       "train",      "--set", "epochs=50",
                                   "--run-dir", dir.string(), "-q"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  // Wait for training to be under way, then interrupt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool started = false;
  while (!started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(dir / "events.jsonl");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    started = text.find("\"batch_ended\"") != std::string::npos;
  }
  ASSERT_TRUE(started);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);  // stopped by a signal; the checkpoint resumes
  auto events = read_events(dir / "events.jsonl");
  bool stopped = false;
  for (const auto& e : events)
    if (e["event"] == "stopped") {
      stopped = true;
      EXPECT_NE(e["reason"].get<std::string>().find("signal"), std::string::npos);
    }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(events.back()["event"], "run_finished");
  EXPECT_TRUE(events.back()["interrupted"].get<bool>());
  EXPECT_LT(events.back()["epochs_done"].get<int>(), 50);
  // The checkpoint resumes: a further run continues the same epoch.
  auto rs =
      run_command(cli() + " train --resume " + (dir / "model.h5").string() + " --set epochs=" +
                  std::to_string(events.back()["epochs_done"].get<int>() + 1) + " -q");
  EXPECT_EQ(rs.exit_code, 0) << rs.err;
}

// A callback's stop at an epoch end says where, as a signal's does: the batches the epoch ran.
TEST(Cli, AStopAtAnEpochEndNamesItsBatch) {
  const fs::path dir = test::scratch_dir("cli-stop-batch");
  json config = test::tiny_regression_config();  // 16 samples in batches of 8: 2 a epoch
  config["epochs"] = 5;
  config["callbacks"] = {{{"plugin", "early_stopping"},
                          {"options", {{"monitor", "loss"}, {"min_delta", 100}, {"patience", 0}}}}};
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  int stops = 0;
  for (const auto& e : read_events(dir / "run" / "events.jsonl"))
    if (e["event"] == "stopped") {
      ++stops;
      EXPECT_EQ(e["epoch"], 2);
      EXPECT_EQ(e["batch"], 2);
      EXPECT_EQ(e["step"], 4);
    }
  EXPECT_EQ(stops, 1);
}

// What the first error said was misleading or not JSON: a weights-only file given to --resume
// ("not written by tandem train"), a missing config for check --json (nothing on stdout).
TEST(Cli, AWeightsOnlyResumeAndAMissingCheckedConfigSayWhatTheyAre) {
  const fs::path dir = test::scratch_dir("cli-first-errors");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  fs::copy_file(dir / "run" / "model.h5", dir / "weights.h5");
  const auto stripped =
      test::run_command(std::string(test::system_python()) +
                        " -c 'import h5py, sys\n"
                        "with h5py.File(sys.argv[1], \"r+\") as f: del f[\"tandem\"]' " +
                        (dir / "weights.h5").string());
  ASSERT_EQ(stripped.exit_code, 0) << stripped.err;
  auto r = run_command(cli() + " train -q --resume " + (dir / "weights.h5").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("weights.h5 holds weights only (no training state, no run config)"),
            std::string::npos)
      << r.err;
  r = run_command(cli() + " check --json " + (dir / "missing.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["ok"], false);
  EXPECT_EQ(out["path"], (dir / "missing.json").string());
  EXPECT_NE(out["error"].get<std::string>().find("cannot read the config (file not found)"),
            std::string::npos)
      << out;
  // A command line CLI11 refuses is one JSON object too (and CLI11's words on stderr).
  for (const std::string& args :
       {std::string("check --json --bogus"), std::string("check --json one.json two.json")}) {
    r = run_command(cli() + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    const json refused = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(refused.is_object()) << args << ": " << r.out;
    EXPECT_EQ(refused["ok"], false) << args;
    EXPECT_TRUE(refused["path"].is_null()) << args;
    EXPECT_FALSE(refused["error"].get<std::string>().empty()) << args;
    EXPECT_FALSE(r.err.empty()) << args;
  }
}

TEST(Cli, TruncatedAndMissingDataAreExitCode2AndCreateNothing) {
  const fs::path dir = test::scratch_dir("cli-baddata");
  {
    std::ifstream in(test::fashion_mnist_dir() / "t10k-images-idx3-ubyte.gz", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream out(dir / "cut.gz", std::ios::binary);
    out << bytes.substr(0, bytes.size() / 3);
  }
  auto r = run_command(cli() + " train --set data.train.x=" + (dir / "cut.gz").string() +
                       " --run-dir " + (dir / "run").string() + " -q");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cut.gz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));

  auto m = run_command(cli() + " train --set data.validation.y=/nonexistent/labels.gz --run-dir " +
                       (dir / "run2").string() + " -q");
  EXPECT_EQ(m.exit_code, 2) << m.err;
  EXPECT_NE(m.err.find("/nonexistent/labels.gz"), std::string::npos) << m.err;
  EXPECT_FALSE(fs::exists(dir / "run2"));
}

TEST(Cli, ConfigErrorsNameTheJsonPathWithExitCode2) {
  auto r = run_command(cli() + " train --set model.config.layers[2].class_name=Dens -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model.config.layers[2].class_name"), std::string::npos) << r.err;
  r = run_command(cli() + " train --set batch_size=-4 -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'batch_size'"), std::string::npos) << r.err;
  r = run_command(cli() + " summary --set model.config.layers[3].config.units=ten");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model.config.layers[3].config.units"), std::string::npos) << r.err;
  const fs::path dir = test::scratch_dir("cli-badjson");
  test::write_text(dir / "bad.json", "{\"epochs\": 1,,}");
  r = run_command(cli() + " train " + (dir / "bad.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  r = run_command(cli() + " train --devices gpu:1 -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown device 'gpu:1'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("This machine has: cpu"), std::string::npos) << r.err;
  EXPECT_EQ(run_command(cli() + " train --devices cpu:0 -q").exit_code, 2);
  EXPECT_EQ(run_command(cli() + " train --devices cuda:9 -q").exit_code, 2);
  EXPECT_EQ(run_command(cli() + " train --no-such-flag").exit_code, 2);
  EXPECT_EQ(run_command(cli() + " frobnicate").exit_code, 2);
  EXPECT_EQ(run_command(cli() + " train --set novalue").exit_code, 2);
  EXPECT_EQ(run_command(cli() + " predict --weights /etc/hostname -o out.txt").exit_code, 2);
}

TEST(Cli, EventsToStdoutAndTruncatedCheckpoint) {
  const fs::path dir = test::scratch_dir("cli-stdout");
  const std::string synthetic =
      R"('{"type": "synthetic", "samples": 300, "x_shape": [28, 28], "task": "classes", "classes": 10, "seed": 1}')";
  auto r = run_command(cli() + " train --set data.train=" + synthetic +
                       " --set data.validation=" + synthetic +
                       " --set epochs=1 --events - --run-dir " + (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> names = event_names(r.out);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "run_started");
  EXPECT_EQ(names.back(), "run_finished");
  EXPECT_EQ(std::count(names.begin(), names.end(), "batch_ended"), 3);  // 300 / 128 -> 3 batches

  // A checkpoint cut in half: a clear error naming it, exit code 2.
  {
    std::ifstream in(dir / "run" / "model.h5", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream out(dir / "cut.h5", std::ios::binary);
    out << bytes.substr(0, bytes.size() / 2);
  }
  auto e = run_command(cli() + " evaluate " + (dir / "run" / "config.json").string() +
                       " --weights " + (dir / "cut.h5").string() + " -q");
  EXPECT_EQ(e.exit_code, 2) << e.err;
  EXPECT_NE(e.err.find("cut.h5"), std::string::npos) << e.err;
}

TEST(Cli, EventsToStdoutAlsoWhenTheConfigListsTheEventsPlugin) {
  const fs::path dir = test::scratch_dir("cli-stdout-listed");
  const std::string synthetic =
      R"('{"type": "synthetic", "samples": 200, "x_shape": [28, 28], "task": "classes", "classes": 10, "seed": 1}')";
  auto r =
      run_command(cli() + " train --set data.train=" + synthetic +
                  R"( --set 'callbacks=[{"plugin": "events", "options": {"path": "ev.jsonl"}}]')" +
                  " --set epochs=1 --events - --run-dir " + (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> names = event_names(r.out);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "run_started");
  EXPECT_EQ(names.back(), "run_finished");
  EXPECT_EQ(read_events(dir / "run" / "ev.jsonl").size(), names.size());
}

TEST(Cli, CheckValidatesEverythingWithoutTraining) {
  const fs::path dir = test::scratch_dir("cli-check");
  const std::string cd = "cd " + dir.string() + " && ";
  const std::string config = (test::source_dir() / "resources/configs/fashion-mlp.json").string();
  auto r = run_command(cd + cli() + " check " + config + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = json::parse(r.out);
  EXPECT_TRUE(out["ok"].get<bool>());
  EXPECT_EQ(out["summary"]["parameters"], 235146);  // 784·256+256 + 256·128+128 + 128·10+10
  EXPECT_EQ(out["summary"]["train_samples"], 60000);
  EXPECT_FALSE(fs::exists(dir / "runs"));  // nothing written

  // Garbage: every error is one JSON object with the path, exit code 2.
  struct Case {
    std::string args, path, says;
  };
  test::write_text(dir / "bad.json", "{\"epochs\": 1,,}");
  test::write_text(dir / "list.json", "[1, 2]");
  const std::vector<Case> cases = {
      {(dir / "bad.json").string(), "bad.json", "line 1"},
      {(dir / "list.json").string(), "", "object"},
      {config + " --set epochs=0", "epochs", "from 1 to 2147483647, got 0"},
      {config + " --set model.config.layers[2].config.units=ten",
       "model.config.layers[2].config.units", "integer"},
      {config + R"( --set 'callbacks=[{"plugin": "no_such_plugin"}]')", "", "no_such_plugin"},
      {config +
           R"( --set 'callbacks=[{"plugin": "early_stopping", "options": {"patience": "x"}}]')",
       "", "patience"},
      {config + " --set data.train.x=/nonexistent.gz", "", "/nonexistent.gz"},
      {config + " --devices cpu:0", "--devices", "cpu:0"},  // the flag, not the config's key
      {config + " --set devices=cpu:0", "devices", "cpu:0"},
  };
  for (const Case& c : cases) {
    r = run_command(cd + cli() + " check " + c.args + " --json");
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    const json o = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(o.is_object()) << c.args << ": " << r.out;
    EXPECT_FALSE(o["ok"].get<bool>());
    EXPECT_NE(o["error"].get<std::string>().find(c.says), std::string::npos) << o.dump();
    if (!c.path.empty()) {
      EXPECT_NE(o["path"].get<std::string>().find(c.path), std::string::npos) << o.dump();
    }
  }
  // Without --json: a line of text, and the error on stderr.
  r = run_command(cd + cli() + " check " + config);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("235146 parameters"), std::string::npos) << r.out;
  r = run_command(cd + cli() + " check " + config + " --set epochs=-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'epochs'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "runs"));
}

TEST(Cli, TrainsOnThreeCpuReplicasWithAPerReplicaBatch) {
  const fs::path dir = test::scratch_dir("cli-replicas");
  const std::string synthetic =
      R"('{"type": "synthetic", "samples": 95, "x_shape": [28, 28], "task": "classes", "classes": 10, "seed": 1}')";
  auto r = run_command(
      cli() + " train --set data.train=" + synthetic + " --set data.validation=" + synthetic +
      " --set epochs=1 --set batch_size_per_replica=10" +
      " --set batch_size=null --devices cpu:3 --set 'callbacks=[{\"plugin\": " +
      "\"replica_stats\", \"target\": \"meta\"}]' --run-dir " + (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto events = read_events(dir / "run" / "events.jsonl");
  ASSERT_EQ(events.front()["event"], "run_started");
  EXPECT_EQ(events.front()["devices"]["plan"], "cpu:3");
  EXPECT_EQ(events.front()["batch_size"], 30);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> replica_samples(3, 0);
  for (const auto& e : events) {
    if (e["event"] == "batch_ended") sizes.push_back(e["size"]);
    if (e["event"] == "replica_stats") {
      ASSERT_EQ(e["replicas"].size(), 3u);
      for (int k = 0; k < 3; ++k)
        replica_samples[k] += e["replicas"][k]["samples"].get<std::int64_t>();
    }
  }
  // 95 samples in batches of 30, 30, 30, 5: replicas get 10+10+10+2, 10+10+10+2, 10+10+10+1.
  EXPECT_EQ(replica_samples, (std::vector<std::int64_t>{32, 32, 31}));
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{30, 30, 30, 5}));
}

// The issue's "done when": every built-in plugin on cpu:2; its checkpoints load on cpu:1. Epochs
// of 110 steps: past the learning rate's 200-step warm-up and replica_stats' 100-batch period.
TEST(Cli, EveryBuiltInPluginOnTwoReplicasAndCheckpointsLoadOnOne) {
  const fs::path dir = test::scratch_dir("cli-all-plugins");
  const std::string config =
      (test::source_dir() / "resources/configs/fashion-mlp-plugins.json").string();
  auto r = run_command(cli() + " train " + config +
                       " --set epochs=2 --set steps_per_epoch=110"
                       " --set callbacks[7].options.backup_dir=" +
                       (dir / "backup").string() + " --run-dir " + (dir / "run").string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto index = json::parse(test::read_text(dir / "run" / "checkpoints" / "checkpoints.json"));
  auto entries = index.is_array() ? index : index["checkpoints"];
  ASSERT_FALSE(entries.empty()) << index.dump();
  const auto& entry = entries.back();
  const std::string path = entry["path"];
  ASSERT_TRUE(fs::exists(path)) << path;
  auto ev =
      run_command(cli() + " evaluate " + config + " --weights " + path + " --devices cpu:1 -q");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  // The checkpoint was written at the end of its epoch: its val_accuracy is what it evaluates to.
  EXPECT_NEAR(json::parse(ev.out)["accuracy"].get<double>(), entry["value"].get<double>(), 1e-9);
  std::set<std::string> seen;
  for (const auto& e : read_events(dir / "run" / "events.jsonl")) seen.insert(e["event"]);
  for (const char* e :
       {"run_started", "checkpoint_saved", "replica_stats", "backup_saved", "run_finished"})
    EXPECT_TRUE(seen.count(e)) << e;
  EXPECT_TRUE(fs::exists(dir / "run" / "history.csv"));
  // A meta checkpoint resumes only on its own plan.
  auto meta_index = json::parse(test::read_text(dir / "run" / "meta" / "checkpoints.json"));
  auto meta_entries = meta_index.is_array() ? meta_index : meta_index["checkpoints"];
  ASSERT_FALSE(meta_entries.empty());
  auto refused =
      run_command(cli() + " train " + config + " --resume " +
                  meta_entries.back()["path"].get<std::string>() + " --devices cpu:1 -q");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("'cpu:2'"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("'cpu:1'"), std::string::npos) << refused.err;
}

TEST(Cli, HelpAndSummary) {
  for (const char* cmd : {"train", "evaluate", "predict", "summary"}) {
    auto r = run_command(cli() + " " + cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("--set"), std::string::npos) << cmd;
  }
  // A first argument that names no subcommand is named (CLI11 said "A subcommand is required").
  auto u = run_command(cli() + " trian run.json");
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_NE(u.err.find("unknown subcommand 'trian' (the subcommands: train, evaluate,"),
            std::string::npos)
      << u.err;
  EXPECT_EQ(u.err.find("plugin-child"), std::string::npos) << u.err;
  auto v = run_command(cli() + " --version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("tandem 0.1"), std::string::npos);
  auto s = run_command(cli() + " summary " +
                       (test::source_dir() / "resources/configs/seed-mlp.json").string());
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("Total params: 41,157,101"), std::string::npos) << s.out;
}

}  // namespace
}  // namespace tandem
