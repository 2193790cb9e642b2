// swap_ema_weights (Keras 3's SwapEMAWeights) through the plugin host, against the same run
// without it: validation runs on the optimizer's moving averages while training goes on, to the
// bit, from its own weights; with swap_on_epoch the callbacks after it see and checkpoint the
// averages as the weights (the weights as the averages), and such a checkpoint resumes to the
// straight run's bits. Without use_ema the run is refused naming the callback and the key.
#include <gtest/gtest.h>

#include <cstring>

#include "plugins/plugin_test_support.hpp"
#include "tandem/error.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

const json kEmaAdam = {
    {"class_name", "Adam"},
    {"config", {{"learning_rate", 0.02}, {"use_ema", true}, {"ema_momentum", 0.8}}}};

std::vector<std::vector<float>> weights_of(Model& model) {
  std::vector<std::vector<float>> out;
  for (const Parameter* p : model.trainable_parameters())
    out.emplace_back(p->value.data(), p->value.data() + p->value.size());
  return out;
}

// The checkpoint's weights and its "average" slots, both in trainable-parameter order.
struct Snapshot {
  std::vector<std::vector<float>> weights, averages;
  bool swapped = false;
  CheckpointData data;
};

// Keeps a resumable checkpoint at every epoch end (listed after swap_ema_weights).
class EpochEndCheckpoints : public Callback {
 public:
  std::string name() const override { return "epoch_end_checkpoints"; }
  void on_epoch_end(CallbackContext& ctx, int, const Logs&) override {
    Snapshot s;
    s.data = ctx.target().checkpoint(true);
    for (const LayerWeights& layer : s.data.layers)
      for (const NamedTensor& w : layer.weights)
        s.weights.emplace_back(w.value.data(), w.value.data() + w.value.size());
    for (const NamedTensor& slot : s.data.training->optimizer_slots)
      if (slot.name.ends_with("/average"))
        s.averages.emplace_back(slot.value.data(), slot.value.data() + slot.value.size());
    s.swapped = s.data.training->state["optimizer"].value("averages_in_weights", false);
    snapshots.push_back(std::move(s));
  }
  std::vector<Snapshot> snapshots;
};

struct EmaRun {
  explicit EmaRun(const json& swap_options, bool with_swap = true)
      : run("cpu:2", 0.02, 3, kEmaAdam) {
    if (with_swap) run.add("swap_ema_weights", swap_options);
    run.bus.add(checkpoints);
  }
  const std::vector<Logs>& fit(int epochs) {
    return run.fit(std::make_shared<TableDataset>(64), std::make_shared<TableDataset>(24), epochs);
  }
  PluginRun run;
  std::shared_ptr<EpochEndCheckpoints> checkpoints = std::make_shared<EpochEndCheckpoints>();
};

TEST(SwapEmaWeightsPlugin, ValidationRunsOnTheAveragesAndTrainingOnItsOwnWeights) {
  EmaRun swapped(json::object()), plain(json::object(), false);
  const auto swapped_history = swapped.fit(3);
  const auto plain_history = plain.fit(3);
  // Training went on from its own weights: the same averages at the end, to the bit.
  EXPECT_EQ(weights_of(*swapped.run.model), weights_of(*plain.run.model));
  for (int e = 0; e < 3; ++e) {
    const Snapshot& s = swapped.checkpoints->snapshots[static_cast<std::size_t>(e)];
    EXPECT_FALSE(s.swapped) << "epoch " << e;  // swapped back after each validation
    EXPECT_EQ(s.weights, plain.checkpoints->snapshots[static_cast<std::size_t>(e)].weights);
    // Validation saw other weights than the plain run's.
    EXPECT_NE(*swapped_history[static_cast<std::size_t>(e)].get("val_loss"),
              *plain_history[static_cast<std::size_t>(e)].get("val_loss"))
        << "epoch " << e;
  }
  // The last validation ran on the averages the run ended with.
  DataLoader validation(std::make_shared<TableDataset>(24), {8, false, 0, 0});
  const Logs final_weights = plain.run.trainer->evaluate(validation);
  ASSERT_TRUE(final_weights.get("loss").has_value());
  EXPECT_EQ(*swapped_history.back().get("val_loss"), *final_weights.get("loss"));
}

TEST(SwapEmaWeightsPlugin, SwapOnEpochShowsTheAveragesToTheCallbacksAfterItAndResumes) {
  EmaRun swapped(json{{"swap_on_epoch", true}}), plain(json::object(), false);
  swapped.fit(3);
  plain.fit(3);
  EXPECT_EQ(weights_of(*swapped.run.model), weights_of(*plain.run.model));
  for (int e = 0; e < 3; ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e));
    const Snapshot& s = swapped.checkpoints->snapshots[static_cast<std::size_t>(e)];
    const Snapshot& p = plain.checkpoints->snapshots[static_cast<std::size_t>(e)];
    EXPECT_TRUE(s.swapped);
    EXPECT_EQ(s.weights, p.averages);  // the averages, as the weights
    EXPECT_EQ(s.averages, p.weights);
    EXPECT_NE(s.weights, p.weights);
  }
  // The epoch-1 checkpoint (swapped) resumes to the straight run's bits.
  EmaRun resumed(json{{"swap_on_epoch", true}});
  resumed.run.trainer->restore(swapped.checkpoints->snapshots[0].data, "epoch 1's checkpoint");
  resumed.fit(3);
  EXPECT_EQ(weights_of(*resumed.run.model), weights_of(*plain.run.model));
  ASSERT_EQ(resumed.checkpoints->snapshots.size(), 2u);
  EXPECT_EQ(resumed.checkpoints->snapshots[1].weights, swapped.checkpoints->snapshots[2].weights);
}

// A checkpoint's averages_in_weights must be true or false.
TEST(SwapEmaWeightsPlugin, ACheckpointsSwapFlagOfAnotherKindIsRefused) {
  EmaRun swapped(json{{"swap_on_epoch", true}});
  swapped.fit(1);
  CheckpointData data = swapped.checkpoints->snapshots[0].data;
  for (const json& bad : {json("yes"), json(1), json::object()}) {
    data.training->state["optimizer"]["averages_in_weights"] = bad;
    EmaRun resumed(json::object());
    try {
      resumed.run.trainer->restore(data, "ckpt.h5");
      ADD_FAILURE() << bad.dump() << " accepted";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()), "ckpt.h5: the optimizer's averages_in_weights is " +
                                           bad.dump() + ", not true or false");
    }
  }
}

TEST(SwapEmaWeightsPlugin, WithoutUseEmaTheRunIsRefusedNamingTheKey) {
  PluginRun run("cpu:1");
  run.add("swap_ema_weights", json::object());
  try {
    run.fit(std::make_shared<TableDataset>(32), std::make_shared<TableDataset>(16), 1);
    ADD_FAILURE() << "swap_ema_weights without use_ema accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::strstr(e.what(), "swap_ema_weights"), nullptr) << e.what();
    EXPECT_NE(std::strstr(e.what(), "\"use_ema\": true in optimizer.config"), nullptr) << e.what();
  }
  EXPECT_THROW(run.add("swap_ema_weights", {{"swap_on_epoch", "yes"}}), ConfigError);
  EXPECT_THROW(run.add("swap_ema_weights", {{"swap_on_epochs", true}}), ConfigError);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem::test
