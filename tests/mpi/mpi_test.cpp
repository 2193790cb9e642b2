// `mpirun -np P tandem train`: ranks train to the weights of one process with the same global
// batch, callbacks decided on rank 0 hold on every rank, checkpoints move between world sizes,
// and a rank that dies ends the whole job with a clear error.
#include <gtest/gtest.h>

#include <set>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;
using test::run_command;

// The wall-clock limit of one mpirun in a test of several: five of them stay within ctest's 300 s,
// so a run that stalls fails with its own output instead of the whole test timing out (one did,
// once, on a loaded machine, and told nothing).
const std::string kLimit = "timeout 55 ";

// Open MPI refuses root without --allow-run-as-root; more ranks than cores need --oversubscribe.
std::string mpirun(int ranks) {
  return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) + " ";
}

// A small classifier with dropout (its masks depend on each sample's place in the global batch,
// so they must not depend on which rank holds the sample) on seeded synthetic data.
json tiny_config(int batch_size, int epochs, json callbacks = json::array()) {
  return {{"name", "mpi-tiny"},
          {"seed", 7},
          {"epochs", epochs},
          {"batch_size", batch_size},
          {"devices", "cpu"},
          {"verbose", 0},
          {"model",
           {{"class_name", "Sequential"},
            {"config",
             {{"name", "tiny"},
              {"layers",
               {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 12}}}}},
                {{"class_name", "Dense"}, {"config", {{"units", 32}, {"activation", "relu"}}}},
                {{"class_name", "Dropout"}, {"config", {{"rate", 0.25}}}},
                {{"class_name", "Dense"}, {"config", {{"units", 4}}}}}}}}}},
          {"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
          {"loss",
           {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}}},
          {"metrics", {"accuracy"}},
          {"data",
           {{"train",
             {{"type", "synthetic"},
              {"samples", 500},
              {"x_shape", {12}},
              {"task", "classes"},
              {"classes", 4},
              {"seed", 3}}},
            {"validation",
             {{"type", "synthetic"},
              {"samples", 101},
              {"x_shape", {12}},
              {"task", "classes"},
              {"classes", 4},
              {"seed", 4}}}}},
          {"callbacks", callbacks}};
}

fs::path write_config(const fs::path& dir, const json& config) {
  fs::create_directories(dir);
  const fs::path path = dir / "run.json";
  test::write_text(path, config.dump(2));
  return path;
}

// Per tensor: max |a - b| <= 1e-5 · max |a| (the float rounding of sums taken in another order).
void expect_same_weights(const fs::path& a, const fs::path& b, int tensors = 4) {
  const CheckpointData x = read_checkpoint_file(a), y = read_checkpoint_file(b);
  ASSERT_EQ(x.layers.size(), y.layers.size());
  int compared = 0;
  for (std::size_t l = 0; l < x.layers.size(); ++l) {
    ASSERT_EQ(x.layers[l].weights.size(), y.layers[l].weights.size());
    for (std::size_t w = 0; w < x.layers[l].weights.size(); ++w) {
      const Tensor& p = x.layers[l].weights[w].value;
      const Tensor& q = y.layers[l].weights[w].value;
      ASSERT_EQ(p.shape(), q.shape());
      float scale = 0, diff = 0;
      for (std::int64_t i = 0; i < p.size(); ++i) {
        scale = std::max(scale, std::abs(p.data()[i]));
        diff = std::max(diff, std::abs(p.data()[i] - q.data()[i]));
      }
      EXPECT_LE(diff, 1e-5f * scale)
          << x.layers[l].layer << "/" << x.layers[l].weights[w].name << " of " << a << " vs " << b;
      ++compared;
    }
  }
  EXPECT_EQ(compared, tensors);
}

std::vector<json> read_events(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

// The "[rank r/P] finished after epoch E, step S" line of every rank.
std::vector<std::string> rank_endings(const std::string& err, int ranks) {
  std::vector<std::string> endings;
  for (int r = 0; r < ranks; ++r) {
    const std::regex line("\\[rank " + std::to_string(r) + "/" + std::to_string(ranks) +
                          "\\] (finished|interrupted) after epoch ([0-9]+), step ([0-9]+)");
    std::smatch m;
    if (std::regex_search(err, m, line)) endings.push_back(m[2].str() + "/" + m[3].str());
  }
  return endings;
}

// Starts `mpirun [mpirun_options] -np ranks tandem train config --run-dir run_dir 2> err` in the
// background (the pid is mpirun's). Returns -1 when fork fails.
pid_t start_mpirun(int ranks, const fs::path& config, const fs::path& run_dir, const fs::path& err,
                   const std::string& mpirun_options = "") {
  const std::string command = "exec " + mpirun(ranks) + mpirun_options + " " + test::tandem_cli() +
                              " train " + config.string() + " --run-dir " + run_dir.string() +
                              " 2> " + err.string();
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

TEST(Mpi, TwoAndThreeRanksTrainToTheWeightsOfOneProcess) {
  const fs::path dir = test::scratch_dir("mpi-equal");
  // 32 divides evenly over 2 ranks; 31 does not (11, 10, 10), nor do the last batches of each
  // epoch (500 = 16·31 + 4: 2, 1, 1), nor the validation batches.
  for (const auto& [ranks, batch] : std::vector<std::pair<int, int>>{{2, 32}, {3, 31}}) {
    const fs::path config = write_config(dir / std::to_string(ranks), tiny_config(batch, 3));
    const fs::path one = dir / std::to_string(ranks) / "one",
                   many = dir / std::to_string(ranks) / "many";
    auto r = run_command(test::tandem_cli() + " train " + config.string() + " --run-dir " +
                         one.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_command(mpirun(ranks) + test::tandem_cli() + " train " + config.string() +
                    " --run-dir " + many.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_same_weights(one / "model.h5", many / "model.h5");

    // Rank 0 wrote the stream: world size, every rank's plan, the logs of the whole batch.
    const auto events = read_events(many / "events.jsonl");
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front()["event"], "run_started");
    EXPECT_EQ(events.front()["world_size"], ranks);
    EXPECT_EQ(events.front()["devices"]["ranks"].size(), static_cast<std::size_t>(ranks));
    EXPECT_EQ(events.front()["batch_size"], batch);
    const auto single = read_events(one / "events.jsonl");
    auto last_epoch = [](const std::vector<json>& ev) {
      json last;
      for (const auto& e : ev)
        if (e["event"] == "epoch_ended") last = e["logs"];
      return last;
    };
    for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"})
      EXPECT_NEAR(last_epoch(events)[key].get<double>(), last_epoch(single)[key].get<double>(),
                  1e-5)
          << key;
    EXPECT_EQ(rank_endings(r.err, ranks).size(), static_cast<std::size_t>(ranks)) << r.err;
    // Only rank 0 writes: one stream, no per-rank files (and rank 0's folder lock).
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(many)) names.insert(entry.path().filename());
    EXPECT_EQ(names, (std::set<std::string>{".tandem.lock", "config.json", "events.jsonl",
                                            "model.h5"}));
  }
}

#ifdef TANDEM_TEST_PLUGIN_DIR
// A callback on rank 0 that changes weights (tests/plugins/bad_plugins/scales_weights.cpp halves
// the first layer after step 5), in place through ctx.model() or by loading a checkpoint of its
// target: rank 0's template reaches every rank before the next step, so two ranks of two
// replicas each still train to one process's weights. Before, the other rank kept its own
// weights and the ranks' sums mixed two models. A callback on every rank learns its rank.
TEST(Mpi, WeightsAHookChangesOnRankZeroReachEveryRank) {
  const fs::path dir = test::scratch_dir("mpi-hook-weights");
  const std::string env = "TANDEM_PLUGIN_PATH=" + std::string(TANDEM_TEST_PLUGIN_DIR) + " ";
  for (const char* how : {"in_place", "load_weights"}) {
    SCOPED_TRACE(how);
    json config =
        tiny_config(32, 2,
                    {{{"plugin", "scales_weights"}, {"options", {{"step", 5}, {"how", how}}}},
                     {{"plugin", "scales_weights"},
                      {"ranks", "all"},
                      {"options", {{"step", 1000}, {"mark_rank", true}}}}});
    const fs::path path = write_config(dir / how, config);
    auto r = run_command(env + test::tandem_cli() + " train " + path.string() + " --run-dir " +
                         (dir / how / "one").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_command(mpirun(2) + "-x TANDEM_PLUGIN_PATH=" + TANDEM_TEST_PLUGIN_DIR + " " +
                    test::tandem_cli() + " train " + path.string() +
                    " --set devices=cpu:2 --run-dir " + (dir / how / "many").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_same_weights(dir / how / "one" / "model.h5", dir / how / "many" / "model.h5");
    EXPECT_TRUE(fs::exists(dir / how / "many" / "rank-0"));
    EXPECT_TRUE(fs::exists(dir / how / "many" / "rank-1"));  // ctx.rank() said 0 on every rank
  }
}
#endif

TEST(Mpi, SynchronizedBatchNormAcrossRanksMatchesOneProcess) {
  const fs::path dir = test::scratch_dir("mpi-syncbn");
  json config = tiny_config(31, 3);
  // Dense (no bias: its gradient is 0 through the normalisation) -> BatchNormalization over the
  // global batch -> relu -> Dense, on 3 ranks × 2 replicas.
  config["model"]["config"]["layers"] = {
      {{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 12}}}}},
      {{"class_name", "Dense"}, {"config", {{"units", 16}, {"use_bias", false}}}},
      {{"class_name", "BatchNormalization"}, {"config", {{"synchronized", true}}}},
      {{"class_name", "Activation"}, {"config", {{"activation", "relu"}}}},
      {{"class_name", "Dense"}, {"config", {{"units", 4}}}}};
  const fs::path path = write_config(dir, config);
  auto r = run_command(test::tandem_cli() + " train " + path.string() + " --run-dir " +
                       (dir / "one").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(mpirun(3) + test::tandem_cli() + " train " + path.string() +
                  " --devices cpu:2 --run-dir " + (dir / "many").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // kernel, gamma, beta, moving mean, moving variance, kernel, bias: all equal.
  expect_same_weights(dir / "one" / "model.h5", dir / "many" / "model.h5", 7);
}

TEST(Mpi, EarlyStoppingOnRankZeroStopsEveryRankAtTheSameEpoch) {
  const fs::path dir = test::scratch_dir("mpi-early");
  // No improvement can reach min_delta 100: the run stops after epoch 2 of 50.
  const json callbacks = {
      {{"plugin", "early_stopping"},
       {"options", {{"monitor", "loss"}, {"min_delta", 100}, {"patience", 0}}}},
      {{"plugin", "replica_stats"}, {"target", "meta"}, {"options", {{"every_n_batches", 5}}}}};
  const fs::path config = write_config(dir, tiny_config(40, 50, callbacks));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(kLimit + mpirun(3) + test::tandem_cli() + " train " + config.string() +
                       " --run-dir " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  const auto endings = rank_endings(r.err, 3);
  ASSERT_EQ(endings.size(), 3u) << r.err;
  EXPECT_EQ(endings[0], "2/26");  // 500 / 40 → 13 batches per epoch
  EXPECT_EQ(endings[1], endings[0]);
  EXPECT_EQ(endings[2], endings[0]);
  EXPECT_NE(r.err.find("early_stopping"), std::string::npos) << r.err;
  // replica_stats (on rank 0) covers the replicas of every rank.
  bool saw_stats = false;
  for (const auto& e : read_events(dir / "run" / "events.jsonl")) {
    if (e["event"] != "replica_stats") continue;
    saw_stats = true;
    ASSERT_EQ(e["replicas"].size(), 3u);
    std::int64_t samples = 0;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(e["replicas"][i]["rank"], i);
      samples += e["replicas"][i]["samples"].get<std::int64_t>();
    }
    EXPECT_EQ(samples, 40);  // 14 + 13 + 13
    EXPECT_EQ(e["replicas"][0]["samples"], 14);
  }
  EXPECT_TRUE(saw_stats);
}

// `config` trained by one process straight through (dir/straight), by three ranks for its first
// 2 epochs (dir/three), and on from that checkpoint by two ranks (dir/then-two). False, with the
// failing command and its stderr reported, when one of them fails.
bool straight_and_three_then_two(const fs::path& dir, const fs::path& config) {
  const std::string train = test::tandem_cli() + " train " + config.string();
  for (const std::string& command :
       {train + " --run-dir " + (dir / "straight").string(),
        mpirun(3) + train + " --set epochs=2 --run-dir " + (dir / "three").string(),
        mpirun(2) + train + " --resume " + (dir / "three" / "model.h5").string() + " --run-dir " +
            (dir / "then-two").string()}) {
    const auto r = run_command(command);
    if (r.exit_code != 0) {
      ADD_FAILURE() << command << " exited " << r.exit_code << ":\n" << r.err;
      return false;
    }
  }
  return true;
}

// swap_ema_weights runs on rank 0; the swap is the trainer's, on every rank: each epoch's
// validation (its batches split over the ranks) reads the moving averages on all of them, and
// with swap_on_epoch the run ends holding them, as one process does. The epoch-1 checkpoint of
// three ranks (taken swapped: the averages as the weights) resumed on two ends with the
// straight run's weights.
TEST(Mpi, SwapEmaWeightsSwapsEveryRankAsOneProcess) {
  const fs::path dir = test::scratch_dir("mpi-swap-ema");
  json config =
      tiny_config(31, 3,
                  {{{"plugin", "swap_ema_weights"}, {"options", {{"swap_on_epoch", true}}}},
                   {{"plugin", "checkpoint"},
                    {"options", {{"filepath", "checkpoints/e{epoch}.h5"}, {"save_top_k", -1}}}}});
  config["optimizer"]["config"]["use_ema"] = true;
  config["optimizer"]["config"]["ema_momentum"] = 0.8;
  const fs::path path = write_config(dir, config);
  const std::string train = test::tandem_cli() + " train " + path.string();
  for (const std::string& command :
       {train + " --run-dir " + (dir / "straight").string(),
        mpirun(3) + train + " --run-dir " + (dir / "three").string(),
        mpirun(2) + train + " --resume " + (dir / "three" / "checkpoints" / "e1.h5").string() +
            " --run-dir " + (dir / "then-two").string()}) {
    const auto r = run_command(command);
    ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.err;
  }
  const auto epochs = [](const fs::path& run) {
    std::vector<json> logs;
    for (const auto& e : read_events(run / "events.jsonl"))
      if (e["event"] == "epoch_ended") logs.push_back(e["logs"]);
    return logs;
  };
  const auto straight = epochs(dir / "straight"), three = epochs(dir / "three");
  ASSERT_EQ(straight.size(), 3u);
  ASSERT_EQ(three.size(), 3u);
  for (std::size_t e = 0; e < three.size(); ++e)
    for (const char* key : {"loss", "val_loss", "val_accuracy"})
      EXPECT_NEAR(three[e][key].get<double>(), straight[e][key].get<double>(), 1e-5)
          << key << " of epoch " << e + 1;
  expect_same_weights(dir / "straight" / "model.h5", dir / "three" / "model.h5");
  expect_same_weights(dir / "straight" / "model.h5", dir / "then-two" / "model.h5");
}

// backup_and_restore restores its backup on rank 0 only; rank 0's Dropout streams must reach the
// other ranks with its weights (rank 1 kept its fresh stream: the weights ended 90% off).
TEST(Mpi, ABackupRestoredOnRankZeroCarriesItsDropoutStreamToEveryRank) {
  const fs::path dir = test::scratch_dir("mpi-backup");
  const json callbacks = {
      {{"plugin", "backup_and_restore"},
       {"options", {{"backup_dir", (dir / "backup").string()}, {"delete_checkpoint", false}}}}};
  const fs::path config = write_config(dir, tiny_config(40, 3, callbacks));
  const std::string train = mpirun(2) + test::tandem_cli() + " train " + config.string();
  auto r = run_command(train + " --run-dir " + (dir / "straight").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::remove_all(dir / "backup");
  r = run_command(train + " --set epochs=1 --run-dir " + (dir / "first").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir / "backup"));
  r = run_command(train + " --run-dir " + (dir / "then").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_weights(dir / "straight" / "model.h5", dir / "then" / "model.h5");
}

// Ranks given different runs (a per-host config copy out of date) used to hang in a collective
// (rank 1 finished its 2 epochs, rank 0 waited) or crash in one with an MPI message. They compare
// first: exit 2 on every rank, naming the key and both values.
// A script for mpirun to start in place of tandem: rank 1 runs `tandem <rank1_arguments>` (shell
// words: "$@" are the job's arguments, $RANK1 a variable given with mpirun -x), every other rank
// `tandem` with the job's arguments. Written to dir/rank1.sh.
fs::path rank_one_wrapper(const fs::path& dir, const std::string& rank1_arguments) {
  const fs::path script = dir / "rank1.sh";
  test::write_text(script, "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " +
                               test::tandem_cli() + " " + rank1_arguments + "; fi\nexec " +
                               test::tandem_cli() + " \"$@\"\n");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

TEST(Mpi, RanksGivenDifferentRunsStopAtOnceNamingTheDifference) {
  const fs::path dir = test::scratch_dir("mpi-disagree");
  const fs::path config = write_config(dir, tiny_config(40, 3));
  const fs::path wrapper = rank_one_wrapper(dir, "\"$@\" $RANK1");
  for (const auto& [rank1, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--set epochs=2",
            "config error at 'epochs': rank 1 of the 2 was given another run than rank 0: it is 1 "
            "on rank 0 and 2 on rank 1"},
           {"--set data.train.samples=499",
            "config error at 'data.train.samples': rank 1 of the 2 was given another run than "
            "rank 0: it is 500 on rank 0 and 499 on rank 1"},
           // The data section is compared but for the files' paths (it was skipped whole: one
           // rank shuffling and the other not trained silently).
           {"--set data.shuffle=false",
            "config error at 'data.shuffle': rank 1 of the 2 was given another run than rank 0: "
            "it is true on rank 0 and false on rank 1"},
           {"--set verbose=2", ""}}) {  // each rank's own
    const auto r = run_command("RANK1='" + rank1 + "' " + kLimit + mpirun(2) + "-x RANK1 " +
                               wrapper.string() + " train " + config.string() +
                               " --set epochs=1 --overwrite --run-dir " + (dir / "run").string());
    if (expected.empty()) {
      EXPECT_EQ(r.exit_code, 0) << rank1 << ": " << r.err;
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << rank1 << ": " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << rank1 << ": " << r.err;
  }
}

// Found by an audit: rank 1 running evaluate (a per-host wrapper that differed) while rank 0
// trained left rank 0 waiting in its first collective until killed; and an evaluation's error
// under mpirun ended with "tandem: interrupted" (the launcher's SIGTERM reaching the ranks as
// the job was aborted) after the error itself.
TEST(Mpi, RanksRunningAnotherCommandStopAtOnceAndAnErrorIsNotCalledAnInterruption) {
  const fs::path dir = test::scratch_dir("mpi-commands");
  const fs::path config = write_config(dir, tiny_config(40, 1));
  auto r = run_command(test::tandem_cli() + " train " + config.string() + " -q --run-dir " +
                       (dir / "one").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string weights = (dir / "one" / "model.h5").string();
  const fs::path wrapper = rank_one_wrapper(dir, "$RANK1");
  const std::string evaluate = "evaluate " + config.string() + " --weights " + weights;
  for (const auto& [rank0, rank1] : std::vector<std::pair<std::string, std::string>>{
           {"train " + config.string() + " -q --run-dir " + (dir / "two").string(), evaluate},
           {evaluate, "predict " + config.string() + " --weights " + weights + " -o -"}}) {
    const auto started = std::chrono::steady_clock::now();
    r = run_command("RANK1='" + rank1 + "' " + kLimit + mpirun(2) + "-x RANK1 " + wrapper.string() +
                    " " + rank0);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << rank0;
    EXPECT_EQ(r.exit_code, 2) << rank0 << ": " << r.err;
    const std::string first = rank0.substr(0, rank0.find(' ')),
                      second = rank1.substr(0, rank1.find(' '));
    EXPECT_NE(r.err.find("rank 1 of the 2 runs `tandem " + second + "` and rank 0 `tandem " +
                         first + "`: every rank of an MPI job must run the same command"),
              std::string::npos)
        << r.err;
  }
  for (const char* command : {"evaluate", "predict"}) {
    r = run_command(kLimit + mpirun(2) + test::tandem_cli() + " " + command + " " +
                    config.string() + " --weights " + weights + " --split test" +
                    (std::string(command) == "predict" ? " -o -" : ""));
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_NE(r.err.find("config error at 'data.test': the config has no test data"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("interrupted"), std::string::npos) << command << ": " << r.err;
  }
  // Every rank running evaluate: one result, rank 0's.
  r = run_command(kLimit + mpirun(2) + test::tandem_cli() + " " + evaluate);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("loss")) << r.out;
}

TEST(Mpi, ACheckpointOfThreeRanksResumesOnTwoAndOnOne) {
  const fs::path dir = test::scratch_dir("mpi-resume");
  const fs::path config = write_config(dir, tiny_config(30, 4));
  // Reference: one process, 4 epochs straight; three ranks for 2 epochs, then the rest on two
  // ranks and, separately, on one process.
  ASSERT_TRUE(straight_and_three_then_two(dir, config));
  const std::string ckpt = (dir / "three" / "model.h5").string();
  // inspect counts the replicas of every rank, not rank 0's alone.
  auto r = run_command(test::tandem_cli() + " inspect " + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("device plan: 3x(cpu:1) (3 replicas in 3 processes)"), std::string::npos)
      << r.out;
  r = run_command(test::tandem_cli() + " train " + config.string() + " --resume " + ckpt +
                  " --run-dir " + (dir / "then-one").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_weights(dir / "straight" / "model.h5", dir / "then-two" / "model.h5");
  expect_same_weights(dir / "straight" / "model.h5", dir / "then-one" / "model.h5");
}

// Pipelines across ranks (docs/pipeline.md): each of two ranks runs its replica as a 2-stage
// pipeline over two CPU workers with 2 micro-batches; the gradients are summed per stage across
// the ranks, and the run trains to the weights of one process without pipelines.
TEST(Mpi, TwoRanksOfTwoStagePipelinesTrainToTheWeightsOfOneProcess) {
  const fs::path dir = test::scratch_dir("mpi-pipeline");
  const fs::path config = write_config(dir, tiny_config(32, 2));
  auto r = run_command(test::tandem_cli() + " train " + config.string() + " --run-dir " +
                       (dir / "one").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(mpirun(2) + test::tandem_cli() + " train " + config.string() +
                  " --devices cpu:2 --set pipeline.stages=2 --set pipeline.microbatches=2" +
                  " --run-dir " + (dir / "pipelined").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_weights(dir / "one" / "model.h5", dir / "pipelined" / "model.h5");
  const auto events = read_events(dir / "pipelined" / "events.jsonl");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["world_size"], 2);
  const json& placement = events.front()["placement"];  // rank 0's two workers, a stage each
  ASSERT_EQ(placement.size(), 2u) << placement.dump();
  EXPECT_EQ(placement[0]["stage"], 0);
  EXPECT_EQ(placement[1]["stage"], 1);
  EXPECT_EQ(rank_endings(r.err, 2), (std::vector<std::string>{"2/32", "2/32"})) << r.err;
}

// Keras' LossScaleOptimizer across ranks: every rank scales, unscales and moves its loss scale
// alike (the summed gradients are the same everywhere), and a checkpoint of three ranks resumes
// on two with the scale where it was: the same weights and the same scale at the end as one
// process straight through (from 1, doubled after every 5 good steps: 68 steps, 13 doublings).
TEST(Mpi, ALossScaledRunKeepsOneScaleOnEveryRankAndResumesWithIt) {
  const fs::path dir = test::scratch_dir("mpi-loss-scale");
  json c = tiny_config(30, 4);
  c["optimizer"] = {{"class_name", "LossScaleOptimizer"},
                    {"config",
                     {{"inner_optimizer", c["optimizer"]},
                      {"initial_scale", 1.0},
                      {"dynamic_growth_steps", 5}}}};
  ASSERT_TRUE(straight_and_three_then_two(dir, write_config(dir, c)));
  expect_same_weights(dir / "straight" / "model.h5", dir / "then-two" / "model.h5");
  const auto scale_at_the_end = [](const fs::path& run) {
    json last;
    for (const auto& e : read_events(run / "events.jsonl"))
      if (e["event"] == "epoch_ended") last = e;
    return std::make_pair(last["loss_scale"], last["skipped_steps"]);
  };
  EXPECT_EQ(scale_at_the_end(dir / "straight").first, 8192.0);  // 2^13
  EXPECT_EQ(scale_at_the_end(dir / "then-two"), scale_at_the_end(dir / "straight"));
  EXPECT_EQ(scale_at_the_end(dir / "three").first, 64.0);  // 34 steps: 2^6
  const CheckpointData a = read_checkpoint_file(dir / "straight" / "model.h5");
  const CheckpointData b = read_checkpoint_file(dir / "then-two" / "model.h5");
  EXPECT_EQ(a.training->state["optimizer"]["loss_scale"],
            b.training->state["optimizer"]["loss_scale"]);
}

// Sends `signal` to mpirun once a 2-rank training runs; every rank must stop at the same batch
// and rank 0 leave a resumable model.h5.
void stop_mpirun_and_expect_a_checkpoint(const std::string& name, int signal,
                                         const std::string& mpirun_options) {
  const fs::path dir = test::scratch_dir(name);
  const fs::path config = write_config(dir, tiny_config(25, 100000));
  const fs::path err = dir / "err.txt";
  const pid_t pid = start_mpirun(2, config, dir / "run", err, mpirun_options);
  ASSERT_GT(pid, 0);
  // Signal once training runs (the ranks' signal threads are set up by then).
  const fs::path events = dir / "run" / "events.jsonl";
  auto training = [&] {
    std::ifstream in(events);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    return text.find("\"batch_ended\"") != std::string::npos;
  };
  for (int i = 0; i < 600 && !training(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(training());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, signal);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  // mpirun reports non-zero (rank 0's 130, or its own 1 after ending the job); the ranks
  // finished cleanly (below).
  EXPECT_TRUE(WIFEXITED(status)) << status;
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto endings = rank_endings(text, 2);
  ASSERT_EQ(endings.size(), 2u) << text;
  EXPECT_EQ(endings[0], endings[1]);
  EXPECT_NE(text.find("interrupted"), std::string::npos);
  const CheckpointData data = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(data.training.has_value());
}

// SIGUSR1 is forwarded by mpirun to every rank at once, and mpirun then waits for them: no
// deadline on the checkpoint, however long the batch or the write takes.
TEST(Mpi, SigusrOneStopsEveryRankAtTheSameBatchWithAResumableCheckpoint) {
  stop_mpirun_and_expect_a_checkpoint("mpi-sigusr1", SIGUSR1, "");
}

// Ctrl-C (SIGINT) is not forwarded: Open MPI 4.1 ends the job itself, SIGTERM to every rank
// odls_base_sigkill_timeout seconds after the signal and SIGKILL as long again after that. With
// the default of 1 s a rank under load may be killed before rank 0 has written model.h5 (this
// test failed so on a loaded CI machine); docs/distributed.md gives the option used here.
TEST(Mpi, CtrlCOnMpirunStopsEveryRankWithACheckpointWithinTheKillTimeout) {
  stop_mpirun_and_expect_a_checkpoint("mpi-sigint", SIGINT, "--mca odls_base_sigkill_timeout 3");
}

TEST(Mpi, AKilledRankEndsTheJobWithAClearErrorAndTheLastCheckpointIsIntact) {
  const fs::path dir = test::scratch_dir("mpi-kill");
  const json callbacks = {
      {{"plugin", "checkpoint"},
       {"options", {{"filepath", "checkpoints/e{epoch}.h5"}, {"save_top_k", -1}}}}};
  const fs::path config = write_config(dir, tiny_config(25, 100000, callbacks));
  const fs::path err = dir / "err.txt";
  const pid_t pid = start_mpirun(3, config, dir / "run", err);
  ASSERT_GT(pid, 0);
  // Wait for a few checkpoints, then SIGKILL rank 1 (found by its OMPI_COMM_WORLD_RANK).
  const fs::path checkpoints = dir / "run" / "checkpoints";
  for (int i = 0; i < 300 && !fs::exists(checkpoints / "e3.h5"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(checkpoints / "e3.h5"));
  const auto children = run_command("pgrep -P " + std::to_string(pid));
  pid_t victim = 0;
  std::istringstream ids(children.out);
  for (pid_t child; ids >> child;) {
    std::ifstream env("/proc/" + std::to_string(child) + "/environ");
    const std::string vars((std::istreambuf_iterator<char>(env)), {});
    if (vars.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') != std::string::npos)
      victim = child;
  }
  ASSERT_NE(victim, 0) << children.out;
  const auto killed_at = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const auto took = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
  // The newest checkpoint loads (writes are atomic: a write cut short leaves the previous file).
  fs::path newest;
  for (const auto& e : fs::directory_iterator(checkpoints))
    if (e.path().extension() == ".h5" &&
        (newest.empty() || fs::last_write_time(e.path()) > fs::last_write_time(newest)))
      newest = e.path();
  ASSERT_FALSE(newest.empty());
  const CheckpointData data = read_checkpoint_file(newest);
  EXPECT_TRUE(data.training.has_value());
}

}  // namespace
}  // namespace tandem
