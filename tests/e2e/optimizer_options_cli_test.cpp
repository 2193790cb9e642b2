// `tandem train` with the optimizer options that keep state across steps. use_ema: the run ends
// as Keras' fit does, its trained weights replaced by their moving averages, which model.h5 then
// holds as weights. gradient_accumulation_steps: N batches accumulated train as one batch N
// times their size. Both states are part of the checkpoint, so a run that failed mid-way resumes
// to the bits of a run that never failed. loss_scale_factor: a fixed loss scale, undone exactly.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

json classifier(const fs::path& table, const json& optimizer) {
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["loss"] = {{"class_name", "SparseCategoricalCrossentropy"},
                    {"config", {{"from_logits", true}}}};
  config["optimizer"] = optimizer;
  config["data"] = {{"train", {{"type", "csv"}, {"path", table.string()}, {"y", "label"}}},
                    {"shuffle", false}};
  return config;
}

json adam(bool use_ema) {
  return {{"class_name", "Adam"},
          {"config", {{"learning_rate", 0.01}, {"use_ema", use_ema}, {"ema_momentum", 0.9}}}};
}

// Every trainable weight of the checkpoint against its optimizer slot `slot` ("average"):
// the largest difference.
double weights_against_slot(const CheckpointData& c, const std::string& slot) {
  double worst = 0;
  int compared = 0;
  for (const LayerWeights& layer : c.layers)
    for (const NamedTensor& w : layer.weights)
      for (const NamedTensor& s : c.training->optimizer_slots)
        if (s.name == layer.layer + "/" + w.name + "/" + slot) {
          for (std::int64_t i = 0; i < w.value.size(); ++i)
            worst = std::max(worst, static_cast<double>(std::abs(w.value[i] - s.value[i])));
          ++compared;
        }
  EXPECT_GT(compared, 0) << "no '" << slot << "' slot in the checkpoint";
  return worst;
}

std::vector<float> all_of(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

std::vector<float> all_weights(const CheckpointData& c) {
  std::vector<float> out;
  for (const LayerWeights& layer : c.layers)
    for (const NamedTensor& w : layer.weights) {
      const std::vector<float> values = all_of(w.value);
      out.insert(out.end(), values.begin(), values.end());
    }
  return out;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

TEST(OptimizerOptionsCli, TheRunEndsWithTheAveragesAndAFailedRunResumesToTheSameBits) {
  const fs::path dir = test::scratch_dir("optimizer-options-ema");
  test::write_class_table(dir / "good.csv");
  const auto straight = test::train_in(dir, "straight", classifier(dir / "good.csv", adam(true)));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const CheckpointData done = read_checkpoint_file(dir / "straight" / "model.h5");
  ASSERT_TRUE(done.training);
  EXPECT_EQ(weights_against_slot(done, "average"), 0.0) << "the weights are the averages";
  EXPECT_EQ(done.training->state.at("optimizer").at("config").at("use_ema"), true);

  // The same run without use_ema trains the same steps (the average never feeds back without
  // ema_overwrite_frequency): its weights are the last step's, not the averages.
  ASSERT_EQ(test::train_in(dir, "plain", classifier(dir / "good.csv", adam(false))).exit_code, 0);
  const std::vector<float> plain = all_weights(read_checkpoint_file(dir / "plain" / "model.h5"));
  const std::vector<float> averaged = all_weights(done);
  EXPECT_GT(largest_difference(plain, averaged), 1e-3);

  // A bad label in batch 4 of epoch 1: the run fails after 3 steps with its own weights saved
  // (not averaged: it is to go on), then resumes once the row is fixed.
  test::write_class_table(dir / "table.csv", 30);
  const auto failed = test::train_in(dir, "run", classifier(dir / "table.csv", adam(true)));
  ASSERT_EQ(failed.exit_code, 2) << failed.err;
  const CheckpointData midway = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(midway.training);
  EXPECT_EQ(midway.training->state.at("step"), 3);
  EXPECT_GT(weights_against_slot(midway, "average"), 1e-4) << "a failed run keeps its weights";
  test::write_class_table(dir / "table.csv");
  const auto resumed =
      test::run_command(test::tandem_cli() + " train --resume " + (dir / "run").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(all_weights(read_checkpoint_file(dir / "run" / "model.h5")), averaged);
}

// Five batches of 8 accumulated (gradient_accumulation_steps 5) train plain SGD as one batch of
// all 40 rows does: the mean of five equal batches' means is the mean over the rows (up to float
// rounding). A run failing at its 4th batch (three gradients accumulated, no update made yet)
// resumes to the bits of the run that never failed.
TEST(OptimizerOptionsCli, AccumulatedBatchesTrainAsOneLargeBatchAndResume) {
  const fs::path dir = test::scratch_dir("optimizer-options-accumulation");
  test::write_class_table(dir / "good.csv");
  const json accumulating = {
      {"class_name", "SGD"},
      {"config", {{"learning_rate", 0.5}, {"gradient_accumulation_steps", 5}}}};
  const auto straight = test::train_in(dir, "straight", classifier(dir / "good.csv", accumulating));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  json whole =
      classifier(dir / "good.csv", {{"class_name", "SGD"}, {"config", {{"learning_rate", 0.5}}}});
  whole["batch_size"] = 40;
  ASSERT_EQ(test::train_in(dir, "whole", whole).exit_code, 0);
  const CheckpointData done = read_checkpoint_file(dir / "straight" / "model.h5");
  const std::vector<float> a = all_weights(done),
                           b = all_weights(read_checkpoint_file(dir / "whole" / "model.h5"));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LE(largest_difference(a, b), 1e-5) << "15 batches of 8 in fives against 3 of 40";
  json single = classifier(dir / "good.csv", whole["optimizer"]);
  ASSERT_EQ(test::train_in(dir, "single", single).exit_code, 0);
  EXPECT_GT(largest_difference(a, all_weights(read_checkpoint_file(dir / "single" / "model.h5"))),
            1e-3)
      << "15 updates of batches of 8 train elsewhere";
  EXPECT_EQ(done.training->state.at("optimizer").at("iterations"), 15);

  test::write_class_table(dir / "table.csv", 30);
  const auto failed = test::train_in(dir, "run", classifier(dir / "table.csv", accumulating));
  ASSERT_EQ(failed.exit_code, 2) << failed.err;
  const CheckpointData midway = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(midway.training);
  EXPECT_EQ(midway.training->state.at("step"), 3);
  const auto accumulator = std::find_if(
      midway.training->optimizer_slots.begin(), midway.training->optimizer_slots.end(),
      [](const NamedTensor& s) { return s.name == "dense/kernel/gradient_accumulator"; });
  ASSERT_NE(accumulator, midway.training->optimizer_slots.end());
  EXPECT_GT(largest_difference(all_of(accumulator->value),
                               std::vector<float>(accumulator->value.size(), 0.0f)),
            0.0)
      << "three gradients wait in the accumulator";
  test::write_class_table(dir / "table.csv");
  const auto resumed =
      test::run_command(test::tandem_cli() + " train --resume " + (dir / "run").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(all_weights(read_checkpoint_file(dir / "run" / "model.h5")), a);
}

// Keras 3's loss_scale_factor: the loss scaled by 256 and the gradients unscaled again — exact
// for a power of two, so float32 training reaches the bits of a run without it — and the
// checkpoint's optimizer is the Adam it was, with the key.
TEST(OptimizerOptionsCli, ALossScaleFactorTrainsToTheBitsOfARunWithoutIt) {
  const fs::path dir = test::scratch_dir("optimizer-options-loss-scale-factor");
  test::write_class_table(dir / "good.csv");
  json scaled = adam(false);
  scaled["config"]["loss_scale_factor"] = 256.0;
  ASSERT_EQ(test::train_in(dir, "scaled", classifier(dir / "good.csv", scaled)).exit_code, 0);
  ASSERT_EQ(test::train_in(dir, "plain", classifier(dir / "good.csv", adam(false))).exit_code, 0);
  const CheckpointData a = read_checkpoint_file(dir / "scaled" / "model.h5");
  EXPECT_EQ(all_weights(a), all_weights(read_checkpoint_file(dir / "plain" / "model.h5")));
  const json& optimizer = a.training->state.at("optimizer");
  EXPECT_EQ(optimizer.at("class_name"), "Adam");
  EXPECT_EQ(optimizer.at("config").at("loss_scale_factor"), 256.0);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
