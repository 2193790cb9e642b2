// Pipeline layout: how a run config's "pipeline" section cuts a model into stages (docs/pipeline.md).
//
// A stage is a set of layers that one device computes; a pipeline of S stages runs on S devices
// of the plan, and the plan's devices are R pipelines of S each (R replicas of the meta-model).
// Each replica's batch shard is cut into micro-batches that flow through the stages in the order
// the schedule gives (GPipe or 1F1B), their gradients summed before the replicas' sum.
//
// Stages are named ({"stages": [["conv1", "pool1"], ["dense", "logits"]]}: every layer once, in
// data-flow order) or counted ({"stages": 2}: contiguous runs of the model's calls, balanced by
// parameter count or by measured time). Plain data, copyable; the functions are pure apart from
// the measurement, which runs a copy of the model on the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/device_plan.hpp"
#include "tandem/model.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// GPipe: every micro-batch's forward, then every backward. 1F1B: after a warm-up of S - s - 1
/// forwards, stage s alternates one forward and one backward, so at most S micro-batches are in
/// flight (less activation memory); both sum the gradients in micro-batch order, to the bit alike.
enum class PipelineSchedule { gpipe, one_f_one_b };
/// How counted stages are balanced: by the layers' parameter counts, or by the forward and
/// backward time of each call measured on one micro-batch before training.
enum class PipelineBalance { parameters, time };

/// The "pipeline" section of a run config.
struct PipelineConfig {
  int stages = 1;                                      // 1: no pipeline
  std::vector<std::vector<std::string>> stage_layers;  // named stages; empty when counted
  PipelineBalance balance = PipelineBalance::parameters;
  int microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  /// Whether training differs from one replica per device (stages or micro-batches).
  bool active() const { return stages > 1 || microbatches > 1; }
};

std::string schedule_name(PipelineSchedule schedule);  // "gpipe", "1f1b"
std::string balance_name(PipelineBalance balance);     // "parameters", "time"

/// Reads a "pipeline" object; ConfigError naming the key under `path` for anything else.
PipelineConfig parse_pipeline_config(const nlohmann::json& value, const std::string& path);
/// Back to JSON, every key written: parse_pipeline_config(pipeline_config_json(c)) == c.
nlohmann::json pipeline_config_json(const PipelineConfig& config);

/// The stages of one model.
struct PipelineLayout {
  std::vector<std::vector<std::size_t>> calls;   // per stage, its calls (ascending)
  std::vector<std::vector<std::size_t>> layers;  // per stage, its layers (ascending)
  std::vector<std::int64_t> parameters;          // per stage, its layers' parameter count
  int stage_count() const { return static_cast<int>(calls.size()); }
  /// One stage holding every call of `model` (no pipeline).
  static PipelineLayout whole(const Model& model);
};

/// A resolved pipeline: the template's stages and how micro-batches flow through them.
struct PipelinePlan {
  PipelineLayout layout;
  int microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int stage_count() const { return layout.stage_count(); }
};

/// Cuts `model` as `config` says. `call_seconds` (one per call) balances counted stages by time
/// (PipelineBalance::time); empty: by parameters. Throws ConfigError at "pipeline.stages..." for
/// an unknown layer, a layer named twice or not at all, an empty stage, a stage that reads a
/// later one, or more counted stages than places to cut (never between a shared layer's calls).
PipelineLayout cut_into_stages(const Model& model, const PipelineConfig& config,
                               const std::vector<double>& call_seconds = {});

/// Per stage boundary s (stage s to s + 1), the calls of stage s whose outputs stage s + 1
/// reads, ascending: what stages on separate devices copy from the one to the other.
std::vector<std::vector<std::size_t>> stage_hand_offs(const Model& model,
                                                      const PipelineLayout& layout);

/// Stages on separate devices (GPUs) hand tensors only from one stage to the next, and sum a
/// tensor's gradient on one device: throws ConfigError at "pipeline.stages" naming the layer
/// when a call reads a model input outside stage 0 or a call two or more stages back, when a
/// model output comes from a stage before the last, or when a tensor is read by two or more
/// calls of the next stage and by its own stage too. `plan`: the device plan's text.
void require_device_hand_offs(const Model& model, const PipelineLayout& layout,
                              const std::string& plan);

/// The replicas of a plan whose devices are pipelines of `stages` each. Throws ConfigError at
/// "pipeline.stages" when the plan's device count is not a multiple of `stages`.
int pipeline_replicas(const DevicePlan& plan, int stages);

}  // namespace tandem

TANDEM_INTERNAL_API_END
