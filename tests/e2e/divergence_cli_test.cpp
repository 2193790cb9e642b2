// A loss that turns NaN or infinite with no callback to stop the run (terminate_on_nan): the run
// fails (exit 1) but loses nothing. It used to throw from the step: no model.h5, no backup, and
// the message's "the weights of the previous step are kept" kept them nowhere.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> events_of(const fs::path& run) {
  std::vector<json> out;
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

TEST(DivergenceCli, ADivergedRunSavesTheStepBeforeAndItsBackupAndFails) {
  const fs::path dir = test::scratch_dir("divergence");
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["data"]["train"]["samples"] = 64;  // 8 steps an epoch
  config["optimizer"] = {{"class_name", "SGD"}, {"config", {{"learning_rate", 1e8}}}};
  config["callbacks"] = {
      {{"plugin", "backup_and_restore"}, {"options", {{"backup_dir", (dir / "backup").string()}}}}};
  const auto r = test::train_in(dir, "run", config);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the loss became"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the weights of the step before are saved in " +
                       (dir / "run" / "model.h5").string() + ", resumable there with --resume"),
            std::string::npos)
      << r.err;
  // model.h5 and the backup hold the position of the step that diverged, not past it.
  const CheckpointData saved = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(saved.training);
  const std::int64_t step = saved.training->state["step"];
  EXPECT_TRUE(fs::exists(dir / "backup" / "backup.h5"));
  const CheckpointData backup = read_checkpoint_file(dir / "backup" / "backup.h5");
  ASSERT_TRUE(backup.training);
  EXPECT_EQ(backup.training->state["step"], step);
  for (const auto& layer : saved.layers)
    for (const auto& w : layer.weights)
      for (std::int64_t i = 0; i < w.value.size(); ++i)
        ASSERT_TRUE(std::isfinite(w.value.data()[i])) << layer.layer << "/" << w.name;
  std::vector<std::string> tail;
  for (const json& e : events_of(dir / "run")) tail.push_back(e["event"]);
  ASSERT_GE(tail.size(), 4u);
  EXPECT_EQ(
      std::vector<std::string>(tail.end() - 4, tail.end()),
      (std::vector<std::string>{"stopped", "backup_saved", "checkpoint_saved", "run_failed"}));
  const json saved_event = events_of(dir / "run").rbegin()[1];
  EXPECT_EQ(saved_event["reason"], "diverged");
  EXPECT_EQ(saved_event["step"], step);
  // Resumed, it starts at that very step (whose weights are already too large here: it
  // diverges again at once, in the same place).
  const std::string where = r.err.substr(r.err.find("the loss became"), 50);
  const auto resumed = test::run_command(test::tandem_cli() + " train --resume " +
                                         (dir / "run" / "model.h5").string() + " -q");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.err;
  EXPECT_NE(resumed.err.find(where), std::string::npos) << where << "\n" << resumed.err;
}

// A learning rate changed in the config at --resume applies (the checkpoint's rate in force, which
// a schedule may have moved, applies only when the config's is the one its run was given).
TEST(DivergenceCli, ALearningRateChangedAtResumeApplies) {
  const fs::path dir = test::scratch_dir("resume-rate");
  json config = test::tiny_regression_config();
  config["optimizer"] = {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.1}}}};
  ASSERT_EQ(test::train_in(dir, "run", config).exit_code, 0);
  const std::string resume =
      test::tandem_cli() + " train --resume " + (dir / "run" / "model.h5").string() + " -q";
  auto r = test::run_command(resume + " --set epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command(resume + " --set epochs=3 --set optimizer.config.learning_rate=0.05");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> rates;
  for (const json& e : events_of(dir / "run"))
    if (e["event"] == "epoch_ended") rates.push_back(e["lr"]);
  EXPECT_EQ(rates, (std::vector<double>{0.1, 0.1, 0.05}));
  // Neither the epochs nor the rate is a change to warn of (a resume changes them on purpose).
  EXPECT_EQ(r.err.find("resuming with settings"), std::string::npos) << r.err;
}

// Other settings changed at --resume apply too, but the resumed run is no longer the one an
// uninterrupted run would have been: a warning names each change (they applied silently).
TEST(DivergenceCli, OtherSettingsChangedAtResumeAreNamed) {
  const fs::path dir = test::scratch_dir("resume-changed");
  ASSERT_EQ(test::train_in(dir, "run", test::tiny_regression_config()).exit_code, 0);
  const auto r = test::run_command(test::tandem_cli() + " train --resume " +
                                   (dir / "run" / "model.h5").string() +
                                   " -q --set epochs=2 --set seed=99 --set loss=mae");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming with settings other than the checkpoint's run had"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("loss: \"mse\" before, \"mae\" now"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("seed: 1 before, 99 now"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("epochs"), std::string::npos) << r.err;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
