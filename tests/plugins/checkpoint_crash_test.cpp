// The checkpoint plugin in the real `tandem` binary: kill -9 at random moments never leaves a
// broken checkpoint in the index, `tandem train --resume` (RUN_DIR or CKPT) continues bitwise
// exactly, and `tandem inspect` shows what a checkpoint holds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

extern char** environ;

namespace tandem::test {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kSynthetic =
    R"({"type": "synthetic", "samples": 1536, "x_shape": [28, 28], "task": "classes", )"
    R"("classes": 10, "seed": 3})";

// fashion-mlp (resources/configs) on synthetic data, 12 batches per epoch, a checkpoint after
// every batch: the 3 best by loss are kept (the others deleted) plus last.h5.
std::vector<std::string> fresh_run_args(const fs::path& run_dir, int epochs) {
  const json callbacks = json::array({{{"plugin", "checkpoint"},
                                       {"options",
                                        {{"filepath", "checkpoints/step{step:05d}.h5"},
                                         {"save_freq", 1},
                                         {"monitor", "loss"},
                                         {"save_top_k", 3},
                                         {"save_last", true}}}}});
  return {tandem_cli(),
          "train",
          (source_dir() / "resources/configs/fashion-mlp.json").string(),
          "--set",
          std::string("data.train=") + kSynthetic,
          "--set",
          "data.validation=null",
          "--set",
          "epochs=" + std::to_string(epochs),
          "--set",
          "callbacks=" + callbacks.dump(),
          "--run-dir",
          run_dir.string(),
          "-q"};
}

pid_t spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn failed: " + std::string(std::strerror(rc)));
  return pid;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty()) s += ' ';
    s += quoted(a);
  }
  return s;
}

json index_entries(const fs::path& dir) {
  std::ifstream in(dir / "checkpoints.json");
  if (!in) return json::array();
  return json::parse(in).at("checkpoints");  // throws if not whole JSON: a test failure
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0;
}

// Weights and optimizer slots bitwise equal.
void expect_bitwise_equal(const fs::path& a_path, const fs::path& b_path) {
  const CheckpointData a = read_checkpoint_file(a_path);
  const CheckpointData b = read_checkpoint_file(b_path);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  std::size_t compared = 0;
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    ASSERT_EQ(a.layers[l].weights.size(), b.layers[l].weights.size());
    for (std::size_t w = 0; w < a.layers[l].weights.size(); ++w, ++compared)
      EXPECT_TRUE(same_tensor(a.layers[l].weights[w].value, b.layers[l].weights[w].value))
          << a.layers[l].layer << "/" << a.layers[l].weights[w].name << " differs";
  }
  EXPECT_EQ(compared, 6u);
  ASSERT_TRUE(a.training && b.training);
  ASSERT_EQ(a.training->optimizer_slots.size(), b.training->optimizer_slots.size());
  for (std::size_t i = 0; i < a.training->optimizer_slots.size(); ++i)
    EXPECT_TRUE(
        same_tensor(a.training->optimizer_slots[i].value, b.training->optimizer_slots[i].value))
        << a.training->optimizer_slots[i].name << " differs";
  EXPECT_EQ(a.training->state["step"], b.training->state["step"]);
  EXPECT_EQ(a.training->state["history"], b.training->state["history"]);
}

// Killed runs are asked for more epochs than they ever reach; the run that finishes resumes with
// --set epochs=N, and is compared with an uninterrupted run of N epochs.
constexpr int kManyEpochs = 1000;
constexpr int kStepsPerEpoch = 12;  // 1536 samples / batch 128

// The final model.h5 of an uninterrupted run of `epochs` epochs (run once per count).
fs::path reference_model(int epochs) {
  static std::map<int, fs::path> done;
  if (!done.count(epochs)) {
    const fs::path dir = scratch_dir("ckpt-reference") / "run";
    const auto r = run_command(command_line(fresh_run_args(dir, epochs)));
    if (r.exit_code != 0) throw std::runtime_error("reference run failed: " + r.err);
    done[epochs] = dir / "model.h5";
  }
  return done[epochs];
}

// Enough epochs to finish past every step a killed run reached (the newest indexed step; at
// most a step or two more were in flight).
int epochs_past(std::int64_t step) {
  return static_cast<int>(step / kStepsPerEpoch) + 2;
}

// A checkpoint to resume from: model.h5, or a resumable index entry.
bool resumable(const fs::path& run_dir) {
  if (fs::exists(run_dir / "model.h5")) return true;
  for (const auto& e : index_entries(run_dir / "checkpoints"))
    if (e.value("resumable", false)) return true;
  return false;
}

TEST(CheckpointCrash, KillNineAtRandomMomentsNeverLeavesABrokenCheckpointAndResumesBitwise) {
  const fs::path run_dir = scratch_dir("ckpt-kill") / "run";
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 350);
  SCOPED_TRACE("random seed " + std::to_string(seed));
  int kills = 0, checked_files = 0, with_index = 0, resumes = 0, mid_write = 0;
  std::set<std::string> seen_tmp;
  std::error_code ec_ignored;
  std::int64_t max_step = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < 22; ++i) {
    // After the first checkpoint, every run resumes the killed one: crashes during resuming too.
    const bool resume = resumable(run_dir);
    resumes += resume;
    const pid_t pid = spawn(
        resume ? std::vector<std::string>{tandem_cli(), "train", "--resume", run_dir.string(), "-q"}
               : fresh_run_args(run_dir, kManyEpochs));
    if (!resume) {  // however slow the machine, the first kill comes after the first checkpoint
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while (!fs::exists(run_dir / "checkpoints" / "checkpoints.json") && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the run ended before it was killed (iteration " << i << ")";
    ++kills;
    // A kill in the middle of writing a file leaves its temporary file (never listed).
    for (const auto& e : fs::directory_iterator(run_dir / "checkpoints", ec_ignored))
      if (e.path().filename().string().find(".tmp-") != std::string::npos &&
          seen_tmp.insert(e.path().filename().string()).second)
        ++mid_write;
    // The index is whole JSON, and every checkpoint it lists (the newest first) reads.
    const json entries = index_entries(run_dir / "checkpoints");
    if (entries.empty()) continue;
    ++with_index;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      const fs::path file = run_dir / "checkpoints" / (*it)["file"].get<std::string>();
      try {
        const CheckpointData data = read_checkpoint_file(file);
        ASSERT_TRUE(data.training.has_value()) << file;
        EXPECT_EQ(data.training->state["step"], (*it)["step"]) << file;
        max_step = std::max(max_step, (*it)["step"].get<std::int64_t>());
        ++checked_files;
      } catch (const std::exception& e) {
        FAIL() << "kill " << i << ": the index lists " << file
               << ", which does not read: " << e.what();
      }
    }
    EXPECT_LE(entries.size(), 4u);  // top 3 + last.h5: evicted files leave the index
  }
  const double kill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(kills, 20);
  EXPECT_EQ(with_index, kills);
  EXPECT_EQ(resumes, kills - 1);

  // Resume once more and let it finish: the weights equal an uninterrupted run's, bitwise.
  const int epochs = epochs_past(max_step);
  const auto r = run_command(tandem_cli() + " train --resume " + run_dir.string() +
                             " --set epochs=" + std::to_string(epochs) + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_bitwise_equal(run_dir / "model.h5", reference_model(epochs));
  std::cout << "[ measured ] " << kills << " kill -9 in " << kill_seconds << " s (" << resumes
            << " of them while resuming, " << mid_write << " in the middle of writing a file), "
            << checked_files << " indexed checkpoints read back, furthest step " << max_step
            << "; resumed to the end of epoch " << epochs << "\n";
}

TEST(CheckpointCrash, ResumingACheckpointFileAfterAKillEndsBitwiseEqual) {
  const fs::path run_dir = scratch_dir("ckpt-kill-file") / "run";
  const pid_t pid = spawn(fresh_run_args(run_dir, kManyEpochs));
  // Wait until a few checkpoints exist, then kill.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(run_dir / "checkpoints" / "checkpoints.json");
    if (!in) continue;
    const json doc = json::parse(in, nullptr, false);
    if (!doc.is_discarded() && doc["checkpoints"].size() >= 4 &&
        doc["checkpoints"].back()["step"].get<int>() >= 17)  // mid-epoch 2
      break;
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // The newest non-last entry, by its file name.
  const json entries = index_entries(run_dir / "checkpoints");
  fs::path ckpt;
  std::int64_t step = 0;
  for (const auto& e : entries)
    if (!e["last"].get<bool>()) {
      ckpt = run_dir / "checkpoints" / e["file"].get<std::string>();
      step = std::max(step, e["step"].get<std::int64_t>());
    }
  ASSERT_FALSE(ckpt.empty());
  const int epochs = epochs_past(step);
  const auto r = run_command(tandem_cli() + " train --resume " + ckpt.string() +
                             " --set epochs=" + std::to_string(epochs) + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The resumed run continues in the run folder, not in checkpoints/.
  EXPECT_FALSE(fs::exists(run_dir / "checkpoints" / "model.h5"));
  ASSERT_TRUE(fs::exists(run_dir / "model.h5"));
  expect_bitwise_equal(run_dir / "model.h5", reference_model(epochs));
}

std::vector<json> events_of(const fs::path& run_dir) {
  std::vector<json> out;
  std::ifstream in(run_dir / "events.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

std::string last_resumed_from(const fs::path& run_dir) {
  std::string from;
  for (const auto& e : events_of(run_dir))
    if (e["event"] == "run_started" && e.contains("resumed_from"))
      from = e["resumed_from"].get<std::string>();
  return from;
}

TEST(CheckpointCrash, ResumeRunDirTakesTheNewestResumableCheckpoint) {
  const fs::path run_dir = scratch_dir("ckpt-resume-dir") / "run";
  // Two checkpoint callbacks in one folder: resumable files and weights-only files.
  auto args = fresh_run_args(run_dir, 1);
  args[10] = "callbacks=" +
             json::array({{{"plugin", "checkpoint"},
                           {"options", {{"filepath", "checkpoints/r{step}.h5"}, {"save_freq", 4}}}},
                          {{"plugin", "checkpoint"},
                           {"options",
                            {{"filepath", "checkpoints/w{step}.h5"},
                             {"save_freq", 2},
                             {"save_weights_only", true}}}}})
                 .dump();
  auto r = run_command(command_line(args));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json entries = index_entries(run_dir / "checkpoints");
  EXPECT_EQ(entries.size(), 3u + 6u);  // r4 r8 r12, w2 ... w12: both callbacks share the index

  // model.h5 (written at the end) is the newest; it has trained the run's one epoch.
  r = run_command(tandem_cli() + " train --resume " + run_dir.string() + " --set epochs=2 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(last_resumed_from(run_dir), (run_dir / "model.h5").string());

  // An indexed resumable checkpoint newer than model.h5 wins; a newer weights-only one does not.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(run_dir / "checkpoints" / "r8.h5", now + std::chrono::seconds(5));
  fs::last_write_time(run_dir / "checkpoints" / "w12.h5", now + std::chrono::seconds(10));
  r = run_command(tandem_cli() + " train --resume " + run_dir.string() + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(last_resumed_from(run_dir), (run_dir / "checkpoints" / "r8.h5").string());

  // A folder without checkpoints is a clear usage error.
  const fs::path empty = scratch_dir("ckpt-resume-empty");
  r = run_command(tandem_cli() + " train --resume " + empty.string() + " -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds no resumable checkpoint"), std::string::npos) << r.err;
}

TEST(CheckpointCrash, InspectShowsLayersShapesParametersAndTrainingState) {
  const fs::path run_dir = scratch_dir("ckpt-inspect") / "run";
  auto args = fresh_run_args(run_dir, 2);
  args[10] =
      "callbacks=" +
      json::array(
          {{{"plugin", "checkpoint"},
            {"target", "meta"},
            {"options", {{"filepath", "checkpoints/e{epoch}.h5"}}}},
           {{"plugin", "checkpoint"},
            {"options", {{"filepath", "checkpoints/w{epoch}.h5"}, {"save_weights_only", true}}}}})
          .dump();
  args.push_back("--devices");
  args.push_back("cpu:2");
  auto r = run_command(command_line(args));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path ckpt = run_dir / "checkpoints" / "e1.h5";

  r = run_command(tandem_cli() + " inspect " + ckpt.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* expected :
       {"model: fashion_mlp (Sequential)", "flatten", "Flatten", "kernel (784, 256), bias (256,)",
        "kernel (128, 10)", "parameters: 235,146", "1 of 2 epochs done, batch 0 of 12", "step 12",
        "target: meta", "device plan: cpu:2 (2 replicas)", "optimizer: Adam", "iterations 12",
        "optimizer slots: 12", "dense/kernel/m (784, 256)", "history: 1 epoch",
        "epoch 1: accuracy"})
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << " not in:\n" << r.out;

  r = run_command(tandem_cli() + " inspect --json " + ckpt.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["parameters"], 235146);
  EXPECT_EQ(j["layers"].size(), 4u);
  EXPECT_EQ(j["layers"][1]["name"], "dense");
  EXPECT_EQ(j["layers"][1]["class_name"], "Dense");
  EXPECT_EQ(j["layers"][1]["weights"][0]["shape"], json::array({784, 256}));
  EXPECT_EQ(j["layers"][1]["params"], 200960);
  EXPECT_EQ(j["bytes"], fs::file_size(ckpt));
  EXPECT_TRUE(j["resumable"].get<bool>());
  const json& t = j["training"];
  EXPECT_EQ(t["epoch"], 1);
  EXPECT_EQ(t["step"], 12);
  EXPECT_EQ(t["target"], "meta");
  EXPECT_EQ(t["device_plan"]["plan"], "cpu:2");
  EXPECT_EQ(t["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(t["optimizer"]["slots"].size(), 12u);
  EXPECT_EQ(t["optimizer"]["slots"][0]["shape"], json::array({784, 256}));
  EXPECT_EQ(t["history"].size(), 1u);
  EXPECT_TRUE(t["has_run_config"].get<bool>());

  // Weights only: no training state.
  r = run_command(tandem_cli() + " inspect " + (run_dir / "checkpoints" / "w2.h5").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("training state: none"), std::string::npos) << r.out;
  r = run_command(tandem_cli() + " inspect --json " + (run_dir / "checkpoints/w2.h5").string());
  EXPECT_TRUE(json::parse(r.out)["training"].is_null());

  // A truncated file: exit code 2 and the reason.
  {
    const std::string bytes = read_text(ckpt);
    write_text(run_dir / "cut.h5", bytes.substr(0, bytes.size() / 2));
  }
  r = run_command(tandem_cli() + " inspect " + (run_dir / "cut.h5").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cut.h5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = run_command(tandem_cli() + " inspect " + (run_dir / "missing.h5").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tandem::test
