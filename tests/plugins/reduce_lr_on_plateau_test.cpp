// reduce_lr_on_plateau: the learning-rate sequence of a real fit with a scripted monitored value,
// checked against Keras' rule worked out by hand.
#include <gtest/gtest.h>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Forwards the training hooks to the plugin's callback, with the epoch-end value of `key`
// replaced by script[epoch].
class Scripted : public Callback {
 public:
  Scripted(std::shared_ptr<Callback> inner, std::string key, std::vector<double> script)
      : inner_(std::move(inner)), key_(std::move(key)), script_(std::move(script)) {}
  std::string name() const override { return inner_->name(); }
  void on_train_begin(CallbackContext& c, const Logs& l) override { inner_->on_train_begin(c, l); }
  void on_epoch_end(CallbackContext& c, int e, const Logs& l) override {
    Logs s = l;
    s.set(key_, script_.at(static_cast<std::size_t>(e)));
    inner_->on_epoch_end(c, e, s);
  }

 private:
  std::shared_ptr<Callback> inner_;
  std::string key_;
  std::vector<double> script_;
};

// The learning rate each epoch trains with.
class LrRecorder : public Callback {
 public:
  std::string name() const override { return "lr_recorder"; }
  void on_epoch_begin(CallbackContext& c, int, const Logs&) override {
    lrs.push_back(c.learning_rate());
  }
  std::vector<double> lrs;
};

std::vector<double> lr_sequence(const json& options, const std::vector<double>& script,
                                const std::string& key = "val_loss",
                                std::vector<json>* events = nullptr) {
  PluginRun run("cpu:1", 0.01);
  auto cb = run.host.load("reduce_lr_on_plateau")
                .create(options, {Target::template_model, "callbacks[0]"});
  run.bus.add(std::make_shared<Scripted>(cb, key, script));
  auto recorder = std::make_shared<LrRecorder>();
  run.bus.add(recorder);
  run.fit(std::make_shared<TableDataset>(32), nullptr, static_cast<int>(script.size()), 16);
  if (events)
    for (const auto& e : read_events(run.run_dir))
      if (e["event"] == "reduce_lr_on_plateau") events->push_back(e);
  return recorder->lrs;
}

TEST(ReduceLrOnPlateauPlugin, ReducesAfterPatienceEpochsDownToMinLr) {
  // lr 0.01, factor 0.5, patience 2, min_lr 0.002, cooldown 0; the value never improves after
  // epoch 1. By hand (wait after each epoch end): e0 best, e1 w1, e2 w2 -> 0.005, e3 w1,
  // e4 w2 -> 0.0025, e5 w1, e6 w2 -> max(0.00125, 0.002) = 0.002, e7 w1, e8 w2 (lr = min_lr:
  // no change). The rate set at the end of epoch e is used from epoch e + 1.
  std::vector<json> events;
  const auto lrs = lr_sequence({{"factor", 0.5}, {"patience", 2}, {"min_lr", 0.002}},
                               std::vector<double>(10, 1.0), "val_loss", &events);
  const double a = 0.01, b = 0.01 * 0.5, c = 0.01 * 0.5 * 0.5, d = 0.002;
  EXPECT_EQ(lrs, (std::vector<double>{a, a, a, b, b, c, c, d, d, d}));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["epoch"], 3);
  EXPECT_DOUBLE_EQ(events[0]["old_lr"].get<double>(), a);
  EXPECT_DOUBLE_EQ(events[0]["new_lr"].get<double>(), b);
  EXPECT_DOUBLE_EQ(events[2]["new_lr"].get<double>(), d);
}

TEST(ReduceLrOnPlateauPlugin, CooldownPausesTheCountAsKerasDoes) {
  // patience 1, cooldown 2. Keras decrements the cooldown first, so counting resumes in the
  // second epoch after a reduction: e0 best, e1 -> 0.005 (cd 2), e2 cd 1, e3 cd 0 then w1 ->
  // 0.0025 (cd 2), e4 cd 1, e5 cd 0, w1 -> 0.00125, e6 cd 1, e7 cd 0, w1 -> 0.000625.
  const auto lrs =
      lr_sequence({{"factor", 0.5}, {"patience", 1}, {"cooldown", 2}}, std::vector<double>(8, 1.0));
  const double a = 0.01, b = a * 0.5, c = b * 0.5, d = c * 0.5;
  EXPECT_EQ(lrs, (std::vector<double>{a, a, b, b, c, c, d, d}));
  // Without cooldown: a reduction at every epoch end from the second on.
  const auto plain = lr_sequence({{"factor", 0.5}, {"patience", 1}}, std::vector<double>(5, 1.0));
  EXPECT_EQ(plain, (std::vector<double>{a, a, b, c, d}));
}

TEST(ReduceLrOnPlateauPlugin, AnImprovementBeyondMinDeltaResetsTheWait) {
  // min_delta 0.01: 0.995 is no improvement on 1.0, 0.98 is. patience 2, factor 0.1.
  // e0 best 1.0; e1 0.995 w1; e2 0.98 best, w0; e3 0.975 w1; e4 0.975 w2 -> 0.001.
  const auto lrs =
      lr_sequence({{"patience", 2}, {"min_delta", 0.01}}, {1.0, 0.995, 0.98, 0.975, 0.975, 0.975});
  EXPECT_EQ(lrs, (std::vector<double>{0.01, 0.01, 0.01, 0.01, 0.01, 0.01 * 0.1}));
}

// tf.keras 2 called min_delta epsilon: read as it, with a warning; both at once is an error.
TEST(ReduceLrOnPlateauPlugin, Keras2EpsilonIsMinDelta) {
  testing::internal::CaptureStderr();
  const auto lrs =
      lr_sequence({{"patience", 2}, {"epsilon", 0.01}}, {1.0, 0.995, 0.98, 0.975, 0.975, 0.975});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(lrs, (std::vector<double>{0.01, 0.01, 0.01, 0.01, 0.01, 0.01 * 0.1}));
  EXPECT_NE(err.find("callbacks[0].options.epsilon: tf.keras 2's name; read as min_delta"),
            std::string::npos)
      << err;
  PluginRun run;
  try {
    run.host.load("reduce_lr_on_plateau")
        .create({{"epsilon", 0.01}, {"min_delta", 0.02}}, {Target::template_model, "callbacks[1]"});
    ADD_FAILURE() << "epsilon and min_delta both accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "callbacks[1].options.epsilon");
  }
}

TEST(ReduceLrOnPlateauPlugin, ModeMaxForAccuracy) {
  // auto on val_accuracy = max: 0.5, 0.4, 0.45 -> no improvement for 2 epochs -> reduce.
  const auto lrs = lr_sequence({{"monitor", "val_accuracy"}, {"patience", 2}, {"factor", 0.2}},
                               {0.5, 0.4, 0.45, 0.6}, "val_accuracy");
  EXPECT_EQ(lrs, (std::vector<double>{0.01, 0.01, 0.01, 0.01 * 0.2}));
  // min mode: 0.4 improves on 0.5, then 0.45 and 0.6 do not.
  const auto min =
      lr_sequence({{"monitor", "val_accuracy"}, {"patience", 2}, {"factor", 0.2}, {"mode", "min"}},
                  {0.5, 0.4, 0.45, 0.6, 0.6}, "val_accuracy");
  EXPECT_EQ(min, (std::vector<double>{0.01, 0.01, 0.01, 0.01, 0.01 * 0.2}));
}

TEST(ReduceLrOnPlateauPlugin, TheTrainerReportsTheNewRate) {
  PluginRun run("cpu:1", 0.01);
  auto cb =
      run.host.load("reduce_lr_on_plateau")
          .create({{"patience", 0}, {"factor", 0.5}}, {Target::template_model, "callbacks[0]"});
  run.bus.add(std::make_shared<Scripted>(cb, "val_loss", std::vector<double>{1.0, 1.0, 1.0}));
  run.fit(std::make_shared<TableDataset>(32), nullptr, 3, 16);
  std::vector<double> epoch_lrs;
  for (const auto& e : read_events(run.run_dir))
    if (e["event"] == "epoch_ended") epoch_lrs.push_back(e["lr"]);
  // patience 0: a reduction at every epoch end without improvement (e1, e2).
  EXPECT_EQ(epoch_lrs, (std::vector<double>{0.01, 0.01, 0.005}));
  EXPECT_DOUBLE_EQ(run.trainer->learning_rate(), 0.0025);
}

TEST(ReduceLrOnPlateauPlugin, VerbosePrintsEachReduction) {
  testing::internal::CaptureStderr();
  lr_sequence({{"patience", 1}, {"factor", 0.5}, {"verbose", 1}}, {1.0, 1.0, 1.0});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Epoch 2: ReduceLROnPlateau reducing learning rate to 0.005."),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("Epoch 3: ReduceLROnPlateau reducing learning rate to 0.0025."),
            std::string::npos)
      << err;
  testing::internal::CaptureStderr();
  lr_sequence({{"patience", 1}, {"factor", 0.5}}, {1.0, 1.0, 1.0});
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(ReduceLrOnPlateauPlugin, BadOptionsNameTheirPath) {
  PluginRun run;
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("reduce_lr_on_plateau")
          .create(options, {Target::template_model, "callbacks[1]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of({{"factor", 1.0}}), "callbacks[1].options.factor");
  EXPECT_EQ(path_of({{"factor", 2}}), "callbacks[1].options.factor");
  EXPECT_EQ(path_of({{"factor", 0}}), "callbacks[1].options.factor");
  EXPECT_EQ(path_of({{"factor", "half"}}), "callbacks[1].options.factor");
  EXPECT_EQ(path_of({{"patience", -1}}), "callbacks[1].options.patience");
  EXPECT_EQ(path_of({{"cooldown", 0.5}}), "callbacks[1].options.cooldown");
  EXPECT_EQ(path_of({{"min_lr", -1e-3}}), "callbacks[1].options.min_lr");
  EXPECT_EQ(path_of({{"mode", "up"}}), "callbacks[1].options.mode");
  EXPECT_EQ(path_of({{"lr", 0.1}}), "callbacks[1].options.lr");
  EXPECT_EQ(path_of({{"factor", 0.99}}), "");
  try {
    run.host.load("reduce_lr_on_plateau")
        .create({{"factor", 1.5}}, {Target::template_model, "callbacks[1]"});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("must be < 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::test
