// The progress plugin's bar (stderr): an epoch that a callback stopped early ends at the batches
// it ran, never at the epoch's full count; an evaluation ends at the batches it ran.
#include <gtest/gtest.h>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

// Stops the run after the given batch (0-based) of the first epoch.
class StopAfter : public Callback {
 public:
  explicit StopAfter(std::int64_t batch) : batch_(batch) {}
  std::string name() const override { return "stop_after"; }
  void on_train_batch_end(CallbackContext& ctx, std::int64_t batch, const Logs&) override {
    if (batch == batch_) ctx.request_stop("stop_after (test)");
  }

 private:
  std::int64_t batch_;
};

TEST(ProgressPlugin, AnEpochStoppedEarlyEndsAtTheBatchesItRan) {
  PluginRun run;
  run.add("progress", {{"verbose", 2}});
  run.bus.add(std::make_shared<StopAfter>(3));
  testing::internal::CaptureStderr();
  run.fit(std::make_shared<TableDataset>(64), nullptr, 2, 8);  // 8 batches per epoch
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Epoch 1/2\n4/8 ["), std::string::npos) << err;
  EXPECT_EQ(err.find("8/8"), std::string::npos) << err;
  EXPECT_EQ(err.find("Epoch 2/2"), std::string::npos) << err;
}

TEST(ProgressPlugin, AWholeEpochEndsAtItsFullCount) {
  PluginRun run;
  run.add("progress", {{"verbose", 2}});
  testing::internal::CaptureStderr();
  run.fit(std::make_shared<TableDataset>(64), nullptr, 1, 8);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Epoch 1/1\n8/8 ["), std::string::npos) << err;
}

// An evaluation outside fit() does not know its batch count beforehand: the bar ends at the
// batches it ran ("8/8", as Keras), never at "8/0".
TEST(ProgressPlugin, AnEvaluationEndsAtTheBatchesItRan) {
  PluginRun run;
  run.add("progress", {{"verbose", 2}});
  run.trainer->set_callbacks(run.bus);
  DataLoader data(std::make_shared<TableDataset>(64), DataLoaderOptions{8, false, 0, 0});
  testing::internal::CaptureStderr();
  run.trainer->evaluate(data);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("8/8 ["), std::string::npos) << err;
  EXPECT_EQ(err.find("/0 "), std::string::npos) << err;
}

}  // namespace
}  // namespace tandem::test
