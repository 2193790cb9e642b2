// A run that fails between two steps — a bad label in a late batch, a callback failing at an
// epoch's end — saves the weights of the steps done in model.h5 before it reports the failure,
// and resumes from there once the cause is fixed, to the bits of a run that never failed. Such a
// run used to leave only config.json and events.jsonl: a whole epoch lost for one bad row.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

json classifier(const fs::path& table) {
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["loss"] = {{"class_name", "SparseCategoricalCrossentropy"},
                    {"config", {{"from_logits", true}}}};
  config["optimizer"] = {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}};
  config["data"] = {{"train", {{"type", "csv"}, {"path", table.string()}, {"y", "label"}}},
                    {"shuffle", false}};
  return config;
}

void expect_same_weights(const fs::path& a, const fs::path& b) {
  const CheckpointData x = read_checkpoint_file(a), y = read_checkpoint_file(b);
  ASSERT_EQ(x.layers.size(), y.layers.size());
  for (std::size_t l = 0; l < x.layers.size(); ++l)
    for (std::size_t w = 0; w < x.layers[l].weights.size(); ++w) {
      const Tensor& p = x.layers[l].weights[w].value;
      const Tensor& q = y.layers[l].weights[w].value;
      ASSERT_EQ(p.size(), q.size());
      EXPECT_TRUE(std::equal(p.values().begin(), p.values().end(), q.values().begin()))
          << x.layers[l].weights[w].name;
    }
}

TEST(FailureResumeCli, ABadLabelInALateBatchSavesTheStepsDoneAndResumesBitwise) {
  const fs::path dir = test::scratch_dir("failure-resume-label");
  test::write_class_table(dir / "good.csv");
  ASSERT_EQ(test::train_in(dir, "straight", classifier(dir / "good.csv")).exit_code, 0);

  test::write_class_table(dir / "table.csv", 30);  // batch 4 of epoch 1 (rows 24-31), after 3 steps
  const auto failed = test::train_in(dir, "run", classifier(dir / "table.csv"));
  EXPECT_EQ(failed.exit_code, 2) << failed.err;
  EXPECT_NE(failed.err.find("sample 30 of csv"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("label 7"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("the weights of the 3 steps done are saved in " +
                            (dir / "run" / "model.h5").string()),
            std::string::npos)
      << failed.err;
  const CheckpointData saved = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(saved.training);
  EXPECT_EQ(saved.training->state.at("step"), 3) << saved.training->state.dump();

  test::write_class_table(dir / "table.csv");  // the row fixed
  const auto resumed =
      test::run_command(test::tandem_cli() + " train --resume " + (dir / "run").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expect_same_weights(dir / "run" / "model.h5", dir / "straight" / "model.h5");
}

// A callback failing in on_epoch_end (a checkpoint filepath naming a key the logs lack, found
// only when it is formatted) ends the run with that epoch counted as done: the resumed run goes
// on with the next epoch, each epoch in the history once.
TEST(FailureResumeCli, ACallbackFailingAtAnEpochsEndKeepsThatEpoch) {
  const fs::path dir = test::scratch_dir("failure-resume-callback");
  test::write_class_table(dir / "good.csv");
  json config = classifier(dir / "good.csv");
  ASSERT_EQ(test::train_in(dir, "straight", config).exit_code, 0);

  json failing = config;
  failing["callbacks"] = {
      {{"plugin", "checkpoint"}, {"options", {{"filepath", "ck/{no_such_key}.h5"}}}}};
  const auto failed = test::train_in(dir, "run", failing);
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_NE(failed.err.find("{no_such_key}"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("the weights of the 5 steps done are saved in"), std::string::npos)
      << failed.err;

  test::write_text(dir / "run.json", config.dump());  // the callback left out
  const auto resumed =
      test::run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                        " --resume " + (dir / "run").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const json history = test::run_history(dir / "run");
  const json straight = test::run_history(dir / "straight");
  ASSERT_EQ(history.size(), 3u) << history;
  EXPECT_EQ(history, straight);
  expect_same_weights(dir / "run" / "model.h5", dir / "straight" / "model.h5");
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
