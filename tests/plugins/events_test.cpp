// The events plugin: device_stats events during training, at the interval asked for, and its
// options checked.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <thread>

#include "plugins/plugin_test_support.hpp"
#include "tandem/error.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::vector<json> stream(const std::filesystem::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

// Slows every batch a little, so that a short interval passes between batches.
class SlowBatches : public Callback {
 public:
  std::string name() const override { return "slow"; }
  void on_train_batch_end(CallbackContext&, std::int64_t, const Logs&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
};

TEST(EventsPlugin, PublishesDeviceStatsDuringTrainingAtTheInterval) {
  PluginRun run;
  run.bus.add(std::make_shared<SlowBatches>());
  // CPU utilisation comes from /proc/stat, in 10 ms ticks: the interval spans several.
  run.add("events", {{"path", "ev.jsonl"}, {"device_stats_seconds", 0.05}});
  run.fit(std::make_shared<TableDataset>(64), nullptr, 2, 8);  // 16 batches
  int stats = 0;
  std::int64_t last_step = 0;
  std::optional<double> last_time;
  for (const auto& e : stream(run.run_dir / "ev.jsonl")) {
    if (e["event"] != "device_stats") continue;
    ++stats;
    // "2026-11-21T09:55:25.697Z": consecutive readings are at least the interval apart (each
    // truncated to the millisecond). The event's "time" comes after the reading and the JSON.
    std::tm tm{};
    int ms = 0;
    ASSERT_EQ(
        std::sscanf(e["sampled_at"].get<std::string>().c_str(), "%d-%d-%dT%d:%d:%d.%dZ",
                    &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
        7)
        << e.dump();
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const double t = static_cast<double>(timegm(&tm)) + ms / 1000.0;
    if (last_time) {
      EXPECT_GE(t - *last_time, 0.049) << e["sampled_at"];
    }
    last_time = t;
    EXPECT_LE(e["sampled_at"].get<std::string>(), e["time"].get<std::string>());  // ISO 8601 UTC
    EXPECT_EQ(e["schema"], 1);
    ASSERT_TRUE(e.contains("cpu"));
    EXPECT_TRUE(e["cpu"]["utilization_percent"].is_number()) << e.dump();  // measured, not null
    EXPECT_GT(e["cpu"]["memory_used_bytes"].get<std::int64_t>(), 0);
    EXPECT_TRUE(e["gpus"].is_array());
    EXPECT_GT(e["step"].get<std::int64_t>(), last_step);
    last_step = e["step"].get<std::int64_t>();
  }
  EXPECT_GE(stats, 3);  // 16 batches of at least 20 ms: about six at a 50 ms interval
}

TEST(EventsPlugin, ZeroSecondsMeansNoDeviceStatsAndBadValuesAreRefused) {
  PluginRun run;
  run.add("events", {{"path", "ev.jsonl"}, {"device_stats_seconds", 0}});
  run.fit(std::make_shared<TableDataset>(32), nullptr, 1, 8);
  for (const auto& e : stream(run.run_dir / "ev.jsonl")) EXPECT_NE(e["event"], "device_stats");
  for (const json& bad : {json(-1), json("often"), json(nullptr)}) {
    PluginRun other;
    try {
      other.add("events", {{"device_stats_seconds", bad}});
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("device_stats_seconds"), std::string::npos) << e.what();
    }
  }
}

// The stream may go to events.jsonl (its own file) or elsewhere, not over the run's other files
// (events appended to config.json, exit 0, before).
TEST(EventsPlugin, TheRunsOtherFilesAreRefusedAsItsPath) {
  for (const char* own : {"config.json", "model.h5", "checkpoints/checkpoints.json"}) {
    PluginRun run;
    try {
      run.add("events", {{"path", own}});
      ADD_FAILURE() << own << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(".options.path"), std::string::npos) << e.what();
    }
  }
  PluginRun own;
  own.add("events", {{"path", "events.jsonl"}, {"device_stats_seconds", 0}});
  own.fit(std::make_shared<TableDataset>(32), nullptr, 1, 8);
  EXPECT_FALSE(stream(own.run_dir / "events.jsonl").empty());
}

}  // namespace
}  // namespace tandem::test
