// NVML loaded at run time: a missing library is explained, and readings are then null.
#include <gtest/gtest.h>

#include <thread>

#include "parallel/nvml.hpp"

namespace tandem::detail {
namespace TANDEM_TEST_FILE {

TEST(Nvml, AMissingLibraryIsExplainedInOneSentence) {
  std::string status = nvml_probe("libtandem-no-such-nvml.so.1");
  EXPECT_EQ(status.rfind("NVML not available: ", 0), 0u) << status;
  EXPECT_NE(status.find("libtandem-no-such-nvml.so.1"), std::string::npos) << status;
  EXPECT_NE(status.find("cannot open shared object file"), std::string::npos) << status;
  EXPECT_EQ(status.find('\n'), std::string::npos) << status;
}

TEST(Nvml, WithoutNvmlSamplesAreNullAndTheStatusSaysWhy) {
  if (nvml_status().empty()) GTEST_SKIP() << "NVML is available here";
  EXPECT_EQ(nvml_status().rfind("NVML not available: ", 0), 0u) << nvml_status();
  GpuInfo fake;
  fake.index = 3;
  fake.pci_bus_id = "0000:3b:00.0";
  std::vector<GpuSample> samples;
  std::string status = nvml_sample({fake}, samples);
  EXPECT_EQ(status, nvml_status());
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].index, 3);
  EXPECT_FALSE(samples[0].utilization_percent.has_value());
  EXPECT_FALSE(samples[0].memory_used_bytes.has_value());
  EXPECT_FALSE(samples[0].temperature_c.has_value());
  EXPECT_FALSE(samples[0].power_w.has_value());
}

TEST(Nvml, NoGpusGiveNoSamples) {
  std::vector<GpuSample> samples(2);
  std::string status = nvml_sample({}, samples);
  EXPECT_TRUE(samples.empty());
  EXPECT_EQ(status, nvml_status());
}

TEST(Nvml, ConcurrentSamplingIsSafe) {
  GpuInfo fake;
  fake.pci_bus_id = "0000:3b:00.0";
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&fake] {
      for (int i = 0; i < 50; ++i) {
        std::vector<GpuSample> samples;
        nvml_sample({fake}, samples);
        EXPECT_EQ(samples.size(), 1u);
      }
    });
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace tandem::detail
