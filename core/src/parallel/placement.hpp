// Placement: what each device of a plan holds for a model — its replica and pipeline stage, its
// layers, and the memory they take (weights, gradients, optimizer slots, activations), estimated
// before training from the model's shapes (docs/pipeline.md "Memory"). `tandem summary
// --devices`, `tandem check` and the run_started event show it.
//
// Activations count, for every micro-batch the device's schedule keeps in flight (GPipe: all M;
// 1F1B: min(M, S - s) on stage s), what its calls' layers hold for a micro-batch's rows: their
// outputs, what they keep for the backward pass and the gradients they hand back, per row as
// the call probe measured it (parallel/call_probe.hpp). Plain data; pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/pipeline_layout.hpp"
#include "tandem/device_plan.hpp"
#include "tandem/devices.hpp"
#include "tandem/model.hpp"
#include "util/internal_api.hpp"
#include "util/memory_size.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct MemoryUse {
  std::int64_t weights = 0, gradients = 0, optimizer = 0, activations = 0;  // bytes
  std::int64_t total() const { return weights + gradients + optimizer + activations; }
};

struct DevicePlacement {
  DeviceSpec device;
  int replica = 0;
  int stage = 0;  // 0 without a pipeline
  std::vector<std::string> layers;
  std::int64_t parameters = 0;
  MemoryUse memory;
};

/// The placement of `model` on `plan` (one replica per device, or `pipeline`'s stages), for a
/// global batch of `batch` samples split over the replicas, with `optimizer_slots` slots per
/// parameter (Optimizer::slot_names().size()) and `call_bytes_per_row` bytes of activations per
/// row for each call (measure_call_bytes_per_row; one per call of `model`).
std::vector<DevicePlacement> place_on_devices(const Model& model, const DevicePlan& plan,
                                              const std::optional<PipelinePlan>& pipeline,
                                              std::int64_t batch, int optimizer_slots,
                                              const std::vector<std::int64_t>& call_bytes_per_row);

/// Throws ConfigError at "devices" when a CUDA device of `placement` needs more memory than it
/// holds — its memory_bytes in `report`, or `limit` (TANDEM_CUDA_MEMORY_LIMIT) when that is
/// smaller — naming the device, its replica and stage, the estimate's parts and the way out.
void check_placement_fits(const std::vector<DevicePlacement>& placement,
                          const DeviceReport& report, std::optional<std::int64_t> limit);

/// [{"device": "cpu:1", "replica": 0, "stage": 1, "layers": [...], "parameters": n,
///   "memory": {"weights": bytes, "gradients": ..., "optimizer": ..., "activations": ...,
///   "total": ...}}, ...]
nlohmann::json placement_json(const std::vector<DevicePlacement>& placement);
/// A table, one row per device: device, replica, stage, layers, parameters, memory (MiB).
std::string placement_table(const std::vector<DevicePlacement>& placement);

}  // namespace tandem

TANDEM_INTERNAL_API_END
