#include "tandem/device_plan.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

DeviceReport machine(int gpus) {
  DeviceReport r;
  r.cpu.model_name = "Test CPU";
  r.cpu.logical_cores = 8;
  for (int i = 0; i < gpus; ++i) r.gpus.push_back({i, "Test GPU", 80LL << 30, 9, 0, 132, "", {"fp32", "tf32"}});
  if (gpus == 0) r.gpu_status = "no CUDA GPU: no driver";
  return r;
}

std::string error_of(const std::string& text, const DeviceReport& r, bool cuda = true) {
  try {
    parse_device_plan(text, r, "devices", cuda);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DevicePlan, CpuForms) {
  auto r = machine(0);
  EXPECT_EQ(parse_device_plan("cpu", r, "devices", true).text, "cpu:1");
  auto p = parse_device_plan("cpu:3", r, "devices", true);
  EXPECT_EQ(p.size(), 3);
  EXPECT_TRUE(p.all_cpu());
  EXPECT_EQ(p.to_json()["replicas"].size(), 3u);
  EXPECT_EQ(parse_device_plan("auto", r, "devices", true).text, "cpu:1");
}

TEST(DevicePlan, CudaForms) {
  auto r = machine(4);
  auto p = parse_device_plan("cuda:0,2", r, "devices", true);
  ASSERT_EQ(p.size(), 2);
  EXPECT_EQ(p.replicas[1], (DeviceSpec{DeviceKind::cuda, 2}));
  EXPECT_EQ(p.text, "cuda:0,2");
  EXPECT_EQ(parse_device_plan("cuda:all", r, "devices", true).size(), 4);
  EXPECT_EQ(parse_device_plan("auto", r, "devices", true).text, "cuda:0,1,2,3");
  // A build that cannot train on CUDA uses the CPU for auto, and refuses CUDA plans.
  EXPECT_EQ(parse_device_plan("auto", r, "devices", false).text, "cpu:1");
  EXPECT_NE(error_of("cuda:0", r, false).find("CPU only"), std::string::npos);
}

TEST(DevicePlan, BadPlansNameTheProblemAndListTheDevices) {
  auto none = machine(0);
  for (const char* bad : {"cuda:9", "cpu:0", "gpu:1", "", "cpu:x", "cuda:all", "cpu:-1"}) {
    const std::string msg = error_of(bad, none);
    EXPECT_NE(msg.find("'devices'"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("This machine has: cpu (8 cores)"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("no CUDA GPU: no driver"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_NE(error_of("cuda:9", none).find("no device cuda:9"), std::string::npos);
  EXPECT_NE(error_of("gpu:1", none).find("unknown device 'gpu:1'"), std::string::npos);
  EXPECT_NE(error_of("cpu:0", none).find("N >= 1"), std::string::npos);
  EXPECT_NE(error_of("", none).find("empty"), std::string::npos);
  EXPECT_NE(error_of("cpu:-1", none).find("'-1' is negative"), std::string::npos);
  EXPECT_NE(error_of("cpu:999999999999", none).find("is too large"), std::string::npos);
  EXPECT_NE(error_of("cpu:1,cpu:1", none).find("cpu:2, not cpu:1,cpu:1"), std::string::npos);
  auto two = machine(2);
  EXPECT_NE(error_of("cuda:0,0", two).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of("cuda:1,5", two).find("cuda:0 (Test GPU), cuda:1 (Test GPU)"),
            std::string::npos);
}

// The lazy form looks at the machine only when the text needs it: a CPU plan never finds the
// GPUs (which loads the CUDA module), a refused CPU plan does once for its error, and "auto" and
// CUDA plans do once each.
TEST(DevicePlan, OnlyPlansThatNeedTheGpusLookForThem) {
  int discovered = 0;
  const std::function<PlanDevices()> discover = [&] {
    ++discovered;
    return PlanDevices{machine(2), true};
  };
  const auto parse = [&](const std::string& text) {
    discovered = 0;
    return parse_device_plan(text, discover, "devices");
  };
  EXPECT_EQ(parse("cpu").text, "cpu:1");
  EXPECT_EQ(parse(" cpu:3 ").text, "cpu:3");
  EXPECT_EQ(discovered, 0);

  try {
    parse("cpu:0");
    ADD_FAILURE() << "cpu:0 was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1 (Test GPU)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(discovered, 1);

  EXPECT_EQ(parse("auto").text, "cuda:0,1");
  EXPECT_EQ(discovered, 1);
  EXPECT_EQ(parse("cuda:1").text, "cuda:1");
  EXPECT_EQ(discovered, 1);
}

}  // namespace
}  // namespace tandem
