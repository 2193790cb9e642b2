// The device registry: what this machine can train on, and how busy it is.
//
// discover_devices() reads static facts: the CPU from /proc, CUDA GPUs from the CUDA runtime
// (when Tandem is built with CUDA; the runtime loads the driver lazily, so a machine without a
// driver or GPU gets an explanation, never a crash). sample_devices() adds live readings: CPU
// utilisation from /proc/stat, GPU utilisation, memory, temperature and power from NVML, loaded
// with dlopen("libnvidia-ml.so.1") at run time. Both are thread-safe.
//
// Ownership: reports and samples are plain values owned by the caller; nothing is cached across
// calls except the loaded libraries, which stay loaded for the process's lifetime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"

namespace tandem {

struct TANDEM_EXPORT CpuInfo {
  std::string model_name;         // "AMD EPYC"
  int logical_cores = 0;          // usable by this process (sched_getaffinity)
  std::int64_t memory_bytes = 0;  // MemTotal
  /// The run precisions Tandem computes in here (docs/config.md): "fp32", and "bf16" when
  /// the CPU has AVX-512 BF16.
  std::vector<std::string> precisions;
  /// With "bf16": the FLOP rate of its bfloat16 products over its float32 ones, timed on one core
  /// (2 where bf16 pays; 0.49 on an Intel Xeon without AMX, where bf16 trains slower than fp32);
  /// nullopt otherwise, or where oneDNN multiplies bfloat16 on AMX tiles (not timed).
  std::optional<double> bf16_product_rate;
};

struct TANDEM_EXPORT GpuInfo {
  int index = 0;  // CUDA device ordinal: "cuda:<index>"
  std::string name;
  std::int64_t memory_bytes = 0;
  int compute_capability_major = 0, compute_capability_minor = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;  // "0000:3b:00.0"
  /// The run precisions Tandem computes in here: "fp32", and "tf32" from compute capability 8.0.
  std::vector<std::string> precisions;
};

struct TANDEM_EXPORT DeviceReport {
  CpuInfo cpu;
  std::vector<GpuInfo> gpus;
  bool cuda_built = false;       // the CUDA module is built and loaded (GPUs can be used)
  int cuda_runtime_version = 0;  // e.g. 13000
  int cuda_driver_version = 0;   // 0 when there is no driver
  /// Empty when GPUs were found; else one plain sentence saying why there are none, e.g.
  /// "no CUDA GPU: CUDA driver version is insufficient for CUDA runtime version (error 35)".
  std::string gpu_status;
};

struct TANDEM_EXPORT GpuSample {
  int index = 0;
  std::optional<double> utilization_percent;
  std::optional<std::int64_t> memory_used_bytes;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
};

struct TANDEM_EXPORT DeviceSample {
  std::string time;                               // UTC ISO 8601
  std::optional<double> cpu_utilization_percent;  // since the previous sample (null on the first)
  std::int64_t memory_available_bytes = 0;        // MemAvailable
  std::vector<GpuSample> gpus;
  std::string nvml_status;  // empty when NVML answered; else why not
};

TANDEM_EXPORT DeviceReport discover_devices();
/// Live readings. CPU utilisation is measured against the previous call in this process.
TANDEM_EXPORT DeviceSample sample_devices(const DeviceReport& report);

TANDEM_EXPORT nlohmann::json to_json(const DeviceReport& report,
                                     const DeviceSample* sample = nullptr);
/// A human table: one row per device ("cpu", "cuda:0", ...), then the GPU status line if any.
TANDEM_EXPORT std::string to_table(const DeviceReport& report,
                                   const DeviceSample* sample = nullptr);

}  // namespace tandem
