// backup_and_restore: a fit that crashes and is run again with the same backup_dir ends
// bitwise-equal to a fit that never crashed; the backup goes away at a successful end.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "plugins/plugin_test_support.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// Throws in on_train_batch_end once `at_step` optimizer steps are done: a crash mid-run.
class Crash : public Callback {
 public:
  explicit Crash(std::int64_t at_step) : at_(at_step) {}
  std::string name() const override { return "crash"; }
  void on_train_batch_end(CallbackContext& c, std::int64_t, const Logs&) override {
    if (c.state().step == at_) throw std::runtime_error("simulated crash");
  }

 private:
  std::int64_t at_;
};

std::vector<std::vector<float>> weights_of(Model& m) {
  std::vector<std::vector<float>> w;
  for (Parameter* p : m.parameters())
    w.emplace_back(p->value.values().begin(), p->value.values().end());
  return w;
}

std::vector<std::vector<float>> slots_of(ReplicaModel& meta) {
  std::vector<std::vector<float>> s;
  Optimizer& opt = meta.optimizer();
  for (std::size_t i = 0; i < opt.slotted_params(); ++i)
    for (const auto& t : opt.slots(i)) s.emplace_back(t.values().begin(), t.values().end());
  return s;
}

constexpr int kEpochs = 3;
// 64 samples in batches of 8: 8 steps per epoch, 24 in all.
std::shared_ptr<Dataset> train_data() {
  return std::make_shared<TableDataset>(64);
}
std::shared_ptr<Dataset> val_data() {
  return std::make_shared<TableDataset>(16);
}

struct Finished {
  std::vector<std::vector<float>> weights, slots, replica1;
  std::vector<Logs> history;
  std::int64_t iterations = 0;
};

Finished finish(PluginRun& run, const std::vector<Logs>& history) {
  Finished f;
  f.weights = weights_of(*run.model);
  f.slots = slots_of(*run.meta);
  if (run.meta->size() > 1) f.replica1 = weights_of(run.meta->replica(1));
  f.history = history;
  f.iterations = run.meta->optimizer().iterations();
  return f;
}

void expect_bitwise_equal(const Finished& a, const Finished& b) {
  EXPECT_EQ(a.weights, b.weights);  // float ==: bitwise for non-NaN values
  EXPECT_EQ(a.slots, b.slots);
  EXPECT_EQ(a.replica1, b.replica1);
  EXPECT_EQ(a.iterations, b.iterations);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e)
    EXPECT_EQ(a.history[e].to_json(), b.history[e].to_json()) << "epoch " << e;
}

// The same fit, never interrupted.
Finished uninterrupted(const std::string& plan, const json& options, Target target) {
  PluginRun run(plan);
  json o = options;
  o["backup_dir"] = (scratch_dir("backup-clean") / "b").string();
  run.add("backup_and_restore", o, target);
  const auto& h = run.fit(train_data(), val_data(), kEpochs);
  EXPECT_FALSE(std::filesystem::exists(o["backup_dir"].get<std::string>()));  // deleted at the end
  return finish(run, h);
}

// Crashes after `crash_step` steps, then fits again with the same backup_dir. Returns the result
// of the second fit; `resumed` gets the backup_restored event.
Finished crash_and_resume(const std::string& plan, const json& options, Target target,
                          std::int64_t crash_step, json& resumed) {
  const auto dir = scratch_dir("backup-crash") / "b";
  json o = options;
  o["backup_dir"] = dir.string();
  {
    PluginRun run(plan);
    run.add("backup_and_restore", o, target);
    run.bus.add(std::make_shared<Crash>(crash_step));
    EXPECT_THROW(run.fit(train_data(), val_data(), kEpochs), RunError);
    EXPECT_TRUE(std::filesystem::exists(dir / "backup.h5"));  // kept after a crash
  }
  PluginRun run(plan);  // a fresh process, in effect: new model, optimizer and trainer
  run.add("backup_and_restore", o, target);
  const auto& h = run.fit(train_data(), val_data(), kEpochs);
  std::int64_t steps_run = 0;
  for (const auto& e : read_events(run.run_dir)) {
    if (e["event"] == "backup_restored") resumed = e;
    steps_run += e["event"] == "batch_ended";
  }
  // It resumed: only the steps after the backup ran again (same seed alone would also give equal
  // weights, from scratch).
  EXPECT_FALSE(resumed.is_null());
  if (!resumed.is_null()) {
    EXPECT_EQ(steps_run, kEpochs * 8 - resumed["step"].get<std::int64_t>());
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "backup.h5"));  // delete_checkpoint (default)
  EXPECT_FALSE(std::filesystem::exists(dir));
  return finish(run, h);
}

TEST(BackupAndRestorePlugin, EpochBackupsResumeBitwiseAfterACrash) {
  json resumed;
  const auto a = uninterrupted("cpu:1", json::object(), Target::template_model);
  // Crash in the middle of epoch 2 (step 13): the last backup is the end of epoch 1.
  const auto b = crash_and_resume("cpu:1", json::object(), Target::template_model, 13, resumed);
  ASSERT_FALSE(resumed.is_null());
  EXPECT_EQ(resumed["epoch"], 2);
  EXPECT_EQ(resumed["batch"], 0);
  EXPECT_EQ(resumed["step"], 8);
  expect_bitwise_equal(a, b);
}

TEST(BackupAndRestorePlugin, BatchBackupsResumeMidEpochBitwiseAfterACrash) {
  json resumed;
  const json options = {{"save_freq", 3}};
  const auto a = uninterrupted("cpu:1", options, Target::template_model);
  // Crash after step 11: the last backup is step 9 = epoch 2, batch 1.
  const auto b = crash_and_resume("cpu:1", options, Target::template_model, 11, resumed);
  EXPECT_EQ(resumed["epoch"], 2);
  EXPECT_EQ(resumed["batch"], 1);
  EXPECT_EQ(resumed["step"], 9);
  expect_bitwise_equal(a, b);
}

TEST(BackupAndRestorePlugin, MetaTargetOnTwoReplicasResumesBitwise) {
  json resumed;
  const json options = {{"save_freq", 5}};
  const auto a = uninterrupted("cpu:2", options, Target::meta);
  const auto b = crash_and_resume("cpu:2", options, Target::meta, 17, resumed);
  EXPECT_EQ(resumed["step"], 15);
  expect_bitwise_equal(a, b);
  EXPECT_EQ(b.weights, b.replica1);
}

TEST(BackupAndRestorePlugin, AnInterruptedRunKeepsABackupOfThatMomentAndResumesFromIt) {
  const auto a = uninterrupted("cpu:1", json::object(), Target::template_model);
  const auto dir = scratch_dir("backup-int") / "b";
  {
    PluginRun run;
    std::atomic<bool> flag{false};
    run.trainer->set_interrupt_flag(&flag);
    struct Raise : Callback {
      std::atomic<bool>* flag;
      std::string name() const override { return "raise"; }
      void on_train_batch_end(CallbackContext& c, std::int64_t, const Logs&) override {
        if (c.state().step == 5) *flag = true;
      }
    };
    auto raise = std::make_shared<Raise>();
    raise->flag = &flag;
    run.add("backup_and_restore", {{"backup_dir", dir.string()}});
    run.bus.add(raise);
    run.fit(train_data(), val_data(), kEpochs);
    ASSERT_TRUE(run.trainer->interrupted());
    ASSERT_TRUE(std::filesystem::exists(dir / "backup.h5"));
    const auto data = read_checkpoint_file(dir / "backup.h5");
    EXPECT_EQ(data.training->state["step"], 5);
    EXPECT_EQ(data.training->state["batch"], 5);
  }
  PluginRun run;
  run.add("backup_and_restore", {{"backup_dir", dir.string()}});
  const auto& h = run.fit(train_data(), val_data(), kEpochs);
  std::int64_t steps_run = 0;
  for (const auto& e : read_events(run.run_dir)) steps_run += e["event"] == "batch_ended";
  EXPECT_EQ(steps_run, kEpochs * 8 - 5);  // resumed after step 5
  expect_bitwise_equal(a, finish(run, h));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(BackupAndRestorePlugin, DeleteCheckpointFalseKeepsTheFinishedBackup) {
  const auto dir = scratch_dir("backup-keep") / "b";
  PluginRun run;
  run.add("backup_and_restore", {{"backup_dir", dir.string()}, {"delete_checkpoint", false}});
  run.fit(train_data(), nullptr, 2);
  ASSERT_TRUE(std::filesystem::exists(dir / "backup.h5"));
  const auto data = read_checkpoint_file(dir / "backup.h5");
  EXPECT_EQ(data.training->state["epoch"], 2);  // the end of the last epoch = start of the next
  EXPECT_EQ(data.training->state["batch"], 0);
  EXPECT_EQ(data.training->state["history"].size(), 2u);
  // A later fit with the same folder continues from it: 2 more epochs, not 4.
  PluginRun next;
  next.add("backup_and_restore", {{"backup_dir", dir.string()}, {"delete_checkpoint", false}});
  const auto& h = next.fit(train_data(), nullptr, 4);
  EXPECT_EQ(h.size(), 4u);
  EXPECT_EQ(next.trainer->state().step, 32);
  std::size_t epochs_started = 0;
  for (const auto& e : read_events(next.run_dir)) epochs_started += e["event"] == "epoch_started";
  EXPECT_EQ(epochs_started, 2u);
}

TEST(BackupAndRestorePlugin, ABackupFromAnotherBatchSizeIsRefusedClearly) {
  const auto dir = scratch_dir("backup-bs") / "b";
  {
    PluginRun run;
    run.add("backup_and_restore", {{"backup_dir", dir.string()}, {"save_freq", 3}});
    run.bus.add(std::make_shared<Crash>(4));
    EXPECT_THROW(run.fit(train_data(), nullptr, 2), RunError);
  }
  PluginRun run;
  run.add("backup_and_restore", {{"backup_dir", dir.string()}});
  try {
    run.fit(train_data(), nullptr, 2, 16);  // 4 batches per epoch, the backup has 8
    FAIL() << "a mid-epoch backup of another batch size was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("resume with the same data and batch_size"),
              std::string::npos)
        << e.what();
  }
}

TEST(BackupAndRestorePlugin, RestoreIsOnlyPossibleBeforeTheFirstBatch) {
  // The core hook behind the plugin: CallbackContext::restore from any hook but on_train_begin.
  struct LateRestore : Callback {
    CheckpointData data;
    std::string name() const override { return "late_restore"; }
    void on_epoch_begin(CallbackContext& c, int, const Logs&) override { c.restore(data, "late"); }
  };
  PluginRun run;
  auto late = std::make_shared<LateRestore>();
  late->data = run.trainer->checkpoint();
  run.bus.add(late);
  try {
    run.fit(train_data(), nullptr, 1);
    FAIL();
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("only from on_train_begin"), std::string::npos)
        << e.what();
  }
  // And outside a fit the trainer restores as before.
  EXPECT_NO_THROW(run.trainer->restore(late->data, "outside"));
}

TEST(BackupAndRestorePlugin, BadOptionsNameTheirPath) {
  PluginRun run;
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("backup_and_restore").create(options, {Target::template_model, "callbacks[5]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of(json::object()), "callbacks[5].options.backup_dir");
  EXPECT_EQ(path_of({{"backup_dir", ""}}), "callbacks[5].options.backup_dir");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"save_freq", "batch"}}),
            "callbacks[5].options.save_freq");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"save_freq", 0}}), "callbacks[5].options.save_freq");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"save_freq", 2.5}}), "callbacks[5].options.save_freq");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"save_freq", false}}), "callbacks[5].options.save_freq");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"delete_checkpoint", "no"}}),
            "callbacks[5].options.delete_checkpoint");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"double_checkpoint", true}}),
            "callbacks[5].options.double_checkpoint");
  EXPECT_EQ(path_of({{"backup_dir", "b"}, {"save_freq", 100}}), "");
}

}  // namespace
}  // namespace tandem::test
