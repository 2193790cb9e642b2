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
  auto history = run.fit(std::make_shared<TableDataset>(64, 40), nullptr, 3);
  EXPECT_TRUE(history.empty());  // stopped inside the first epoch
  EXPECT_NE(run.trainer->state().stop_reason.find("terminate_on_nan"), std::string::npos);
  EXPECT_NE(run.trainer->state().stop_reason.find("invalid loss NaN"), std::string::npos);
  for (Parameter* p : run.model->parameters())
    for (float v : p->value.values()) ASSERT_TRUE(std::isfinite(v));
  bool stopped = false;
  for (const auto& e : read_events(run.run_dir)) stopped |= e["event"] == "stopped";
  EXPECT_TRUE(stopped);
}

TEST(TerminateOnNanPlugin, RaiseErrorFailsTheRun) {
  PluginRun run;
  run.add("terminate_on_nan", {{"raise_error", true}});
  try {
    run.fit(std::make_shared<TableDataset>(64, 40), nullptr, 3);
    FAIL();
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("callback 'terminate_on_nan'"), std::string::npos)
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
