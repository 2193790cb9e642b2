// `tandem train` with an optimizer's use_ema: the run ends as Keras' fit does, its trained weights
// replaced by their moving averages, which model.h5 then holds as weights; the averages are part
// of the training state, so a run that failed mid-way (its weights its own, not yet averaged)
// resumes to the bits of a run that never failed.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

// 40 rows of 4 features and a class index in [0, 3); row `bad_row` labelled 7 when given.
void write_table(const fs::path& file, int bad_row = -1) {
  std::ofstream out(file);
  out << "a,b,c,d,label\n";
  for (int r = 0; r < 40; ++r)
    out << (r % 7) * 0.25 << ',' << (r % 5) * -0.5 << ',' << (r % 3) * 0.75 << ',' << r * 0.01
        << ',' << (r == bad_row ? 7 : r % 3) << '\n';
}

json classifier(const fs::path& table, bool use_ema) {
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  config["loss"] = {{"class_name", "SparseCategoricalCrossentropy"},
                    {"config", {{"from_logits", true}}}};
  config["optimizer"] = {
      {"class_name", "Adam"},
      {"config", {{"learning_rate", 0.01}, {"use_ema", use_ema}, {"ema_momentum", 0.9}}}};
  config["data"] = {{"train", {{"type", "csv"}, {"path", table.string()}, {"y", "label"}}},
                    {"shuffle", false}};
  return config;
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

std::vector<float> all_weights(const CheckpointData& c) {
  std::vector<float> out;
  for (const LayerWeights& layer : c.layers)
    for (const NamedTensor& w : layer.weights)
      out.insert(out.end(), w.value.values().begin(), w.value.values().end());
  return out;
}

TEST(MovingAverageCli, TheRunEndsWithTheAveragesAndAFailedRunResumesToTheSameBits) {
  const fs::path dir = test::scratch_dir("moving-average-cli");
  write_table(dir / "good.csv");
  const auto straight = test::train_in(dir, "straight", classifier(dir / "good.csv", true));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const CheckpointData done = read_checkpoint_file(dir / "straight" / "model.h5");
  ASSERT_TRUE(done.training);
  EXPECT_EQ(weights_against_slot(done, "average"), 0.0) << "the weights are the averages";
  EXPECT_EQ(done.training->state.at("optimizer").at("config").at("use_ema"), true);

  // The same run without use_ema trains the same steps (the average never feeds back without
  // ema_overwrite_frequency): its weights are the last step's, not the averages.
  ASSERT_EQ(test::train_in(dir, "plain", classifier(dir / "good.csv", false)).exit_code, 0);
  const std::vector<float> plain = all_weights(read_checkpoint_file(dir / "plain" / "model.h5"));
  const std::vector<float> averaged = all_weights(done);
  ASSERT_EQ(plain.size(), averaged.size());
  double moved = 0;
  for (std::size_t i = 0; i < plain.size(); ++i)
    moved = std::max(moved, static_cast<double>(std::abs(plain[i] - averaged[i])));
  EXPECT_GT(moved, 1e-3);

  // A bad label in batch 4 of epoch 1: the run fails after 3 steps with its own weights saved
  // (not averaged: it is to go on), then resumes once the row is fixed.
  write_table(dir / "table.csv", 30);
  const auto failed = test::train_in(dir, "run", classifier(dir / "table.csv", true));
  ASSERT_EQ(failed.exit_code, 2) << failed.err;
  const CheckpointData midway = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(midway.training);
  EXPECT_EQ(midway.training->state.at("step"), 3);
  EXPECT_GT(weights_against_slot(midway, "average"), 1e-4) << "a failed run keeps its weights";
  write_table(dir / "table.csv");
  const auto resumed =
      test::run_command(test::tandem_cli() + " train --resume " + (dir / "run").string() + " -q");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(all_weights(read_checkpoint_file(dir / "run" / "model.h5")), averaged);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
