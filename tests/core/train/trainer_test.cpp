#include "train/trainer.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// x = 4 features, y = class index (3 classes) from a fixed rule; optionally one NaN sample.
class TableDataset : public Dataset {
 public:
  TableDataset(std::int64_t n, bool poison = false) : n_(n), poison_(poison) {}
  std::int64_t size() const override { return n_; }
  Shape x_shape() const override { return {4}; }
  Shape y_shape() const override { return {}; }
  void read(std::span<const std::int64_t> idx, float* x, float* y) const override {
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const auto i = idx[k];
      Rng rng(Rng::derive(99, static_cast<std::uint64_t>(i)));
      for (int f = 0; f < 4; ++f) x[k * 4 + f] = rng.uniform() * 2 - 1;
      y[k] = static_cast<float>((x[k * 4] > 0) + (x[k * 4 + 1] > 0.5f));
      if (poison_ && i == 7) x[k * 4] = std::nanf("");
    }
  }
  std::string describe() const override { return "table"; }

 private:
  std::int64_t n_;
  bool poison_;
};

json model_config() {
  return {{"class_name", "Sequential"},
          {"config",
           {{"layers",
             {{{"class_name", "Dense"},
               {"config", {{"units", 16}, {"activation", "relu"}, {"input_shape", {4}}}}},
              {{"class_name", "Dropout"}, {"config", {{"rate", 0.2}}}},
              {{"class_name", "Dense"}, {"config", {{"units", 3}}}}}}}}};
}

json adam() { return {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}; }

// Keras' LossScaleOptimizer around adam(), starting at `initial_scale`.
json loss_scaled_adam(double initial_scale, int growth_steps) {
  return {{"class_name", "LossScaleOptimizer"},
          {"config",
           {{"inner_optimizer", adam()},
            {"initial_scale", initial_scale},
            {"dynamic_growth_steps", growth_steps}}}};
}

struct Harness {
  explicit Harness(const json& optimizer = adam(), int replicas = 1)
      : opt(make_optimizer(optimizer, "o")), meta(*model, *opt, DevicePlan::cpus(replicas)) {}
  std::unique_ptr<Model> model = Model::from_config(model_config(), "model", 3);
  std::unique_ptr<Loss> loss = make_loss(
      json{{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"from_logits", true}}}},
      "loss");
  std::unique_ptr<Optimizer> opt;
  ReplicaModel meta;
  std::vector<std::unique_ptr<Metric>> metrics =
      make_metrics(json::array({"accuracy"}), "metrics", *loss, {3});
  Trainer trainer{meta, Objective::borrowing(*loss, metrics)};
};

class Recorder : public Callback {
 public:
  std::vector<std::string> calls;
  std::function<void(CallbackContext&, std::int64_t)> on_batch;
  std::string name() const override { return "recorder"; }
  void on_train_begin(CallbackContext&, const Logs&) override { calls.push_back("train_begin"); }
  void on_train_end(CallbackContext&, const Logs& l) override {
    calls.push_back("train_end:" + std::to_string(l.items().size()));
  }
  void on_epoch_begin(CallbackContext&, int e, const Logs&) override {
    calls.push_back("epoch_begin:" + std::to_string(e));
  }
  void on_epoch_end(CallbackContext&, int e, const Logs& l) override {
    std::string keys;
    for (const auto& [k, v] : l.items()) keys += k + ",";
    calls.push_back("epoch_end:" + std::to_string(e) + ":" + keys);
  }
  void on_train_batch_begin(CallbackContext&, std::int64_t b, const Logs&) override {
    calls.push_back("b" + std::to_string(b));
  }
  void on_train_batch_end(CallbackContext& c, std::int64_t b, const Logs&) override {
    calls.push_back("e" + std::to_string(b));
    if (on_batch) on_batch(c, b);
  }
  void on_test_begin(CallbackContext&, const Logs&) override { calls.push_back("test_begin"); }
  void on_test_end(CallbackContext&, const Logs&) override { calls.push_back("test_end"); }
};

// An event reaches every callback even when one before it fails (the stream writer records it;
// a plugin failing on run_started used to leave the stream empty), and the failure still ends
// the call, naming the callback that failed.
TEST(Trainer, AnEventReachesEveryCallbackAndTheFirstFailureIsThrownAfter) {
  struct OnEvent : Callback {
    OnEvent(std::string n, bool fail) : name_(std::move(n)), fail_(fail) {}
    std::string name() const override { return name_; }
    void on_event(CallbackContext&, const std::string& event, const nlohmann::json&) override {
      seen.push_back(event);
      if (fail_) throw std::runtime_error("no " + event);
    }
    std::string name_;
    bool fail_;
    std::vector<std::string> seen;
  };
  Harness s;
  auto first = std::make_shared<OnEvent>("first", true);
  auto second = std::make_shared<OnEvent>("second", true);
  auto writer = std::make_shared<OnEvent>("writer", false);
  CallbackBus bus;
  bus.add(first);
  bus.add(second);
  bus.add(writer);
  s.trainer.set_callbacks(std::move(bus));
  try {
    s.trainer.publish_run_event("run_started", nlohmann::json::object());
    ADD_FAILURE() << "no error";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("callback 'first' failed in on_event: no run_started"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(second->seen, std::vector<std::string>{"run_started"});
  EXPECT_EQ(writer->seen, std::vector<std::string>{"run_started"});
}

// A hook that publishes an event runs every callback's on_event inside it, each under its own
// target; the hook then sees its own target again (the meta checkpoint callback published
// checkpoint_finished and then saved the template: its files were labelled "template").
TEST(Trainer, AHookKeepsItsTargetAfterPublishingAnEvent) {
  struct Publisher : Callback {
    std::string name() const override { return "publisher"; }
    void on_epoch_end(CallbackContext& c, int, const Logs&) override {
      before.push_back(c.target().target());
      c.publish("note", nlohmann::json::object());
      after.push_back(c.target().target());
    }
    std::vector<Target> before, after;
  };
  struct Listener : Callback {
    std::string name() const override { return "listener"; }
    void on_event(CallbackContext& c, const std::string& event, const nlohmann::json&) override {
      if (event == "note") seen.push_back(c.target().target());
    }
    std::vector<Target> seen;
  };
  Harness s;
  auto publisher = std::make_shared<Publisher>();
  auto listener = std::make_shared<Listener>();
  CallbackBus bus;
  bus.add(publisher, Target::meta);
  bus.add(listener, Target::template_model);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(32), {16, true, 1, 0});
  s.trainer.fit(train, nullptr, {2});
  EXPECT_EQ(publisher->before, (std::vector<Target>{Target::meta, Target::meta}));
  EXPECT_EQ(publisher->after, (std::vector<Target>{Target::meta, Target::meta}));
  EXPECT_EQ(listener->seen, (std::vector<Target>{Target::template_model, Target::template_model}));
}

// A callback's event keeps the line's own keys and the run's own events: a publish that would
// overwrite "event", "schema" or "time", pass fields that are not an object, or fake one of the
// run's events is refused naming the event (fields that were an array reached the events writer
// as a nlohmann error blamed on it; a fake run_finished went into the stream).
TEST(Trainer, ACallbacksEventCannotPoseAsTheRunsOwnOrOverwriteTheLinesKeys) {
  struct OnEvent : Callback {
    std::string name() const override { return "seen"; }
    void on_event(CallbackContext&, const std::string& event, const nlohmann::json& f) override {
      seen.push_back(event + f.dump());
    }
    std::vector<std::string> seen;
  };
  Harness s;
  auto seen = std::make_shared<OnEvent>();
  CallbackBus bus;
  bus.add(seen);
  s.trainer.set_callbacks(std::move(bus));
  const auto refusal = [&](const std::string& event, const nlohmann::json& fields) {
    try {
      s.trainer.publish(event, fields);
    } catch (const RunError& e) {
      return std::string(e.what());
    }
    return std::string("published");
  };
  EXPECT_NE(refusal("mine", {{"event", "x"}, {"n", 1}}).find("a field named 'event'"),
            std::string::npos);
  EXPECT_NE(refusal("mine", {{"time", "yesterday"}}).find("a field named 'time'"),
            std::string::npos);
  EXPECT_NE(refusal("mine", {{"schema", 99}}).find("a field named 'schema'"), std::string::npos);
  EXPECT_NE(refusal("mine", nlohmann::json::array({1, 2})).find("must be a JSON object, got array"),
            std::string::npos);
  EXPECT_NE(refusal("run_finished", nlohmann::json::object()).find("one of the run's own events"),
            std::string::npos);
  EXPECT_NE(refusal("", nlohmann::json::object()).find("needs a name"), std::string::npos);
  EXPECT_TRUE(seen->seen.empty());
  EXPECT_EQ(refusal("mine", {{"n", 1}}), "published");
  EXPECT_EQ(refusal("checkpoint_saved", {{"path", "x.h5"}}), "published");  // a plugin's too
  EXPECT_EQ(refusal("mine", nullptr), "published");
  EXPECT_EQ(seen->seen, (std::vector<std::string>{
                            "mine{\"n\":1}", "checkpoint_saved{\"path\":\"x.h5\"}", "mine{}"}));
}

TEST(Trainer, KerasHookOrderAndValPrefixedLogs) {
  Harness s;
  auto rec = std::make_shared<Recorder>();
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(10), {4, true, 1, 0});
  DataLoader val(std::make_shared<TableDataset>(6), {4, false, 0, 0});
  auto history = s.trainer.fit(train, &val, {2});
  const std::vector<std::string> epoch0 = {"train_begin",
                                           "epoch_begin:0",
                                           "b0",
                                           "e0",
                                           "b1",
                                           "e1",
                                           "b2",
                                           "e2",
                                           "test_begin",
                                           "test_end",
                                           "epoch_end:0:loss,accuracy,val_loss,val_accuracy,"};
  ASSERT_GE(rec->calls.size(), epoch0.size());
  EXPECT_EQ(std::vector<std::string>(rec->calls.begin(), rec->calls.begin() + epoch0.size()),
            epoch0);
  EXPECT_EQ(rec->calls.back(), "train_end:4");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(s.trainer.state().step, 6);  // 3 batches (4, 4, 2) per epoch
}

// The trainer reads one batch ahead (GPU replicas copy it during the step before); a batch that
// cannot be read still fails the run at its own turn, after every batch before it was trained
// and seen by the callbacks, with the dataset's own error.
TEST(Trainer, AnUnreadableBatchFailsTheRunAtItsTurn) {
  class Unreadable : public TableDataset {
   public:
    Unreadable() : TableDataset(40) {}
    void read(std::span<const std::int64_t> idx, float* x, float* y) const override {
      for (auto i : idx)
        if (i == 13) throw DataError("sample 13 is unreadable");
      TableDataset::read(idx, x, y);
    }
  };
  for (int prefetch : {0, 2}) {
    Harness s;
    auto rec = std::make_shared<Recorder>();
    CallbackBus bus;
    bus.add(rec);
    s.trainer.set_callbacks(std::move(bus));
    DataLoader train(std::make_shared<Unreadable>(), {4, false, 1, prefetch});
    try {
      s.trainer.fit(train, nullptr, {1});
      FAIL() << "no error for the unreadable sample";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("sample 13"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.trainer.state().step, 3) << "prefetch " << prefetch;  // batches 0-2: samples 0-11
    EXPECT_EQ(rec->calls.back(), "e2") << "prefetch " << prefetch;
  }
}

TEST(Trainer, LearnsTheRule) {
  Harness s;
  DataLoader train(std::make_shared<TableDataset>(512), {32, true, 1, 2});
  auto history = s.trainer.fit(train, nullptr, {15});
  EXPECT_LT(*history.back().get("loss"), 0.5 * *history.front().get("loss"));
  EXPECT_GT(*history.back().get("accuracy"), 0.85);
}

// A checkpoint holds copies of the weights and optimizer slots unless asked to share them: a
// shared one reads the model's own storage (and so sees the next step's change), a copy keeps
// the values it was taken with. Both hold the same values when taken.
TEST(Trainer, ACheckpointCopiesTheTensorsUnlessAskedToShareThem) {
  Harness s;
  DataLoader train(std::make_shared<TableDataset>(64), {16, true, 1, 0});
  s.trainer.fit(train, nullptr, {1});
  const CheckpointData copied = s.trainer.checkpoint();
  const CheckpointData shared = s.trainer.checkpoint(Target::template_model, Snapshot::shared);
  ASSERT_TRUE(copied.training && shared.training);
  ASSERT_EQ(copied.layers.size(), shared.layers.size());
  std::vector<Parameter*> params;
  for (std::size_t l = 0; l < s.model->layer_count(); ++l)
    for (Parameter* p : s.model->layer(l).parameters()) params.push_back(p);
  std::size_t weights = 0;
  for (std::size_t l = 0; l < copied.layers.size(); ++l)
    for (std::size_t w = 0; w < copied.layers[l].weights.size(); ++w, ++weights) {
      const Tensor& c = copied.layers[l].weights[w].value;
      const Tensor& sh = shared.layers[l].weights[w].value;
      EXPECT_EQ(sh.data(), params.at(weights)->value.data());
      EXPECT_NE(c.data(), params.at(weights)->value.data());
      EXPECT_TRUE(std::equal(c.values().begin(), c.values().end(), sh.values().begin()));
    }
  EXPECT_EQ(weights, params.size());
  ASSERT_EQ(copied.training->optimizer_slots.size(), shared.training->optimizer_slots.size());
  ASSERT_FALSE(shared.training->optimizer_slots.empty());
  for (std::size_t i = 0; i < shared.training->optimizer_slots.size(); ++i)
    EXPECT_NE(copied.training->optimizer_slots[i].value.data(),
              shared.training->optimizer_slots[i].value.data());
  const Tensor& first_slot = s.opt->slots(0)[0];
  EXPECT_EQ(shared.training->optimizer_slots[0].value.data(), first_slot.data());
  // One more epoch: the shared weights move with the model, the copied ones do not.
  const std::vector<float> before(copied.layers[0].weights[0].value.values().begin(),
                                  copied.layers[0].weights[0].value.values().end());
  s.trainer.fit(train, nullptr, {2});
  const auto& now = shared.layers[0].weights[0].value;
  EXPECT_FALSE(std::equal(before.begin(), before.end(), now.values().begin()));
  EXPECT_TRUE(
      std::equal(before.begin(), before.end(), copied.layers[0].weights[0].value.values().begin()));
}

TEST(Trainer, StopRequestEndsTheRunAfterTheEpochBookkeeping) {
  Harness s;
  auto rec = std::make_shared<Recorder>();
  rec->on_batch = [](CallbackContext& c, std::int64_t b) {
    if (b == 1) c.request_stop("enough");
  };
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(40), {4, true, 1, 0});
  auto history = s.trainer.fit(train, nullptr, {5});
  EXPECT_EQ(history.size(), 1u);
  EXPECT_EQ(s.trainer.state().step, 2);
  EXPECT_EQ(s.trainer.state().stop_reason, "enough");
  EXPECT_FALSE(s.trainer.interrupted());
}

TEST(Trainer, StepsPerEpochTrainsTheFirstStepsOfEachEpochsOrder) {
  Harness s;
  auto rec = std::make_shared<Recorder>();
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(40), {4, true, 1, 0});  // 10 batches
  auto history = s.trainer.fit(train, nullptr, {3, 4});
  EXPECT_EQ(history.size(), 3u);
  EXPECT_EQ(s.trainer.state().step, 12);
  EXPECT_EQ(s.trainer.state().steps_per_epoch, 4);
  std::int64_t batch_ends = 0;
  for (const auto& c : rec->calls) batch_ends += c == "e3" ? 1 : 0;
  EXPECT_EQ(batch_ends, 3);
  EXPECT_EQ(std::count(rec->calls.begin(), rec->calls.end(), "e4"), 0);
  // More steps than the data has batches is refused, naming the key.
  Harness t;
  DataLoader small(std::make_shared<TableDataset>(8), {4, true, 1, 0});
  try {
    t.trainer.fit(small, nullptr, {1, 3});
    ADD_FAILURE() << "3 steps of 2 batches accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "steps_per_epoch");
    EXPECT_NE(std::string(e.what()).find("the data gives 2 batches of 4"), std::string::npos)
        << e.what();
  }
}

TEST(Trainer, LearningRateSetByACallbackIsUsed) {
  Harness s;
  auto rec = std::make_shared<Recorder>();
  rec->on_batch = [](CallbackContext& c, std::int64_t) { c.set_learning_rate(0.123); };
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(8), {4, true, 1, 0});
  s.trainer.fit(train, nullptr, {1});
  EXPECT_DOUBLE_EQ(s.opt->learning_rate(), 0.123);
  for (const auto& [lr, text] : std::vector<std::pair<double, std::string>>{
           {-1, "got -1"}, {0, "got 0"}, {std::nan(""), "got nan"}}) {
    try {
      s.trainer.set_learning_rate(lr);
      ADD_FAILURE() << text;
    } catch (const RunError& e) {
      EXPECT_TRUE(std::string(e.what()).ends_with(text)) << e.what();  // not "-1.000000"
    }
  }
}

// Weights a hook changes through ctx.model() reach every replica before the next step: three
// replicas then train to what one does, and each holds the template's weights (contract 1).
// Here a callback halves the first kernel after batch 2, through ctx.model() or through its
// target view; without the broadcast the other replicas kept their own kernel and the runs
// parted at the next step.
std::vector<float> halved_after_batch_two(int replicas, bool through_view,
                                          std::vector<std::vector<float>>* copies) {
  Harness s(adam(), replicas);
  auto rec = std::make_shared<Recorder>();
  rec->on_batch = [through_view](CallbackContext& c, std::int64_t b) {
    if (b != 2) return;
    Model& model = through_view ? c.target().model() : c.model();
    Tensor& kernel = model.trainable_parameters()[0]->value;
    for (float& v : kernel.values()) v *= 0.5f;
  };
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(48), {12, true, 5, 0});
  s.trainer.fit(train, nullptr, {2});
  if (copies)
    for (int r = 0; r < replicas; ++r) {
      const Tensor& k = s.meta.replica(r).trainable_parameters()[0]->value;
      copies->emplace_back(k.data(), k.data() + k.size());
    }
  const Tensor& k = s.meta.template_model().trainable_parameters()[0]->value;
  return {k.data(), k.data() + k.size()};
}

TEST(Trainer, WeightsAHookChangesReachEveryReplica) {
  for (const bool through_view : {false, true}) {
    SCOPED_TRACE(through_view ? "target().model()" : "model()");
    const std::vector<float> one = halved_after_batch_two(1, through_view, nullptr);
    std::vector<std::vector<float>> copies;
    const std::vector<float> three = halved_after_batch_two(3, through_view, &copies);
    ASSERT_EQ(one.size(), three.size());
    for (std::size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(three[i], one[i], 1e-5) << i;
    for (const auto& copy : copies) EXPECT_EQ(copy, three);
  }
}

// Interrupting mid-epoch, saving, and resuming in a new process-like setup gives bitwise the same
// weights as never stopping (dropout RNG, optimizer slots, data order and partial metrics
// included).
// Interrupted at step 10 (epoch 1, batch 3 of 7), checkpointed to a file, resumed by a fresh
// trainer: the same weights, to the bit, as three epochs in one go. Returns the two harnesses.
struct ResumedRun {
  std::unique_ptr<Harness> straight, resumed;
  std::filesystem::path checkpoint;
};
ResumedRun interrupt_and_resume(const json& optimizer) {
  auto dataset = std::make_shared<TableDataset>(50);
  ResumedRun run{std::make_unique<Harness>(optimizer), std::make_unique<Harness>(optimizer), {}};
  DataLoader l1(dataset, {8, true, 5, 2});
  auto h1 = run.straight->trainer.fit(l1, nullptr, {3});

  std::atomic<bool> flag{false};
  Harness first(optimizer);
  auto rec = std::make_shared<Recorder>();
  rec->on_batch = [&](CallbackContext& c, std::int64_t) {
    if (c.state().step == 10) flag = true;
  };
  CallbackBus bus;
  bus.add(rec);
  first.trainer.set_callbacks(std::move(bus));
  first.trainer.set_interrupt_flag(&flag);
  DataLoader l2(dataset, {8, true, 5, 2});
  first.trainer.fit(l2, nullptr, {3});
  EXPECT_TRUE(first.trainer.interrupted());
  EXPECT_EQ(first.trainer.state().step, 10);
  run.checkpoint = test::scratch_dir("resume") / "ckpt.h5";
  write_checkpoint_file(run.checkpoint, first.trainer.checkpoint());

  // Fresh weights and optimizer, as a new process would have.
  run.resumed->trainer.restore(read_checkpoint_file(run.checkpoint), run.checkpoint.string());
  DataLoader l3(dataset, {8, true, 5, 2});
  auto h2 = run.resumed->trainer.fit(l3, nullptr, {3});
  EXPECT_EQ(h2.size(), 3u);
  EXPECT_EQ(*h2.back().get("loss"), *h1.back().get("loss"));
  EXPECT_EQ(*h2.back().get("accuracy"), *h1.back().get("accuracy"));
  auto pa = run.straight->model->parameters(), pb = run.resumed->model->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(
        std::memcmp(pa[i]->value.data(), pb[i]->value.data(), pa[i]->value.size() * sizeof(float)),
        0)
        << "parameter " << i;
  return run;
}

TEST(Trainer, InterruptAndResumeIsBitwiseExact) { interrupt_and_resume(adam()); }

// Adam whose rate follows Keras' CosineDecay with a warm-up (over the 21 steps of the runs).
json scheduled_adam() {
  return {{"class_name", "Adam"},
          {"config",
           {{"learning_rate",
             {{"class_name", "CosineDecay"},
              {"config",
               {{"initial_learning_rate", 0.001},
                {"decay_steps", 15},
                {"warmup_target", 0.02},
                {"warmup_steps", 4}}}}}}}};
}

// A rate that follows a schedule resumes from the step count: the same bits as never stopping,
// on one replica and on three, and a callback that sets the rate is refused naming the schedule.
TEST(Trainer, AScheduledRateResumesBitwiseAndIsTheSameOnThreeReplicas) {
  interrupt_and_resume(scheduled_adam());
  const auto weights_after = [](int replicas) {
    Harness s(scheduled_adam(), replicas);
    DataLoader train(std::make_shared<TableDataset>(50), {8, true, 5, 2});
    s.trainer.fit(train, nullptr, {2});
    EXPECT_NEAR(s.opt->learning_rate(),
                0.02 * 0.5 * (1 + std::cos(3.14159265358979323846 * 10 / 15)), 1e-12);  // step 14
    const Tensor& k = s.meta.template_model().trainable_parameters()[0]->value;
    return std::vector<float>(k.data(), k.data() + k.size());
  };
  const std::vector<float> one = weights_after(1), three = weights_after(3);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(three[i], one[i], 1e-5) << i;

  Harness s(scheduled_adam());
  auto rec = std::make_shared<Recorder>();
  rec->on_batch = [](CallbackContext& c, std::int64_t) { c.set_learning_rate(0.1); };
  CallbackBus bus;
  bus.add(rec);
  s.trainer.set_callbacks(std::move(bus));
  DataLoader train(std::make_shared<TableDataset>(8), {4, true, 1, 0});
  try {
    s.trainer.fit(train, nullptr, {1});
    ADD_FAILURE() << "a scheduled rate was set";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("callback 'recorder' failed in on_train_batch_end: the "
                                         "learning rate follows the optimizer's CosineDecay"),
              std::string::npos)
        << e.what();
  }
}

// The loss scale moves during the run (doubling every 3 good steps from 1), so the resumed run
// must take its scale and its count of good steps from the checkpoint to stay on the same bits.
TEST(Trainer, LossScaledInterruptAndResumeIsBitwiseExactWithTheScale) {
  const ResumedRun run = interrupt_and_resume(loss_scaled_adam(1.0, 3));
  const LossScale* a = run.straight->opt->loss_scale();
  const LossScale* b = run.resumed->opt->loss_scale();
  EXPECT_EQ(a->scale(), 128.0);  // 21 good steps: doubled 7 times
  EXPECT_EQ(b->state(), a->state());

  CheckpointData data = read_checkpoint_file(run.checkpoint);
  const json& saved = data.training->state.at("optimizer");
  EXPECT_EQ(saved.at("class_name"), "LossScaleOptimizer");
  EXPECT_EQ(saved.at("config").at("inner_optimizer").at("class_name"), "Adam");
  EXPECT_EQ(saved.at("loss_scale").at("scale"), 8.0);  // after 10 steps
  EXPECT_EQ(saved.at("loss_scale").at("good_steps"), 1);

  const auto refused = [&](const CheckpointData& d, const json& optimizer,
                           const std::string& words) {
    Harness h(optimizer);
    try {
      h.trainer.restore(d, "ckpt.h5");
      ADD_FAILURE() << "restored";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  CheckpointData no_scale = data;
  no_scale.training->state["optimizer"].erase("loss_scale");
  refused(no_scale, loss_scaled_adam(1.0, 3),
          "ckpt.h5: the training state's loss_scale is a JSON null");
  CheckpointData bad_scale = data;
  bad_scale.training->state["optimizer"]["loss_scale"]["scale"] = -4.0;
  refused(bad_scale, loss_scaled_adam(1.0, 3), "not a positive normal float");
  refused(data, adam(), "was trained with optimizer LossScaleOptimizer, the config now says Adam");
}

TEST(Trainer, ResumingMidEpochWithAnotherBatchSizeIsRefused) {
  auto dataset = std::make_shared<TableDataset>(40);
  std::atomic<bool> flag{true};  // interrupt after the first batch
  Harness first;
  first.trainer.set_interrupt_flag(&flag);
  DataLoader l1(dataset, {8, true, 5, 0});
  first.trainer.fit(l1, nullptr, {2});
  ASSERT_TRUE(first.trainer.interrupted());
  Harness second;
  second.trainer.restore(first.trainer.checkpoint(), "mem");
  DataLoader l2(dataset, {16, true, 5, 0});
  try {
    second.trainer.fit(l2, nullptr, {2});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("same data and batch_size"), std::string::npos)
        << e.what();
  }
}

TEST(Trainer, NonFiniteLossIsARunErrorNamingTheStep) {
  Harness s;
  DataLoader train(std::make_shared<TableDataset>(16, true), {4, false, 0, 0});
  try {
    s.trainer.fit(train, nullptr, {1});
    FAIL();
  } catch (const RunError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch 2"), std::string::npos) << msg;  // sample 7 is in the 2nd batch
  }
}

TEST(Trainer, DataThatDoesNotFitTheModelIsAShapeError) {
  class Wide : public TableDataset {
   public:
    Wide() : TableDataset(4) {}
    Shape x_shape() const override { return {5}; }
  };
  Harness s;
  DataLoader train(std::make_shared<Wide>(), {4, false, 0, 0});
  EXPECT_THROW(s.trainer.fit(train, nullptr, {1}), ShapeError);
}

TEST(Trainer, PredictReturnsOutputsInOrderAndEvaluateMatchesAManualPass) {
  Harness s;
  auto data = std::make_shared<TableDataset>(10);
  DataLoader loader(data, {4, false, 0, 1});
  Tensor out = s.trainer.predict(loader);
  ASSERT_EQ(out.shape(), (Shape{10, 3}));
  Tensor x({10, 4}), y({10});
  std::vector<std::int64_t> idx(10);
  for (int i = 0; i < 10; ++i) idx[i] = i;
  data->read(idx, x.data(), y.data());
  const Tensor direct = s.model->forward(x, false).clone();
  for (std::int64_t i = 0; i < out.size(); ++i) EXPECT_FLOAT_EQ(out[i], direct[i]);
  Logs logs = s.trainer.evaluate(loader);
  EXPECT_NEAR(*logs.get("loss"), s.loss->compute(direct, y, 1, nullptr) / 10, 1e-6);
}

TEST(Trainer, EventsAreWellFormedJsonLines) {
  Harness s;
  auto path = test::scratch_dir("events") / "events.jsonl";
  EventSink sink;
  sink.open_file(path);
  s.trainer.set_event_sink(&sink);
  DataLoader train(std::make_shared<TableDataset>(8), {4, true, 1, 0});
  s.trainer.fit(train, nullptr, {1});
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> events;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    EXPECT_EQ(j["schema"], 1);
    EXPECT_TRUE(j["time"].get<std::string>().ends_with("Z"));
    events.push_back(j["event"]);
    if (j["event"] == "batch_ended") {
      EXPECT_TRUE(j["logs"].contains("loss"));
      EXPECT_TRUE(j["logs"].contains("accuracy"));
      EXPECT_GT(j["lr"].get<double>(), 0);
      EXPECT_GE(j["samples_per_sec"].get<double>(), 0);
    }
    EXPECT_FALSE(j.contains("loss_scale"));  // only a loss-scaled optimizer has one
  }
  EXPECT_EQ(events, (std::vector<std::string>{"epoch_started", "batch_ended", "batch_ended",
                                              "epoch_ended"}));
}

// Keras 3's rule with dynamic_growth_steps 2 from a scale of 1: each second good step in a row
// doubles it. batch_ended and epoch_ended carry the scale after the step and the skipped steps.
TEST(Trainer, LossScaleGrowsAfterGoodStepsAndShowsInTheEvents) {
  Harness s(loss_scaled_adam(1.0, 2));
  auto path = test::scratch_dir("loss-scale-events") / "events.jsonl";
  EventSink sink;
  sink.open_file(path);
  s.trainer.set_event_sink(&sink);
  DataLoader train(std::make_shared<TableDataset>(20), {4, true, 1, 0});
  s.trainer.fit(train, nullptr, {1});
  std::ifstream in(path);
  std::string line;
  std::vector<double> scales;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["event"] == "batch_ended") {
      scales.push_back(j.at("loss_scale").get<double>());
      EXPECT_EQ(j.at("skipped_steps"), 0);
    }
    if (j["event"] == "epoch_ended") {
      EXPECT_EQ(j.at("loss_scale"), 4.0);
      EXPECT_EQ(j.at("skipped_steps"), 0);
    }
  }
  EXPECT_EQ(scales, (std::vector<double>{1, 2, 2, 4, 4}));
  EXPECT_EQ(s.opt->iterations(), 5);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(EventSink, AppendingAfterAPartialLineStartsAFreshLine) {
  auto path = test::scratch_dir("events-append") / "events.jsonl";
  test::write_text(path, "{\"schema\":1,\"event\":\"batch_ended\",\"ti");  // a killed run
  {
    EventSink sink;
    sink.open_file(path);
    sink.emit("run_started", {{"name", "x"}});
  }
  std::ifstream in(path);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_FALSE(json::accept(first));  // the partial line, on its own
  EXPECT_EQ(json::parse(second)["event"], "run_started");
}

}  // namespace
}  // namespace tandem
