// Callbacks whose decisions depend on the run so far carry their state across --resume: a run
// stopped after some epochs and resumed ends bitwise where the uninterrupted run ends. Before,
// lr_scheduler took the resumed optimizer's rate (the one the schedule had reached) as its base
// and reduce_lr_on_plateau forgot its best value: both trained on other rates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

// A classifier on seeded synthetic data, 40 steps of 8 per epoch, with `callbacks`.
json config_with(const json& callbacks) {
  json config =
      json::parse(R"({"name": "state", "seed": 3, "epochs": 4, "batch_size": 8, "verbose": 0,
      "model": {"class_name": "Sequential", "config": {"name": "s", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 6]}},
          {"class_name": "Dense", "config": {"units": 16, "activation": "relu"}},
          {"class_name": "Dense", "config": {"units": 3}}]}},
      "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01}},
      "loss": {"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": true}},
      "data": {"train": {"type": "synthetic", "task": "classes", "classes": 3, "samples": 320,
                         "x_shape": [6], "seed": 1},
               "validation": {"type": "synthetic", "task": "classes", "classes": 3,
                              "samples": 64, "x_shape": [6], "seed": 2}}})");
  config["callbacks"] = callbacks;
  return config;
}

// Trains `callbacks` straight for 4 epochs and for 2 then resumed to 4: the weights and the
// history's learning rates must be the same.
void expect_resume_equals_straight(const std::string& name, const json& callbacks) {
  const fs::path dir = test::scratch_dir("callback-state-" + name);
  const json config = config_with(callbacks);
  test::write_text(dir / "run.json", config.dump());
  const std::string train = test::tandem_cli() + " train " + (dir / "run.json").string();
  auto r = test::run_command(train + " --run-dir " + (dir / "straight").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command(train + " --set epochs=2 --run-dir " + (dir / "part").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command(test::tandem_cli() + " train --resume " +
                        (dir / "part" / "model.h5").string() + " --set epochs=4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CheckpointData a = read_checkpoint_file(dir / "straight" / "model.h5");
  const CheckpointData b = read_checkpoint_file(dir / "part" / "model.h5");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t w = 0; w < a.layers[l].weights.size(); ++w) {
      const Tensor& p = a.layers[l].weights[w].value;
      const Tensor& q = b.layers[l].weights[w].value;
      ASSERT_EQ(p.size(), q.size());
      for (std::int64_t i = 0; i < p.size(); ++i)
        ASSERT_EQ(p.data()[i], q.data()[i]) << name << ": " << a.layers[l].layer << " at " << i;
    }
  ASSERT_TRUE(a.training && b.training);
  EXPECT_EQ(a.training->state["history"], b.training->state["history"]) << name;
  EXPECT_EQ(a.training->state["callbacks"], b.training->state["callbacks"]) << name;
}

TEST(CallbackStateResume, AWarmUpScheduleGoesOnFromTheRunsOwnBaseRate) {
  // The warm-up ends in epoch 2; the resumed run's optimizer starts at its ramp's rate.
  expect_resume_equals_straight("warmup", json::array({{{"plugin", "lr_scheduler"},
                                                        {"options",
                                                         {{"schedule", "exponential"},
                                                          {"decay_rate", 0.99},
                                                          {"interval", "step"},
                                                          {"warmup_steps", 60}}}}}));
}

TEST(CallbackStateResume, APlateauKeepsItsBestValueWaitAndCooldown) {
  // A reduction at the end of epoch 2 (the checkpoint), its cooldown over epoch 3, the next
  // reduction at the end of epoch 4: the lr of epoch 4 tells whether the cooldown came back.
  expect_resume_equals_straight("plateau", json::array({{{"plugin", "reduce_lr_on_plateau"},
                                                         {"options",
                                                          {{"monitor", "val_loss"},
                                                           {"patience", 0},
                                                           {"min_delta", 0.05},
                                                           {"factor", 0.5},
                                                           {"cooldown", 2}}}}}));
}

TEST(CallbackStateResume, ACorruptSavedStateIsAnErrorNamingTheCallback) {
  const fs::path dir = test::scratch_dir("callback-state-corrupt");
  const json callbacks =
      json::array({{{"plugin", "lr_scheduler"},
                    {"options", {{"schedule", "exponential"}, {"decay_rate", 0.9}}}}});
  const json config = config_with(callbacks);
  test::write_text(dir / "run.json", config.dump());
  auto r = test::run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                             " --set epochs=1 --run-dir " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CheckpointData data = read_checkpoint_file(dir / "run" / "model.h5");
  ASSERT_TRUE(data.training);
  EXPECT_TRUE(data.training->state["callbacks"]["lr_scheduler"].contains("initial_lr"));
  data.training->state["callbacks"]["lr_scheduler"] = {{"initial_lr", "fast"}};
  fs::create_directories(dir / "bad");
  write_checkpoint_file(dir / "bad" / "model.h5", data);
  r = test::run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                        " --resume " + (dir / "bad" / "model.h5").string() + " --set epochs=2");
  EXPECT_EQ(r.exit_code, 2) << r.err;  // bad input, as an unreadable state is (it was 1)
  EXPECT_NE(r.err.find("callback 'lr_scheduler' failed in restore_state: expected "
                       "{\"initial_lr\": a finite rate >= 0}"),
            std::string::npos)
      << r.err;
}

// A callback left out of the config since the checkpoint was saved: its state is unused, and the
// resumed run says so (it was dropped without a word).
TEST(CallbackStateResume, AStateNoCallbackTakesIsNamedInAWarning) {
  const fs::path dir = test::scratch_dir("callback-state-orphan");
  json config =
      config_with(json::array({{{"plugin", "lr_scheduler"},
                                {"options", {{"schedule", "exponential"}, {"decay_rate", 0.9}}}}}));
  test::write_text(dir / "run.json", config.dump());
  auto r = test::run_command(test::tandem_cli() + " train " + (dir / "run.json").string() +
                             " --set epochs=1 --run-dir " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  config["callbacks"] = json::array();
  test::write_text(dir / "plain.json", config.dump());
  r = test::run_command(test::tandem_cli() + " train " + (dir / "plain.json").string() +
                        " --resume " + (dir / "run" / "model.h5").string() + " --set epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("holds the saved state of callback 'lr_scheduler', which this run does not "
                       "have: left unused"),
            std::string::npos)
      << r.err;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
