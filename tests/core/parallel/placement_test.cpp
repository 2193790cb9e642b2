// Placement (parallel/placement.hpp): what each device holds and its memory, computed by hand
// for a small model; memory sizes as TANDEM_CUDA_MEMORY_LIMIT gives them, and garbage; the
// check that refuses a GPU too small for its share.
#include "parallel/placement.hpp"

#include <gtest/gtest.h>

#include "meta_test_models.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using namespace meta_test;

PipelinePlan two_stages(const Model& model, int microbatches) {
  return {cut_into_stages(model, parse_pipeline_config({{"stages", 2}}, "pipeline")),
          microbatches, PipelineSchedule::one_f_one_b};
}

// Activation bytes per row of the three calls, as the call probe would give them.
const std::vector<std::int64_t> kBytesPerRow{48, 100, 44};

TEST(Placement, EachStageHoldsItsLayersAndTheirMemory) {
  // Dense 6->12 (84 parameters) | Dropout, Dense 12->5 (65); batch 10 in 2 micro-batches of 5
  // rows; Adam: 2 slots per weight; 1F1B: stage 0 holds 2 micro-batches in flight, stage 1 one.
  const auto model = Model::from_config(model_config(), "model", 1);
  const auto placed = place_on_devices(*model, DevicePlan::cpus(2), two_stages(*model, 2), 10, 2, kBytesPerRow);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].layers, (std::vector<std::string>{"dense"}));
  EXPECT_EQ(placed[1].stage, 1);
  EXPECT_EQ(placed[1].device.index, 1);
  EXPECT_EQ(placed[0].memory.weights, 84 * 4);
  EXPECT_EQ(placed[0].memory.gradients, 84 * 4 * 2);  // the sum and the micro-batch's own
  EXPECT_EQ(placed[0].memory.optimizer, 84 * 4 * 2);
  EXPECT_EQ(placed[0].memory.activations, 48 * 5 * 2);
  EXPECT_EQ(placed[1].memory.activations, (100 + 44) * 5 * 1);
  EXPECT_EQ(placed[1].memory.total(), 65 * 4 * 5 + 144 * 5);
  // Without a pipeline: every device holds the whole model and its shard's activations.
  const auto replicas = place_on_devices(*model, DevicePlan::cpus(2), std::nullopt, 11, 2, kBytesPerRow);
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_EQ(replicas[1].replica, 1);
  EXPECT_EQ(replicas[0].memory.gradients, 149 * 4);
  EXPECT_EQ(replicas[0].memory.activations, (48 + 100 + 44) * 6);  // 6 of the 11 rows
  // One size per call, or the caller mixed up its models.
  EXPECT_THROW(place_on_devices(*model, DevicePlan::cpus(2), std::nullopt, 11, 2, {48, 100}),
               std::invalid_argument);
  const json table = placement_json(replicas);
  EXPECT_EQ(table[0]["memory"]["total"], replicas[0].memory.total());
  EXPECT_EQ(table[0]["layers"], (json{"dense", "dropout", "dense_1"}));
}

TEST(Placement, MemorySizesReadAsPeopleWriteThem) {
  EXPECT_EQ(parse_memory_size("1000", "x"), 1000);
  EXPECT_EQ(parse_memory_size("512M", "x"), 512LL << 20);
  EXPECT_EQ(parse_memory_size("1.5GiB", "x"), 3LL << 29);
  EXPECT_EQ(parse_memory_size("80G", "x"), 80LL << 30);
  EXPECT_EQ(parse_memory_size("12KB", "x"), 12LL << 10);
  EXPECT_EQ(parse_memory_size("2t", "x"), 2LL << 40);
  for (const char* bad : {"", "abc", "12X", "-5G", "0", "1e30G", "1.5", "nanG", "G", "5 G", "0x10"})
    try {
      parse_memory_size(bad, "TANDEM_CUDA_MEMORY_LIMIT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "TANDEM_CUDA_MEMORY_LIMIT");
      EXPECT_NE(std::string(e.what()).find("got '" + std::string(bad) + "'"), std::string::npos);
    }
}

TEST(Placement, AGpuTooSmallForItsShareIsRefusedWithTheNumbers) {
  const auto model = Model::from_config(model_config(), "model", 1);
  DevicePlan gpus{{{DeviceKind::cuda, 0}, {DeviceKind::cuda, 1}}, "cuda:0,1"};
  const auto placed = place_on_devices(*model, gpus, two_stages(*model, 1), 1000, 2, kBytesPerRow);
  DeviceReport report;
  report.gpus = {{0, "NVIDIA H100 80GB HBM3", 80LL << 30, 9, 0, 132, "", {}},
                 {1, "NVIDIA H100 80GB HBM3", 80LL << 30, 9, 0, 132, "", {}}};
  EXPECT_NO_THROW(check_placement_fits(placed, report, std::nullopt));
  try {
    check_placement_fits(placed, report, 4096);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), "devices");
    EXPECT_NE(what.find("cuda:0 (replica 0, stage 0) needs an estimated"), std::string::npos)
        << what;
    EXPECT_NE(what.find("activations 0.0 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("(TANDEM_CUDA_MEMORY_LIMIT)"), std::string::npos) << what;
  }
  report.gpus[1].memory_bytes = 1024;  // a tiny GPU: its own size, smaller than the limit
  try {
    check_placement_fits(placed, report, 1LL << 30);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1 (replica 0, stage 1)"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(NVIDIA H100 80GB HBM3)"), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem
