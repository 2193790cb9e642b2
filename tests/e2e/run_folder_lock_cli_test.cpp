// One engine per run folder, one run per folder (issue 23, item 6, in part): `tandem train` holds
// a write lock on <run>/.tandem.lock (fcntl) for the whole run, so a second run in the same
// folder exits 2 naming the first one's pid instead of overwriting its model.h5 and appending to
// its events; the lock goes with the process (even kill -9). A folder holding another run's
// record is refused too, unless --resume continues it or --overwrite replaces it; the engine
// that takes a folder removes the temporary files of writers that died mid-write.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

TEST(RunFolderLockCli, ASecondEngineInTheSameFolderIsRefused) {
  const fs::path dir = test::scratch_dir("run-folder-lock");
  json config = test::tiny_regression_config();
  config["name"] = "long";
  config["epochs"] = 100000;
  test::write_text(dir / "long.json", config.dump());
  const fs::path run = dir / "run";
  // The first engine, in the background; its pid on stdout.
  const auto started = run_command(test::tandem_cli() + " train " + (dir / "long.json").string() +
                                   " -q --run-dir " + run.string() + " > /dev/null 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const pid_t first = std::stoi(started.out);
  for (int i = 0; i < 300 && !fs::exists(run / "events.jsonl"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(run / "events.jsonl"));

  auto second = run_command(test::tandem_cli() + " train " + (dir / "long.json").string() +
                            " -q --set epochs=1 --run-dir " + run.string());
  EXPECT_EQ(second.exit_code, 2) << second.err;
  EXPECT_NE(second.err.find("is in use by another tandem process (pid " + std::to_string(first) + ")"),
            std::string::npos)
      << second.err;
  // It wrote nothing there: the first run's config stands.
  EXPECT_EQ(json::parse(test::read_text(run / "config.json"))["epochs"], 100000);

  // kill -9 once it has trained: no checkpoint from the first run, and the kernel drops its
  // lock with it.
  for (int i = 0; i < 300 && test::read_text(run / "events.jsonl").find("\"batch_ended\"") ==
                                 std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(first, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The folder is free now, but it holds the killed run's record: not replaced unless asked,
  // and, with no checkpoint to resume, --resume is not offered.
  second = run_command(test::tandem_cli() + " train " + (dir / "long.json").string() +
                       " -q --set epochs=1 --run-dir " + run.string());
  EXPECT_EQ(second.exit_code, 2) << second.err;
  EXPECT_NE(second.err.find("holds another run (events.jsonl, config.json); it left no "
                            "checkpoint to resume"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(second.err.find("--resume"), std::string::npos) << second.err;
  // Temporary files of writers that died mid-write go when the next engine takes the folder;
  // a live writer's stays.
  const std::string dead = run_command("sh -c 'echo $$'").out;  // that shell has exited
  const std::string dead_pid = dead.substr(0, dead.find('\n'));
  fs::create_directories(run / "checkpoints");
  const std::vector<fs::path> stray{run / (".model.h5.tmp-" + dead_pid + "-0"),
                                    run / "checkpoints" / (".epoch_1.h5.tmp-" + dead_pid + "-3")};
  for (const auto& f : stray) test::write_text(f, "half a file");
  const fs::path live = run / (".notes.txt.tmp-" + std::to_string(::getpid()) + "-0");
  test::write_text(live, "being written");
  second = run_command(test::tandem_cli() + " train " + (dir / "long.json").string() +
                       " -q --set epochs=1 --overwrite --run-dir " + run.string());
  EXPECT_EQ(second.exit_code, 0) << second.err;
  for (const auto& f : stray) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::exists(live));
}

// A run refused as it began (a callback's check at on_train_begin: a cosine schedule whose floor
// is above the optimizer's rate, which only the start of training knows) trained nothing: the
// same command, corrected, takes its folder without --overwrite, and the stream holds the new
// run alone.
TEST(RunFolderLockCli, ARunThatNeverTrainedIsReplacedByTheNextOne) {
  const fs::path dir = test::scratch_dir("run-folder-never-trained");
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["callbacks"] = json::array(
      {{{"plugin", "lr_scheduler"}, {"options", {{"schedule", "cosine"}, {"min_lr", 0.5}}}}});
  auto r = test::train_in(dir, "run", config);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("callbacks[0].options.min_lr"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(dir / "run" / "events.jsonl"));
  config["callbacks"][0]["options"]["min_lr"] = 0.001;
  r = test::train_in(dir, "run", config);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string events = test::read_text(dir / "run" / "events.jsonl");
  EXPECT_EQ(events.find("\"run_started\""), events.rfind("\"run_started\""))
      << "one run in the stream";
  EXPECT_EQ(events.find("\"run_failed\""), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "run" / "model.h5"));

  // A run killed before its first batch, its last append torn: replaced too. A stream with an
  // unreadable line before its end is not one Tandem wrote: refused, and left as it is.
  const std::string started = events.substr(0, events.find('\n') + 1);
  const json plain = test::tiny_regression_config();
  for (const bool garbage_inside : {false, true}) {
    const fs::path killed = dir / (garbage_inside ? "odd" : "killed");
    fs::create_directories(killed);
    test::write_text(killed / "config.json", plain.dump());
    const std::string stream = garbage_inside ? started + "{\"event\": \"ep\n" + started
                                              : started + "{\"event\": \"epoch_st";
    test::write_text(killed / "events.jsonl", stream);
    r = test::train_in(dir, garbage_inside ? "odd" : "killed", plain);
    EXPECT_EQ(r.exit_code, garbage_inside ? 2 : 0) << r.err;
    if (garbage_inside) {
      EXPECT_EQ(test::read_text(killed / "events.jsonl"), stream);
    } else {
      EXPECT_TRUE(fs::exists(killed / "model.h5"));
    }
  }
}

// A cosine schedule that would reach a rate of 0 before the run ends is refused by `tandem
// check` (in its plugin child too) and by `tandem train` before the run folder exists: both
// tell the plugin the run's length (CallbackSetup::epochs, steps_per_epoch).
TEST(RunFolderLockCli, AScheduleTooShortForTheRunIsRefusedBeforeTheFolderExists) {
  const fs::path dir = test::scratch_dir("run-folder-short-schedule");
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  for (const auto& [interval, total] : {std::pair{"epoch", 2}, std::pair{"step", 5}}) {
    config["callbacks"] = json::array(
        {{{"plugin", "lr_scheduler"},
          {"options", {{"schedule", "cosine"}, {"interval", interval}, {"total", total}}}}});
    test::write_text(dir / "short.json", config.dump());
    // 3 epochs of 2 steps (16 samples in batches of 8): 3 epochs or 6 steps.
    const std::string expected = std::string("after ") + std::to_string(total) + " " + interval +
                                 "s but the run goes on (" + (total == 2 ? "3" : "6") + ")";
    for (const std::string& json_flag : {std::string(""), std::string(" --json")}) {
      const auto c = run_command(test::tandem_cli() + " check" + json_flag + " " +
                                 (dir / "short.json").string());
      EXPECT_EQ(c.exit_code, 2) << c.out << c.err;
      EXPECT_NE((c.out + c.err).find("callbacks[0].options.total"), std::string::npos)
          << c.out << c.err;
      EXPECT_NE((c.out + c.err).find(expected), std::string::npos) << c.out << c.err;
    }
    const auto r = run_command(test::tandem_cli() + " train -q " + (dir / "short.json").string() +
                               " --run-dir " + (dir / "run").string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "run")) << interval;
  }
}

TEST(RunFolderLockCli, AFinishedRunIsNotOverwrittenUnlessAsked) {
  const fs::path dir = test::scratch_dir("run-folder-reuse");
  json config = test::tiny_regression_config();
  config["name"] = "again";
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const fs::path run = dir / "run";
  const std::string model_before = test::read_text(run / "model.h5");
  const std::string train = test::tandem_cli() + " train " + (dir / "run.json").string() + " -q";
  auto r = run_command(train + " --set seed=2 --run-dir " + run.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds another run (events.jsonl, model.h5, config.json)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(test::read_text(run / "model.h5"), model_before);  // untouched
  r = run_command(train + " --overwrite --resume " + run.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // --overwrite: a new run, its own stream from the start.
  r = run_command(train + " --set seed=2 --overwrite --run-dir " + run.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(test::read_text(run / "model.h5"), model_before);
  const std::string events = test::read_text(run / "events.jsonl");
  EXPECT_EQ(events.find("\"run_started\""), events.rfind("\"run_started\"")) << "one run in the stream";
  // --resume continues it in place, as before.
  r = run_command(train + " --resume " + run.string() + " --set epochs=2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --overwrite removes what the old run left: its checkpoints, their index, its model.h5 (a
// stale index listed the old run's epochs beside the new one's, and a new run that failed early
// left the old model.h5 for --resume to take). Files of the user's in the folder stay.
TEST(RunFolderLockCli, OverwriteRemovesTheOldRunsCheckpointsAndKeepsOtherFiles) {
  const fs::path dir = test::scratch_dir("run-folder-overwrite");
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["callbacks"] = {{{"plugin", "checkpoint"},
                          {"options", {{"filepath", "ck/w-{epoch:02d}.h5"}, {"monitor", "loss"}}}}};
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const fs::path run = dir / "run";
  ASSERT_TRUE(fs::exists(run / "ck" / "w-03.h5"));
  test::write_text(run / "notes.txt", "mine");
  const auto r = run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                             " -q --set epochs=1 --overwrite --run-dir " + run.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(run / "ck" / "w-01.h5"));
  EXPECT_FALSE(fs::exists(run / "ck" / "w-02.h5"));
  EXPECT_FALSE(fs::exists(run / "ck" / "w-03.h5"));
  const json index = json::parse(test::read_text(run / "ck" / "checkpoints.json"));
  ASSERT_EQ(index.at("checkpoints").size(), 1u) << index.dump();
  EXPECT_EQ(index["checkpoints"][0].at("file"), "w-01.h5");
  EXPECT_EQ(test::read_text(run / "notes.txt"), "mine");
}

// A crafted run folder cannot make the engine write elsewhere or hang: a lock or a stream that
// is a symbolic link is refused (the lock's pid truncated the link's target; the stream was
// appended to it), a stream that is a FIFO is refused (the engine waited for a reader forever),
// and --overwrite stays out of a subfolder that links to another run (it deleted that run's
// checkpoints).
TEST(RunFolderLockCli, ACraftedRunFolderIsRefusedNotFollowed) {
  const fs::path dir = test::scratch_dir("run-folder-crafted");
  const json config = test::tiny_regression_config();
  json with_checkpoints = config;
  with_checkpoints["callbacks"] = {{{"plugin", "checkpoint"}, {"options", {{"monitor", "loss"}}}}};
  ASSERT_EQ(test::train_in(dir, "victim", with_checkpoints).exit_code, 0);
  test::write_text(dir / "precious.txt", "precious");
  const std::string train = test::tandem_cli() + " train " + (dir / "victim.json").string() + " -q";
  for (const char* crafted : {".tandem.lock", "events.jsonl"}) {
    const fs::path run = dir / (std::string("link") + crafted);
    ASSERT_EQ(test::train_in(dir, run.filename().string(), config).exit_code, 0);
    fs::remove(run / crafted);
    fs::create_symlink(dir / "precious.txt", run / crafted);
    const auto r = test::run_command("timeout 60 " + test::tandem_cli() + " train --resume " +
                                     run.string() + " --set epochs=2 -q");
    EXPECT_NE(r.exit_code, 0) << crafted;
    EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << crafted << ": " << r.err;
    EXPECT_EQ(test::read_text(dir / "precious.txt"), "precious") << crafted;
  }
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(test::train_in(dir, "fifo", config).exit_code, 0);
  fs::remove(fifo / "events.jsonl");
  ASSERT_EQ(test::run_command("mkfifo " + (fifo / "events.jsonl").string()).exit_code, 0);
  auto r = test::run_command("timeout 60 " + test::tandem_cli() + " train --resume " +
                             fifo.string() + " --set epochs=2 -q");
  EXPECT_NE(r.exit_code, 124) << "hung on the FIFO";
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
  const fs::path linking = dir / "linking";
  ASSERT_EQ(test::train_in(dir, "linking", config).exit_code, 0);
  fs::create_directory_symlink(dir / "victim" / "checkpoints", linking / "c");
  r = test::run_command(train + " --overwrite --run-dir " + linking.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "victim" / "checkpoints" / "checkpoints.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "victim" / "checkpoints"),
                          fs::directory_iterator{}),
            2);  // its checkpoint and index
}

// --resume of a checkpoint named from its own folder ("model.h5": no parent path) resumes.
TEST(RunFolderLockCli, ResumingACheckpointInTheWorkingFolder) {
  const fs::path dir = test::scratch_dir("run-folder-here");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const auto r = test::run_command("cd " + (dir / "run").string() + " && " + test::tandem_cli() +
                                   " train --resume model.h5 --set epochs=2 -q");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --resume writes into its checkpoint's own run folder, or into one that holds no run: resuming
// into another run's folder used to replace that run's model.h5 and config.json and append to
// its events. A resume with no epoch left to train is refused too (it only rewrote model.h5).
TEST(RunFolderLockCli, AResumedRunDoesNotWriteOverAnotherRun) {
  const fs::path dir = test::scratch_dir("run-folder-resume");
  json config = test::tiny_regression_config();
  ASSERT_EQ(test::train_in(dir, "mine", config).exit_code, 0);
  config["seed"] = 2;
  ASSERT_EQ(test::train_in(dir, "other", config).exit_code, 0);
  const fs::path mine = dir / "mine", other = dir / "other";
  const std::string other_model = test::read_text(other / "model.h5");
  const std::string other_events = test::read_text(other / "events.jsonl");
  const std::string train = test::tandem_cli() + " train -q --set epochs=2 --resume ";
  auto r = run_command(train + (mine / "model.h5").string() + " --run-dir " + other.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds another run (events.jsonl, model.h5, config.json); a run resumed "
                       "from " +
                       (mine / "model.h5").string()),
            std::string::npos)
      << r.err;
  EXPECT_EQ(test::read_text(other / "model.h5"), other_model);
  EXPECT_EQ(test::read_text(other / "events.jsonl"), other_events);

  // A checkpoint copied next to an unrelated model.h5, resumed where it lies.
  const fs::path loose = dir / "loose";
  fs::create_directories(loose);
  fs::copy_file(mine / "model.h5", loose / "ck.h5");
  fs::copy_file(other / "model.h5", loose / "model.h5");
  r = run_command(train + (loose / "ck.h5").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds another run (model.h5)"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_text(loose / "model.h5"), other_model);

  // Nothing left to train: refused, the checkpoint untouched.
  const std::string mine_model = test::read_text(mine / "model.h5");
  r = run_command(test::tandem_cli() + " train -q --set epochs=1 --resume " + mine.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("has trained 1 epoch already, and epochs is 1: nothing is left to train; "
                       "continue it with --set epochs=2 or more"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(test::read_text(mine / "model.h5"), mine_model);

  // Into an empty folder, and in place: both go on.
  r = run_command(train + (mine / "model.h5").string() + " --run-dir " + (dir / "fork").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_command(train + mine.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace tandem
