// The device registry on this machine: CPU facts, the no-GPU explanation, JSON and table forms.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "backend/ops.hpp"
#include "tandem/devices.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::string proc_cpuinfo_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    std::string value = line.substr(line.find(':') + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    return value;
  }
  return {};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST(DeviceRegistry, CpuFactsArePlausible) {
  DeviceReport report = discover_devices();
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(report.cpu.logical_cores, CPU_COUNT(&set));
  EXPECT_GT(report.cpu.memory_bytes, 0);
  EXPECT_FALSE(report.cpu.model_name.empty());
  const std::string expected = proc_cpuinfo_model_name();
  if (!expected.empty()) {
    EXPECT_EQ(report.cpu.model_name, expected);
  }
}

TEST(DeviceRegistry, GpusOrAnExplanation) {
  DeviceReport report = discover_devices();
  if (report.gpus.empty()) {
    // This machine: no GPU (and no driver). The reason is one plain sentence.
    ASSERT_FALSE(report.gpu_status.empty());
    EXPECT_EQ(report.gpu_status.rfind("no CUDA GPU: ", 0), 0u) << report.gpu_status;
#ifdef TANDEM_HAVE_CUDA
    // The build tree's libtandem always finds the CUDA module built beside it.
    EXPECT_TRUE(report.cuda_built) << report.gpu_status;
#else
    EXPECT_FALSE(report.cuda_built);
#endif
    if (report.cuda_built) {
      EXPECT_GT(report.cuda_runtime_version, 0);
      EXPECT_TRUE(report.gpu_status.find("(error ") != std::string::npos ||
                  report.gpu_status.find("no device") != std::string::npos)
          << report.gpu_status;
    } else {
      EXPECT_NE(report.gpu_status.find("built without CUDA"), std::string::npos);
      EXPECT_EQ(report.cuda_runtime_version, 0);
      EXPECT_EQ(report.cuda_driver_version, 0);
    }
  } else {
    EXPECT_TRUE(report.gpu_status.empty()) << report.gpu_status;
    EXPECT_TRUE(report.cuda_built);
    for (std::size_t i = 0; i < report.gpus.size(); ++i) {
      const GpuInfo& g = report.gpus[i];
      EXPECT_EQ(g.index, static_cast<int>(i));
      EXPECT_FALSE(g.name.empty());
      EXPECT_GT(g.memory_bytes, 0);
      EXPECT_GT(g.compute_capability_major, 0);
      EXPECT_GT(g.multiprocessors, 0);
      EXPECT_EQ(g.precisions.front(), "fp32");
    }
  }
  // The CPU computes fp32 always, and bf16 exactly when its backend can.
  ASSERT_FALSE(report.cpu.precisions.empty());
  EXPECT_EQ(report.cpu.precisions.front(), "fp32");
  const bool bf16 = std::find(report.cpu.precisions.begin(), report.cpu.precisions.end(),
                              "bf16") != report.cpu.precisions.end();
  EXPECT_EQ(bf16, backend::cpu_precision_unavailable(Precision::bf16).empty());
  EXPECT_EQ(report.cpu.bf16_product_rate, backend::cpu_bf16_product_rate());
  if (!bf16) {
    EXPECT_FALSE(report.cpu.bf16_product_rate.has_value());
  }
}

TEST(DeviceRegistry, SampleMeasuresCpuAndMemory) {
  DeviceReport report = discover_devices();
  sample_devices(report);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  DeviceSample s = sample_devices(report);
  ASSERT_TRUE(s.cpu_utilization_percent.has_value());
  EXPECT_GE(*s.cpu_utilization_percent, 0.0);
  EXPECT_LE(*s.cpu_utilization_percent, 100.0);
  EXPECT_GT(s.memory_available_bytes, 0);
  EXPECT_LE(s.memory_available_bytes, report.cpu.memory_bytes);
  EXPECT_EQ(s.gpus.size(), report.gpus.size());
  ASSERT_GE(s.time.size(), 20u);
  EXPECT_EQ(s.time.back(), 'Z');
  EXPECT_EQ(s.time[10], 'T');
}

TEST(DeviceRegistry, SamplingIsThreadSafe) {
  DeviceReport report = discover_devices();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&report] {
      for (int i = 0; i < 20; ++i) {
        DeviceSample s = sample_devices(report);
        if (s.cpu_utilization_percent) {
          EXPECT_GE(*s.cpu_utilization_percent, 0.0);
          EXPECT_LE(*s.cpu_utilization_percent, 100.0);
        }
      }
    });
  for (auto& t : threads) t.join();
}

TEST(DeviceRegistry, JsonHasTheDocumentedKeysAndRoundTrips) {
  DeviceReport report = discover_devices();
  json plain = to_json(report);
  for (const char* key : {"cpu", "gpus", "cuda"}) EXPECT_TRUE(plain.contains(key)) << key;
  EXPECT_FALSE(plain.contains("sample"));
  EXPECT_EQ(plain["cpu"]["device"], "cpu");
  EXPECT_EQ(plain["cpu"]["model_name"], report.cpu.model_name);
  EXPECT_EQ(plain["cpu"]["logical_cores"], report.cpu.logical_cores);
  EXPECT_EQ(plain["cpu"]["memory_bytes"], report.cpu.memory_bytes);
  ASSERT_TRUE(plain["gpus"].is_array());
  EXPECT_EQ(plain["gpus"].size(), report.gpus.size());
  for (const char* key : {"built", "runtime_version", "driver_version", "status"})
    EXPECT_TRUE(plain["cuda"].contains(key)) << key;
  EXPECT_EQ(plain["cuda"]["built"], report.cuda_built);
  EXPECT_EQ(plain["cuda"]["status"], report.gpu_status);
  if (report.cuda_driver_version == 0) {
    EXPECT_TRUE(plain["cuda"]["driver_version"].is_null());
  }

  DeviceSample sample = sample_devices(report);
  json full = to_json(report, &sample);
  ASSERT_TRUE(full.contains("sample"));
  const json& s = full["sample"];
  for (const char* key : {"time", "cpu", "gpus", "nvml_status"})
    EXPECT_TRUE(s.contains(key)) << key;
  for (const char* key : {"utilization_percent", "memory_available_bytes", "memory_used_bytes"})
    EXPECT_TRUE(s["cpu"].contains(key)) << key;
  EXPECT_EQ(s["cpu"]["memory_available_bytes"], sample.memory_available_bytes);
  EXPECT_EQ(s["cpu"]["memory_used_bytes"], report.cpu.memory_bytes - sample.memory_available_bytes);
  EXPECT_EQ(s["gpus"].size(), report.gpus.size());
  for (const json& g : s["gpus"])
    for (const char* key : {"device", "index", "utilization_percent", "memory_used_bytes",
                            "temperature_c", "power_w"})
      EXPECT_TRUE(g.contains(key)) << key;

  EXPECT_EQ(json::parse(full.dump()), full);
  EXPECT_EQ(json::parse(plain.dump(2)), plain);
}

TEST(DeviceRegistry, JsonOfAFakeGpuUsesNullForUnknown) {
  DeviceReport report;
  report.cpu = {"Test CPU", 4, 8LL << 30, {"fp32", "bf16"}, std::nullopt};
  report.cuda_built = true;
  report.cuda_runtime_version = 13000;
  report.cuda_driver_version = 13000;
  GpuInfo g;
  g.index = 0;
  g.name = "Test GPU";
  g.memory_bytes = 80LL << 30;
  g.compute_capability_major = 9;
  g.multiprocessors = 132;
  g.pci_bus_id = "0000:3b:00.0";
  g.precisions = {"fp32", "tf32"};
  report.gpus.push_back(g);
  DeviceSample sample;
  sample.time = "2026-01-01T00:00:00.000Z";
  sample.memory_available_bytes = 6LL << 30;
  GpuSample gs;
  gs.utilization_percent = 50;
  gs.temperature_c = 40;
  sample.gpus.push_back(gs);
  json j = to_json(report, &sample);
  EXPECT_EQ(j["gpus"][0]["device"], "cuda:0");
  EXPECT_EQ(j["gpus"][0]["compute_capability"], "9.0");
  EXPECT_EQ(j["gpus"][0]["multiprocessors"], 132);
  EXPECT_EQ(j["gpus"][0]["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(j["gpus"][0]["precisions"], json({"fp32", "tf32"}));
  EXPECT_EQ(j["cpu"]["precisions"], json({"fp32", "bf16"}));
  EXPECT_TRUE(j["cpu"]["bf16_product_rate"].is_null());
  EXPECT_EQ(j["cuda"]["driver_version"], 13000);
  EXPECT_TRUE(j["sample"]["cpu"]["utilization_percent"].is_null());
  EXPECT_EQ(j["sample"]["cpu"]["memory_used_bytes"], 2LL << 30);
  EXPECT_EQ(j["sample"]["gpus"][0]["utilization_percent"], 50.0);
  EXPECT_TRUE(j["sample"]["gpus"][0]["memory_used_bytes"].is_null());
  EXPECT_TRUE(j["sample"]["gpus"][0]["power_w"].is_null());

  std::string table = to_table(report, &sample);
  auto lines = lines_of(table);
  ASSERT_EQ(lines.size(), 3u) << table;  // header, cpu, cuda:0; no status line with a GPU
  EXPECT_EQ(lines[2].rfind("cuda:0", 0), 0u);
  EXPECT_NE(lines[2].find("Test GPU"), std::string::npos);
  EXPECT_NE(lines[2].find("80.0 GiB"), std::string::npos);
  EXPECT_NE(lines[2].find("50%"), std::string::npos);
  EXPECT_NE(lines[1].find("fp32 bf16"), std::string::npos) << table;
  EXPECT_NE(lines[2].find("fp32 tf32"), std::string::npos) << table;
  EXPECT_NE(lines[2].find("40°C"), std::string::npos);
}

// A CPU whose bf16 products run at half its float32 rate says so in the JSON and the table; one
// where bf16 pays shows only the precisions.
TEST(DeviceRegistry, ShowsTheBf16RateWhereBf16IsSlower) {
  DeviceReport report;
  report.cpu = {"Test CPU", 2, 8LL << 30, {"fp32", "bf16"}, 0.49};
  EXPECT_EQ(to_json(report, nullptr)["cpu"]["bf16_product_rate"], 0.49);
  auto lines = lines_of(to_table(report, nullptr));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[1].find("fp32 bf16 (0.49x fp32)"), std::string::npos) << lines[1];
  report.cpu.bf16_product_rate = 2.01;
  lines = lines_of(to_table(report, nullptr));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[1].find("fp32 bf16"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("x fp32"), std::string::npos) << lines[1];
}

TEST(DeviceRegistry, TableHasACpuRowThenTheGpuStatus) {
  DeviceReport report = discover_devices();
  sample_devices(report);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  DeviceSample sample = sample_devices(report);
  const DeviceSample* const variants[] = {nullptr, &sample};
  for (const DeviceSample* s : variants) {
    std::string table = to_table(report, s);
    auto lines = lines_of(table);
    ASSERT_GE(lines.size(), 2u) << table;
    EXPECT_EQ(lines[0].rfind("device", 0), 0u) << table;
    for (const char* column :
         {"name", "memory", "compute capability", "SMs", "util", "mem used", "temp", "power"})
      EXPECT_NE(lines[0].find(column), std::string::npos) << column;
    EXPECT_EQ(lines[1].rfind("cpu ", 0), 0u) << table;
    EXPECT_NE(lines[1].find(report.cpu.model_name), std::string::npos) << table;
    EXPECT_EQ(lines.size(), 2u + report.gpus.size() + (report.gpus.empty() ? 1u : 0u) +
                                (s && !report.gpus.empty() && !s->nvml_status.empty() ? 1u : 0u))
        << table;
    if (report.gpus.empty()) {
      EXPECT_EQ(lines.back(), report.gpu_status);
    }
    // Columns line up: "name" starts where the CPU's name does.
    EXPECT_EQ(lines[0].find("name"), lines[1].find(report.cpu.model_name)) << table;
  }
}

}  // namespace
}  // namespace tandem
