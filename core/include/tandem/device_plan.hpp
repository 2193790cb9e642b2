// DevicePlan: which devices the replicas of a run live on (docs/design.md contract 1).
//
// Text forms: "auto" (every GPU, else the CPU), "cpu" (= "cpu:1"), "cpu:N" (N CPU replicas
// sharing the cores fairly), "cuda:0,2", "cuda:all". Plain data: copyable, owned by whoever holds
// it, safe to read from any thread while nobody writes it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/devices.hpp"
#include "tandem/export.hpp"

namespace tandem {

enum class DeviceKind { cpu, cuda };

struct TANDEM_EXPORT DeviceSpec {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;             // CUDA ordinal; for CPU replicas their number 0..N-1
  std::string name() const;  // "cpu", "cuda:1"
  bool operator==(const DeviceSpec&) const = default;
};

struct TANDEM_EXPORT DevicePlan {
  std::vector<DeviceSpec> replicas;  // one entry per replica, in replica order
  std::string text;                  // normalised: "cpu:3", "cuda:0,2"
  /// "cpu:N": N CPU replicas (no check against the machine; N >= 1).
  static DevicePlan cpus(int n);
  int size() const { return static_cast<int>(replicas.size()); }
  bool all_cpu() const;
  nlohmann::json to_json() const;
  bool operator==(const DevicePlan& other) const { return replicas == other.replicas; }
};

/// Parses and checks a plan against what exists. `path` names where the text came from
/// ("devices" or "--devices") for the error, which lists the devices this machine has.
/// `cuda_trainable` says whether this build can train on CUDA devices; "auto" uses GPUs only then.
TANDEM_EXPORT DevicePlan parse_device_plan(const std::string& text, const DeviceReport& report,
                                           const std::string& path, bool cuda_trainable);
/// What a plan is checked against: the machine's devices, and whether this build trains on CUDA.
struct TANDEM_EXPORT PlanDevices {
  DeviceReport report;
  bool cuda_trainable = false;
};
/// The same, looking at the machine only where the text needs it: a plan of CPU replicas
/// ("cpu", "cpu:N") is taken without calling `discover` (finding GPUs loads the CUDA module and
/// the CUDA libraries, about 0.4 s a process), unless it is refused: the error then lists every
/// device. `discover` is called at most once, from the calling thread, before this returns.
TANDEM_EXPORT DevicePlan parse_device_plan(const std::string& text,
                                           const std::function<PlanDevices()>& discover,
                                           const std::string& path);

}  // namespace tandem
