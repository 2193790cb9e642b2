// One engine per run folder (issue 23, item 6, in part): `tandem train` holds a write lock on
// <run>/.tandem.lock (fcntl) for the whole run, so a second run in the same folder exits 2 naming
// the first one's pid instead of overwriting its model.h5 and appending to its events; the lock
// goes with the process (even kill -9), and the folder then resumes.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace {

using nlohmann::json;
using test::run_command;
namespace fs = std::filesystem;

TEST(RunFolderLockCli, ASecondEngineInTheSameFolderIsRefused) {
  const fs::path dir = test::scratch_dir("run-folder-lock");
  const json config = {
      {"name", "long"}, {"seed", 1}, {"epochs", 100000}, {"batch_size", 8},
      {"model", json::parse(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
          {"class_name": "Dense", "config": {"units": 3}}]}})")},
      {"optimizer", "sgd"}, {"loss", "mse"},
      {"data", {{"train", {{"type", "synthetic"}, {"task", "regression"}, {"samples", 16},
                           {"x_shape", {4}}, {"y_shape", {3}}}}}}};
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

  // kill -9: no checkpoint from the first run, and the kernel drops its lock with it.
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(first, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  second = run_command(test::tandem_cli() + " train " + (dir / "long.json").string() +
                       " -q --set epochs=1 --run-dir " + run.string());
  EXPECT_EQ(second.exit_code, 0) << second.err;
}

}  // namespace
}  // namespace tandem
