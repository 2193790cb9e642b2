// `tandem train --device-stats SECONDS`: how often the event stream samples device utilisation
// (tandem-gui asks for every 2 s so its device chart starts at once; the default is 10 s).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
namespace fs = std::filesystem;

int device_stats_events(const fs::path& run_dir) {
  std::ifstream in(run_dir / "events.jsonl");
  int n = 0;
  for (std::string line; std::getline(in, line);)
    n += json::parse(line).value("event", "") == "device_stats";
  return n;
}

TEST(DeviceStatsCli, TheFlagSetsHowOftenTheStreamSamplesDevices) {
  const fs::path dir = test::scratch_dir("device-stats");
  json config = test::tiny_regression_config();
  config["epochs"] = 3;
  // Every batch end is past a microsecond: a sample after each of the 6 batches.
  auto r = test::train_in(dir, "often", config, "--device-stats 0.000001");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(device_stats_events(dir / "often"), 6);
  // 0: never; the default (10 s) takes no sample in a run this short.
  r = test::train_in(dir, "never", config, "--device-stats 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(device_stats_events(dir / "never"), 0);
  r = test::train_in(dir, "default", config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(device_stats_events(dir / "default"), 0);
  // The flag also reaches an events plugin the config lists itself.
  config["callbacks"] = {{{"plugin", "events"}, {"options", {{"device_stats_seconds", 0}}}}};
  r = test::train_in(dir, "listed", config, "--device-stats 0.000001");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(device_stats_events(dir / "listed"), 6);
}

TEST(DeviceStatsCli, SecondsThatAreNotADurationAreRefusedBeforeTheRun) {
  const fs::path dir = test::scratch_dir("device-stats-bad");
  for (const char* bad : {"-1", "nan", "inf", "1e9", "often"}) {
    const auto r = test::train_in(dir, "bad", test::tiny_regression_config(),
                                  std::string("--device-stats ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--device-stats"), std::string::npos) << bad << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir / "bad")) << bad << ": the run folder was created";
  }
}

}  // namespace
}  // namespace tandem
