// early_stopping: each option's behaviour on a real fit whose monitored value is scripted.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Forwards the training hooks to the plugin's callback, with the epoch-end value of `key`
// replaced by script[epoch]: the monitored metric behaves exactly as the test says.
class Scripted : public Callback {
 public:
  Scripted(std::shared_ptr<Callback> inner, std::string key, std::vector<double> script)
      : inner_(std::move(inner)), key_(std::move(key)), script_(std::move(script)) {}
  std::string name() const override { return inner_->name(); }
  void on_train_begin(CallbackContext& c, const Logs& l) override { inner_->on_train_begin(c, l); }
  void on_train_end(CallbackContext& c, const Logs& l) override { inner_->on_train_end(c, l); }
  void on_epoch_begin(CallbackContext& c, int e, const Logs& l) override {
    inner_->on_epoch_begin(c, e, l);
  }
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

// Keeps a copy of the template's weights at every epoch end.
class WeightRecorder : public Callback {
 public:
  std::string name() const override { return "weight_recorder"; }
  void on_epoch_end(CallbackContext& c, int, const Logs&) override {
    snapshots.push_back(weights_of(c.model()));
  }
  static std::vector<std::vector<float>> weights_of(Model& m) {
    std::vector<std::vector<float>> w;
    for (Parameter* p : m.parameters())
      w.emplace_back(p->value.values().begin(), p->value.values().end());
    return w;
  }
  std::vector<std::vector<std::vector<float>>> snapshots;
};

struct Outcome {
  std::size_t epochs_run = 0;
  std::string stop_reason;
  json early_event;  // the last "early_stopping" event with action "stop", or null
};

// Fits up to `epochs` epochs with early_stopping(options) watching a scripted `key`.
Outcome run_scripted(const json& options, const std::vector<double>& script,
                     const std::string& key = "val_loss", PluginRun* existing = nullptr,
                     std::shared_ptr<Callback> after = nullptr) {
  PluginRun local;
  PluginRun& run = existing ? *existing : local;
  auto cb =
      run.host.load("early_stopping").create(options, {Target::template_model, "callbacks[0]"});
  run.bus.add(std::make_shared<Scripted>(cb, key, script));
  if (after) run.bus.add(after);
  const auto& history =
      run.fit(std::make_shared<TableDataset>(32), nullptr, static_cast<int>(script.size()), 16);
  Outcome out;
  out.epochs_run = history.size();
  out.stop_reason = run.trainer->state().stop_reason;
  for (const auto& e : read_events(run.run_dir))
    if (e["event"] == "early_stopping" && e["action"] == "stop") out.early_event = e;
  if (out.stop_reason.empty()) {
    EXPECT_TRUE(out.early_event.is_null());
  } else {
    // The trainer's "stopped" event carries the reason the callback gave.
    bool stopped = false;
    for (const auto& e : read_events(run.run_dir))
      if (e["event"] == "stopped") stopped = e["reason"] == out.stop_reason;
    EXPECT_TRUE(stopped);
  }
  return out;
}

TEST(EarlyStoppingPlugin, PatienceStopsAfterExactlyThatManyEpochsWithoutImprovement) {
  // best 0.9 at epoch 2 (1-based); epochs 3, 4, 5 do not improve: stop after epoch 5.
  auto o = run_scripted({{"patience", 3}}, {1.0, 0.9, 0.95, 0.92, 0.91, 0.5, 0.4, 0.3});
  EXPECT_EQ(o.epochs_run, 5u);
  EXPECT_NE(o.stop_reason.find("early_stopping: val_loss did not improve for 3 epochs"),
            std::string::npos)
      << o.stop_reason;
  ASSERT_FALSE(o.early_event.is_null());
  EXPECT_EQ(o.early_event["reason"], "patience_exhausted");
  EXPECT_EQ(o.early_event["epoch"], 5);
  EXPECT_EQ(o.early_event["best_epoch"], 2);
  EXPECT_DOUBLE_EQ(o.early_event["best"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(o.early_event["value"].get<double>(), 0.91);
  // An improvement resets the wait: never three bad epochs in a row here.
  EXPECT_EQ(run_scripted({{"patience", 3}}, {1.0, 1.1, 1.2, 0.9, 1.0, 1.0, 0.8, 0.85}).epochs_run,
            8u);
}

TEST(EarlyStoppingPlugin, PatienceZeroStopsAtTheFirstEpochWithoutImprovementButNeverTheFirst) {
  EXPECT_EQ(run_scripted({}, {1.0, 0.9, 0.8, 0.85, 0.7}).epochs_run, 4u);
  EXPECT_EQ(run_scripted({}, {1.0, 1.0, 0.8}).epochs_run, 2u);  // equal is not better
}

TEST(EarlyStoppingPlugin, MinDeltaIsTheSmallestChangeThatCounts) {
  const std::vector<double> script = {1.0, 0.95, 0.92, 0.9, 0.85};
  // With min_delta 0.1 nothing after epoch 1 counts as better: stop after epoch 3 (patience 2).
  auto o = run_scripted({{"patience", 2}, {"min_delta", 0.1}}, script);
  EXPECT_EQ(o.epochs_run, 3u);
  EXPECT_EQ(o.early_event["best_epoch"], 1);
  EXPECT_EQ(run_scripted({{"patience", 2}}, script).epochs_run, 5u);
  // 1.0 -> 0.85 by 0.15 > 0.1 counts.
  EXPECT_EQ(run_scripted({{"patience", 2}, {"min_delta", 0.1}}, {1.0, 0.95, 0.85, 0.8, 0.8, 0.8})
                .epochs_run,
            5u);
}

TEST(EarlyStoppingPlugin, ModeDecidesTheDirectionAndAutoMaximisesAccuracy) {
  const std::vector<double> acc = {0.5, 0.6, 0.55, 0.58, 0.7};
  // auto on val_accuracy = max: best 0.6 at epoch 2, then two epochs below it.
  EXPECT_EQ(
      run_scripted({{"monitor", "val_accuracy"}, {"patience", 2}}, acc, "val_accuracy").epochs_run,
      4u);
  EXPECT_EQ(run_scripted({{"monitor", "val_accuracy"}, {"patience", 2}, {"mode", "max"}}, acc,
                         "val_accuracy")
                .epochs_run,
            4u);
  // min on the same values: 0.5 stays best, epochs 2 and 3 are worse.
  EXPECT_EQ(run_scripted({{"monitor", "val_accuracy"}, {"patience", 2}, {"mode", "min"}}, acc,
                         "val_accuracy")
                .epochs_run,
            3u);
  // auto on a loss = min.
  EXPECT_EQ(
      run_scripted({{"monitor", "loss"}, {"patience", 1}}, {1.0, 2.0, 3.0}, "loss").epochs_run, 2u);
  // auto on AUC, precision, recall, IoU = max, as Keras 3's metric directions (it minimised
  // them: a rising val_auc stopped the run after 2 epochs).
  for (const char* key : {"val_auc", "val_precision", "recall_1", "val_out_mean_io_u"})
    EXPECT_EQ(
        run_scripted({{"monitor", key}, {"patience", 1}}, {0.5, 0.6, 0.7, 0.8}, key).epochs_run, 4u)
        << key;
}

TEST(HigherIsBetter, KerasMetricNamesGoUpAndLossesAndErrorsGoDown) {
  for (const char* up : {"accuracy", "val_accuracy", "acc", "val_cls_acc", "dense_1_accuracy",
                         "top_k_categorical_accuracy", "auc", "val_auc_1", "precision",
                         "val_recall", "mean_io_u", "val_one_hot_mean_io_u",
                         // Keras 3 logs a metric named by a string under it: "AUC", "Recall".
                         "AUC", "val_AUC", "val_Recall", "Precision", "BinaryAccuracy", "MeanIoU"})
    EXPECT_TRUE(higher_is_better(up)) << up;
  for (const char* down :
       {"loss", "val_loss", "dense_1_loss", "mae", "val_mse", "auc_loss", "val_mean_squared_error",
        "lr", "accuracy_loss", "_1", "", "MeanSquaredError", "AUC_loss"})
    EXPECT_FALSE(higher_is_better(down)) << down;
}

TEST(EarlyStoppingPlugin, BaselineKeepsTheWaitGoingUntilItIsBeaten) {
  // Improving every epoch but never below the baseline 0.5: the wait is not reset, so the first
  // epoch without improvement (epoch 4) already exceeds patience 2 (Keras 3).
  const std::vector<double> script = {1.0, 0.9, 0.8, 0.85, 0.84, 0.83, 0.82};
  auto with = run_scripted({{"patience", 2}, {"baseline", 0.5}}, script);
  EXPECT_EQ(with.epochs_run, 4u);
  EXPECT_EQ(with.early_event["wait"], 4);
  EXPECT_EQ(run_scripted({{"patience", 2}}, script).epochs_run, 5u);
  // Beating the baseline resets the wait as usual.
  EXPECT_EQ(run_scripted({{"patience", 2}, {"baseline", 0.95}}, script).epochs_run, 5u);
  // The reason names the baseline when the values improved without beating it.
  EXPECT_NE(with.stop_reason.find("did not beat the baseline 0.5 for 4 epochs"), std::string::npos)
      << with.stop_reason;
}

TEST(EarlyStoppingPlugin, StartFromEpochIgnoresTheWarmUpEpochs) {
  const std::vector<double> script = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
  EXPECT_EQ(run_scripted({{"patience", 1}}, script).epochs_run, 2u);
  // Epochs 0-2 (0-based) are not looked at: 4.0 is the first best, 5.0 the first miss.
  auto o = run_scripted({{"patience", 1}, {"start_from_epoch", 3}}, script);
  EXPECT_EQ(o.epochs_run, 5u);
  EXPECT_EQ(o.early_event["best_epoch"], 4);
}

TEST(EarlyStoppingPlugin, CheckFiniteStopsOnNaNAndCanBeTurnedOff) {
  const std::vector<double> script = {1.0, 0.9, kNaN, 0.8, 0.7, 0.6};
  auto o = run_scripted({{"patience", 5}}, script);
  EXPECT_EQ(o.epochs_run, 3u);
  EXPECT_EQ(o.early_event["reason"], "non_finite_metric");
  EXPECT_TRUE(o.early_event["value"].is_null());
  EXPECT_NE(o.stop_reason.find("is not finite"), std::string::npos) << o.stop_reason;
  // Off: NaN is just not an improvement (Keras).
  EXPECT_EQ(run_scripted({{"patience", 5}, {"check_finite", false}}, script).epochs_run, 6u);
  EXPECT_EQ(run_scripted({{"patience", 5}, {"check_finite", false}},
                         {1.0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN})
                .epochs_run,
            6u);
}

TEST(EarlyStoppingPlugin, StoppingThresholdStopsOnceTheValueIsGoodEnough) {
  auto o = run_scripted({{"patience", 10}, {"stopping_threshold", 0.3}}, {1.0, 0.3, 0.29, 0.1});
  EXPECT_EQ(o.epochs_run, 3u);  // 0.3 is not below 0.3; 0.29 is
  EXPECT_EQ(o.early_event["reason"], "stopping_threshold");
  EXPECT_NE(o.stop_reason.find("stopping threshold reached: val_loss = 0.29 < 0.3"),
            std::string::npos)
      << o.stop_reason;
  // max mode: above the threshold.
  EXPECT_EQ(run_scripted({{"monitor", "val_accuracy"}, {"stopping_threshold", 0.9}},
                         {0.5, 0.95, 0.97}, "val_accuracy")
                .epochs_run,
            2u);
}

TEST(EarlyStoppingPlugin, DivergenceThresholdStopsOnceTheValueIsHopeless) {
  auto o = run_scripted({{"patience", 10}, {"divergence_threshold", 2.0}}, {1.0, 2.0, 2.5, 0.1});
  EXPECT_EQ(o.epochs_run, 3u);
  EXPECT_EQ(o.early_event["reason"], "divergence_threshold");
  EXPECT_NE(o.stop_reason.find("divergence threshold reached: val_loss = 2.5 > 2"),
            std::string::npos)
      << o.stop_reason;
}

TEST(EarlyStoppingPlugin, ChecksRunInLightningsOrder) {
  // NaN first, before the thresholds.
  EXPECT_EQ(run_scripted({{"stopping_threshold", 0.3}, {"divergence_threshold", 0.5}}, {kNaN})
                .early_event["reason"],
            "non_finite_metric");
  // Thresholds that overlap (every value between them both good enough and hopeless) are
  // refused rather than ordered.
  // 3.0 diverges and also exhausts patience 1: divergence is checked first.
  EXPECT_EQ(run_scripted({{"patience", 1}, {"divergence_threshold", 2.5}}, {1.0, 3.0})
                .early_event["reason"],
            "divergence_threshold");
}

TEST(EarlyStoppingPlugin, RestoreBestWeightsPutsBackTheBestEpochOnEveryReplica) {
  PluginRun run("cpu:2");
  auto recorder = std::make_shared<WeightRecorder>();
  // best at epoch 2 (1-based), then 3 misses: stop after epoch 5.
  auto o = run_scripted({{"patience", 3}, {"restore_best_weights", true}},
                        {0.9, 0.5, 0.7, 0.8, 0.6, 0.1}, "val_loss", &run, recorder);
  ASSERT_EQ(o.epochs_run, 5u);
  ASSERT_EQ(recorder->snapshots.size(), 5u);
  const auto now = WeightRecorder::weights_of(*run.model);
  EXPECT_EQ(now, recorder->snapshots[1]);
  EXPECT_NE(now, recorder->snapshots[4]);
  EXPECT_EQ(WeightRecorder::weights_of(run.meta->replica(1)), recorder->snapshots[1]);
  bool restored = false;
  for (const auto& e : read_events(run.run_dir))
    if (e["event"] == "early_stopping" && e["action"] == "restore_best_weights")
      restored = e["best_epoch"] == 2;
  EXPECT_TRUE(restored);
}

TEST(EarlyStoppingPlugin, RestoreBestWeightsAlsoWhenTrainingRanToTheEnd) {
  // Keras 3: restored in on_train_end whenever a best epoch exists, stopped early or not.
  PluginRun run;
  auto recorder = std::make_shared<WeightRecorder>();
  auto o = run_scripted({{"patience", 10}, {"restore_best_weights", true}}, {0.9, 0.5, 0.7, 0.8},
                        "val_loss", &run, recorder);
  ASSERT_EQ(o.epochs_run, 4u);
  EXPECT_TRUE(o.stop_reason.empty());
  EXPECT_EQ(WeightRecorder::weights_of(*run.model), recorder->snapshots[1]);
}

TEST(EarlyStoppingPlugin, WithoutRestoreTheLastWeightsStay) {
  PluginRun run;
  auto recorder = std::make_shared<WeightRecorder>();
  run_scripted({{"patience", 3}}, {0.9, 0.5, 0.7, 0.8, 0.6}, "val_loss", &run, recorder);
  EXPECT_EQ(WeightRecorder::weights_of(*run.model), recorder->snapshots.back());
}

TEST(EarlyStoppingPlugin, VerboseSaysWhenItStopsAndRestores) {
  testing::internal::CaptureStderr();
  run_scripted({{"patience", 1}, {"restore_best_weights", true}, {"verbose", 1}}, {1.0, 2.0, 3.0});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Epoch 2: early stopping"), std::string::npos) << err;
  EXPECT_NE(err.find("Restoring model weights from the end of the best epoch: 1."),
            std::string::npos)
      << err;
  testing::internal::CaptureStderr();
  run_scripted({{"patience", 1}, {"restore_best_weights", true}}, {1.0, 2.0, 3.0});
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(EarlyStoppingPlugin, AMissingMonitorLeavesTrainingAlone) {
  PluginRun run;
  run.add("early_stopping", {{"monitor", "val_loss"}});  // no validation data: no val_loss
  EXPECT_EQ(run.fit(std::make_shared<TableDataset>(32), nullptr, 3, 16).size(), 3u);
  EXPECT_TRUE(run.trainer->state().stop_reason.empty());
}

TEST(EarlyStoppingPlugin, StopsAFitOnItsRealValidationLoss) {
  // The real val_loss, watched with a min_delta no change can reach: the first epoch is the best,
  // and patience 1 stops after the second.
  PluginRun run;
  run.add("early_stopping", {{"mode", "max"}, {"min_delta", 1e6}, {"patience", 1}});
  const auto& h =
      run.fit(std::make_shared<TableDataset>(32), std::make_shared<TableDataset>(16), 5, 16);
  EXPECT_EQ(h.size(), 2u);
}

TEST(EarlyStoppingPlugin, BadOptionsNameTheirPath) {
  PluginRun run;
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("early_stopping").create(options, {Target::template_model, "callbacks[4]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of({{"patience", -1}}), "callbacks[4].options.patience");
  EXPECT_EQ(path_of({{"patience", "3"}}), "callbacks[4].options.patience");
  EXPECT_EQ(path_of({{"patience", 1.5}}), "callbacks[4].options.patience");
  EXPECT_EQ(path_of({{"mode", "median"}}), "callbacks[4].options.mode");
  EXPECT_EQ(path_of({{"min_delta", -0.1}}), "callbacks[4].options.min_delta");
  EXPECT_EQ(path_of({{"baseline", "low"}}), "callbacks[4].options.baseline");
  EXPECT_EQ(path_of({{"monitor", ""}}), "callbacks[4].options.monitor");
  EXPECT_EQ(path_of({{"start_from_epoch", -2}}), "callbacks[4].options.start_from_epoch");
  EXPECT_EQ(path_of({{"restore_best_weights", 1}}), "callbacks[4].options.restore_best_weights");
  EXPECT_EQ(path_of({{"verbose", 2}}), "callbacks[4].options.verbose");
  EXPECT_EQ(path_of({{"patiense", 3}}), "callbacks[4].options.patiense");
  EXPECT_EQ(path_of({{"stopping_threshold", 0.1}, {"divergence_threshold", 5}}), "");
  EXPECT_EQ(path_of({{"stopping_threshold", 0.5}, {"divergence_threshold", 0.3}}),
            "callbacks[4].options.divergence_threshold");
  EXPECT_EQ(path_of({{"monitor", "val_accuracy"},
                     {"stopping_threshold", 0.5},
                     {"divergence_threshold", 0.7}}),
            "callbacks[4].options.divergence_threshold");
  EXPECT_EQ(path_of({{"monitor", "val_accuracy"},
                     {"stopping_threshold", 0.9},
                     {"divergence_threshold", 0.2}}),
            "");
}

}  // namespace
}  // namespace tandem::test
