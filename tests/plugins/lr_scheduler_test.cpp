// lr_scheduler: the learning rate of every epoch / step of a real fit equals the formula.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// The learning rate at each epoch begin and before each batch (after the scheduler has run).
class LrRecorder : public Callback {
 public:
  std::string name() const override { return "lr_recorder"; }
  void on_epoch_begin(CallbackContext& c, int, const Logs&) override {
    epoch_lrs.push_back(c.learning_rate());
  }
  void on_train_batch_begin(CallbackContext& c, std::int64_t, const Logs&) override {
    step_lrs.push_back(c.learning_rate());
  }
  std::vector<double> epoch_lrs, step_lrs;
};

// 32 samples in batches of 8: 4 steps per epoch. The optimizer starts at 0.01.
std::shared_ptr<LrRecorder> fit_with(const json& options, int epochs) {
  PluginRun run("cpu:1", 0.01);
  run.add("lr_scheduler", options);
  auto recorder = std::make_shared<LrRecorder>();
  run.bus.add(recorder);
  run.fit(std::make_shared<TableDataset>(32), nullptr, epochs, 8);
  EXPECT_EQ(recorder->step_lrs.size(), static_cast<std::size_t>(epochs) * 4);
  return recorder;
}

double cosine(double lr0, double min_lr, double t, double total) {
  return min_lr +
         (lr0 - min_lr) * (1 + std::cos(std::numbers::pi * std::min(t, total) / total)) / 2;
}

void expect_all_eq(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "at " << i;
}

TEST(LrSchedulerPlugin, StepDropsByFactorEveryNEpochs) {
  auto r =
      fit_with({{"schedule", "step"}, {"initial_lr", 0.1}, {"factor", 0.5}, {"drop_every", 2}}, 5);
  expect_all_eq(r->epoch_lrs, {0.1, 0.1, 0.05, 0.05, 0.025});
  // Constant within an epoch.
  for (std::size_t s = 0; s < r->step_lrs.size(); ++s)
    EXPECT_DOUBLE_EQ(r->step_lrs[s], r->epoch_lrs[s / 4]);
}

TEST(LrSchedulerPlugin, StepPerStepWithTheDefaultFactorAndTheOptimizersRate) {
  // initial_lr from the optimizer (0.01); factor 0.1 by default; a drop every 3 steps.
  auto r = fit_with({{"schedule", "step"}, {"interval", "step"}, {"drop_every", 3}}, 2);
  std::vector<double> want;
  for (int s = 0; s < 8; ++s) want.push_back(0.01 * std::pow(0.1, s / 3));
  expect_all_eq(r->step_lrs, want);
  EXPECT_DOUBLE_EQ(r->step_lrs[3], 0.001);
  EXPECT_DOUBLE_EQ(r->step_lrs[6], 0.0001);
}

TEST(LrSchedulerPlugin, ExponentialPerEpochAndPerStep) {
  auto e = fit_with({{"schedule", "exponential"}, {"initial_lr", 0.2}, {"decay_rate", 0.5}}, 4);
  expect_all_eq(e->epoch_lrs, {0.2, 0.1, 0.05, 0.025});
  auto s = fit_with({{"schedule", "exponential"},
                     {"interval", "step"},
                     {"initial_lr", 0.05},
                     {"decay_rate", 0.9}},
                    2);
  std::vector<double> want;
  for (int k = 0; k < 8; ++k) want.push_back(0.05 * std::pow(0.9, k));
  expect_all_eq(s->step_lrs, want);
}

TEST(LrSchedulerPlugin, CosinePerEpochOverTheRun) {
  // total = the run's 5 epochs: lr(e) = 0.01 + 0.09 (1 + cos(pi e / 5)) / 2.
  auto r = fit_with({{"schedule", "cosine"}, {"initial_lr", 0.1}, {"min_lr", 0.01}}, 5);
  expect_all_eq(r->epoch_lrs, {0.1, cosine(0.1, 0.01, 1, 5), cosine(0.1, 0.01, 2, 5),
                               cosine(0.1, 0.01, 3, 5), cosine(0.1, 0.01, 4, 5)});
  EXPECT_DOUBLE_EQ(r->epoch_lrs[1], 0.01 + 0.09 * (1 + std::cos(std::numbers::pi / 5)) / 2);
}

TEST(LrSchedulerPlugin, CosinePerStepHoldsMinLrAfterTotal) {
  auto r = fit_with({{"schedule", "cosine"},
                     {"interval", "step"},
                     {"initial_lr", 0.1},
                     {"min_lr", 0.001},
                     {"total", 6}},
                    2);
  std::vector<double> want;
  for (int s = 0; s < 8; ++s) want.push_back(cosine(0.1, 0.001, s, 6));
  expect_all_eq(r->step_lrs, want);
  EXPECT_DOUBLE_EQ(r->step_lrs[3], (0.1 + 0.001) / 2);  // half-way
  EXPECT_DOUBLE_EQ(r->step_lrs[6], 0.001);
  EXPECT_DOUBLE_EQ(r->step_lrs[7], 0.001);
}

TEST(LrSchedulerPlugin, LinearWarmupRampsThenHoldsTheRate) {
  auto r = fit_with({{"schedule", "linear_warmup"}, {"initial_lr", 0.02}, {"warmup_steps", 5}}, 2);
  expect_all_eq(r->step_lrs, {0.004, 0.008, 0.012, 0.016, 0.02, 0.02, 0.02, 0.02});
  // From a start rate.
  auto s = fit_with({{"schedule", "linear_warmup"},
                     {"initial_lr", 0.02},
                     {"warmup_steps", 4},
                     {"warmup_start_lr", 0.01}},
                    2);
  expect_all_eq(s->step_lrs, {0.0125, 0.015, 0.0175, 0.02, 0.02, 0.02, 0.02, 0.02});
}

TEST(LrSchedulerPlugin, WarmupHandsOverToCosineOnTheRestOfTheRun) {
  // 3 warm-up steps, then a cosine over the remaining 8 - 3 = 5 steps, its clock starting at 0.
  auto r = fit_with({{"schedule", "cosine"},
                     {"interval", "step"},
                     {"initial_lr", 0.1},
                     {"min_lr", 0.01},
                     {"warmup_steps", 3}},
                    2);
  std::vector<double> want = {0.1 / 3, 0.2 / 3, 0.1};
  for (int t = 0; t < 5; ++t) want.push_back(cosine(0.1, 0.01, t, 5));
  expect_all_eq(r->step_lrs, want);
}

TEST(LrSchedulerPlugin, WarmupHandsOverToAnEpochSchedule) {
  // 6 warm-up steps run into epoch 1 (0-based); after them the step schedule of the epoch applies.
  auto r = fit_with({{"schedule", "step"},
                     {"initial_lr", 0.06},
                     {"drop_every", 1},
                     {"factor", 0.5},
                     {"warmup_steps", 6}},
                    3);
  expect_all_eq(r->step_lrs,
                {0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.03, 0.03, 0.015, 0.015, 0.015, 0.015});
}

// Every epoch's rate, as Keras prints it, with or without a warm-up before it (with one,
// nothing was printed at all).
TEST(LrSchedulerPlugin, VerbosePrintsTheRateEachEpochBeginsWith) {
  for (const int warmup : {0, 4}) {
    SCOPED_TRACE(warmup);
    testing::internal::CaptureStderr();
    fit_with({{"schedule", "step"},
              {"initial_lr", 0.1},
              {"drop_every", 2},
              {"factor", 0.5},
              {"warmup_steps", warmup},
              {"verbose", 1}},
             3);
    const std::string err = testing::internal::GetCapturedStderr();
    // Epoch 1's first step: the schedule's 0.1, or the ramp's first rate 0.1 / 4.
    EXPECT_NE(err.find(warmup ? "Epoch 1: lr_scheduler setting learning rate to 0.025."
                              : "Epoch 1: lr_scheduler setting learning rate to 0.1."),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("Epoch 2: lr_scheduler setting learning rate to 0.1."), std::string::npos)
        << err;  // unchanged, printed as Keras does
    EXPECT_NE(err.find("Epoch 3: lr_scheduler setting learning rate to 0.05."), std::string::npos)
        << err;
  }
  testing::internal::CaptureStderr();
  fit_with({{"schedule", "step"}, {"initial_lr", 0.1}, {"drop_every", 1}, {"factor", 0.5}}, 3);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(LrSchedulerPlugin, BadOptionsNameTheirPath) {
  PluginRun run;
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("lr_scheduler").create(options, {Target::template_model, "callbacks[2]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of(json::object()), "callbacks[2].options.schedule");
  EXPECT_EQ(path_of({{"schedule", "polynomial"}}), "callbacks[2].options.schedule");
  EXPECT_EQ(path_of({{"schedule", "step"}}), "callbacks[2].options.drop_every");
  EXPECT_EQ(path_of({{"schedule", "step"}, {"drop_every", 0}}), "callbacks[2].options.drop_every");
  EXPECT_EQ(path_of({{"schedule", "step"}, {"drop_every", 2}, {"factor", 1.5}}),
            "callbacks[2].options.factor");
  EXPECT_EQ(path_of({{"schedule", "step"}, {"drop_every", 2}, {"decay_rate", 0.9}}),
            "callbacks[2].options.decay_rate");
  EXPECT_EQ(path_of({{"schedule", "exponential"}}), "callbacks[2].options.decay_rate");
  EXPECT_EQ(path_of({{"schedule", "exponential"}, {"decay_rate", 0}}),
            "callbacks[2].options.decay_rate");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"total", 0}}), "callbacks[2].options.total");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"initial_lr", 0.01}, {"min_lr", 0.1}}),
            "callbacks[2].options.min_lr");
  EXPECT_EQ(path_of({{"schedule", "linear_warmup"}}), "callbacks[2].options.warmup_steps");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"interval", "batch"}}),
            "callbacks[2].options.interval");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"initial_lr", 0}}),
            "callbacks[2].options.initial_lr");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"warmup_steps", -1}}),
            "callbacks[2].options.warmup_steps");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"gamma", 0.1}}), "callbacks[2].options.gamma");
  // Counts beyond 2^53 (they went through a double: a warm-up of INT64_MAX steps ran none).
  EXPECT_EQ(path_of({{"schedule", "cosine"},
                     {"interval", "step"},
                     {"warmup_steps", json::parse("9223372036854775807")}}),
            "callbacks[2].options.warmup_steps");
  EXPECT_EQ(path_of({{"schedule", "cosine"}, {"total", json::parse("9223372036854775807")}}),
            "callbacks[2].options.total");
  EXPECT_EQ(path_of({{"schedule", "cosine"}}), "");
}

TEST(LrSchedulerPlugin, ACosineThatWouldReachZeroBeforeTheEndIsRefused) {
  PluginRun run;
  run.add("lr_scheduler", {{"schedule", "cosine"}, {"total", 2}});
  try {
    run.fit(std::make_shared<TableDataset>(32), nullptr, 4, 8);
    FAIL() << "a learning rate of 0 was accepted";
  } catch (const ConfigError& e) {  // before the first step: a config error (exit code 2)
    EXPECT_EQ(e.path(), "callbacks[0].options.total") << e.what();
    EXPECT_EQ(e.code(), ExitCode::bad_input);
    EXPECT_NE(std::string(e.what()).find("(callback 'lr_scheduler', at train begin)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::test
