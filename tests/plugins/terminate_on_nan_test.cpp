#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

// Samples from index 40 on contain NaN; with a fixed order (shuffle on, seed 5) some batch of the
// first epoch holds one, so the loss goes NaN there.
TEST(TerminateOnNanPlugin, StopsCleanlyAndKeepsThePreviousWeights) {
  PluginRun run;
  run.add("terminate_on_nan", {});
  testing::internal::CaptureStderr();
  auto history = run.fit(std::make_shared<TableDataset>(64, 40), nullptr, 3);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(": Invalid loss, terminating training\n"), std::string::npos) << err;
  EXPECT_EQ(err.rfind("Batch ", 0), 0u) << err;  // Keras' line, printed whatever the verbosity
  EXPECT_TRUE(history.empty());  // stopped inside the first epoch
  EXPECT_NE(run.trainer->state().stop_reason.find("terminate_on_nan"), std::string::npos);
  EXPECT_NE(run.trainer->state().stop_reason.find("invalid loss NaN"), std::string::npos);
  for (Parameter* p : run.model->parameters())
    for (float v : p->value.values()) ASSERT_TRUE(std::isfinite(v));
  bool stopped = false;
  for (const auto& e : read_events(run.run_dir)) stopped |= e["event"] == "stopped";
  EXPECT_TRUE(stopped);
}

// raise_error fails the run the way the trainer does for a non-finite loss: a diverged run,
// whose caller saves the step before (tandem train's model.h5). It threw from the hook, and the
// run's weights were lost.
TEST(TerminateOnNanPlugin, RaiseErrorFailsTheRunAsADivergedOne) {
  PluginRun run;
  run.add("terminate_on_nan", {{"raise_error", true}});
  try {
    run.fit(std::make_shared<TableDataset>(64, 40), nullptr, 3);
    FAIL();
  } catch (const DivergedRun& e) {
    EXPECT_NE(std::string(e.what()).find("the loss became NaN at epoch 1"), std::string::npos)
        << e.what();
  }
}

TEST(TerminateOnNanPlugin, WithoutItTheTrainerFailsTheRun) {
  PluginRun run;
  EXPECT_THROW(run.fit(std::make_shared<TableDataset>(64, 40), nullptr, 3), RunError);
}

TEST(TerminateOnNanPlugin, SchemaRejectsUnknownAndMistypedOptions) {
  PluginRun run;
  EXPECT_THROW(run.add("terminate_on_nan", {{"raise_error", "yes"}}), ConfigError);
  EXPECT_THROW(run.add("terminate_on_nan", {{"rais_error", true}}), ConfigError);
}

}  // namespace
}  // namespace tandem::test
