// replica_stats: per-replica facts through the meta view, every N steps; refused on the template.
#include <gtest/gtest.h>

#include "plugins/plugin_test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::vector<json> events_named(const std::filesystem::path& run_dir, const std::string& name) {
  std::vector<json> out;
  for (const auto& e : read_events(run_dir))
    if (e["event"] == name) out.push_back(e);
  return out;
}

TEST(ReplicaStatsPlugin, ListsEveryReplicaWithItsSliceOfTheBatch) {
  PluginRun run("cpu:3");
  run.add("replica_stats", json::object(), Target::meta);
  // 64 samples in batches of 10: six of 10 (4 + 3 + 3) and one of 4 (2 + 1 + 1) per epoch.
  run.fit(std::make_shared<TableDataset>(64), nullptr, 2, 10);
  const auto stats = events_named(run.run_dir, "replica_stats");
  const auto batches = events_named(run.run_dir, "batch_ended");
  ASSERT_EQ(stats.size(), 14u);  // every step by default
  ASSERT_EQ(batches.size(), 14u);
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const json& e = stats[i];
    EXPECT_EQ(e["plan"], "cpu:3");
    EXPECT_EQ(e["step"], batches[i]["step"]);
    EXPECT_EQ(e["epoch"], batches[i]["epoch"]);
    EXPECT_EQ(e["batch"], batches[i]["batch"]);
    ASSERT_EQ(e["replicas"].size(), 3u);
    std::int64_t sum = 0;
    for (int r = 0; r < 3; ++r) {
      const json& rep = e["replicas"][r];
      EXPECT_EQ(rep["replica"], r);
      EXPECT_EQ(rep["device"], "cpu");
      EXPECT_TRUE(rep["memory_used_bytes"].is_null());  // not known on CPU
      EXPECT_GE(rep["step_seconds"].get<double>(), 0.0);
      sum += rep["samples"].get<std::int64_t>();
    }
    EXPECT_EQ(sum, batches[i]["size"].get<std::int64_t>());
    EXPECT_EQ(e["batch_size"], sum);
    const bool last = e["batch"] == 7;
    EXPECT_EQ(e["replicas"][0]["samples"], last ? 2 : 4);
    EXPECT_EQ(e["replicas"][1]["samples"], last ? 1 : 3);
    EXPECT_EQ(e["replicas"][2]["samples"], last ? 1 : 3);
  }
}

TEST(ReplicaStatsPlugin, PublishesEveryNthStep) {
  PluginRun run("cpu:2");
  run.add("replica_stats", {{"every_n_batches", 3}}, Target::meta);
  run.fit(std::make_shared<TableDataset>(64), nullptr, 2, 10);  // 14 steps
  std::vector<std::int64_t> steps;
  for (const auto& e : events_named(run.run_dir, "replica_stats")) {
    steps.push_back(e["step"]);
    EXPECT_EQ(e["replicas"].size(), 2u);
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{3, 6, 9, 12}));
}

TEST(ReplicaStatsPlugin, RefusesTheTemplateTargetAndBadOptions) {
  PluginRun run;
  try {
    run.add("replica_stats", json::object(), Target::template_model);
    FAIL() << "the template target was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "callbacks[0].target");
    EXPECT_NE(std::string(e.what()).find("\"target\": \"meta\""), std::string::npos) << e.what();
  }
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("replica_stats").create(options, {Target::meta, "callbacks[1]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of({{"every_n_batches", 0}}), "callbacks[1].options.every_n_batches");
  EXPECT_EQ(path_of({{"every_n_batches", "10"}}), "callbacks[1].options.every_n_batches");
  EXPECT_EQ(path_of({{"every", 10}}), "callbacks[1].options.every");
  EXPECT_EQ(path_of({{"every_n_batches", 5}}), "");
}

}  // namespace
}  // namespace tandem::test
