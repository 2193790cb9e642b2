// RunConfig: the run file (`tandem train run.json`), validated, with every default filled in.
//
// The file is JSON with top-level keys: name, seed, epochs, batch_size, verbose, devices, model
// (a Keras Sequential or functional config), pipeline, optimizer, loss, metrics, weighted_metrics,
// class_weight, data, callbacks, plugin_paths.
// docs/config.md lists them. Every error is a ConfigError naming the JSON path. Plain data;
// copyable.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/batch_mixing.hpp"
#include "parallel/pipeline_layout.hpp"
#include "tandem/model_view.hpp"
#include "util/internal_api.hpp"
#include "util/precision.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct DataConfig {
  nlohmann::json train;           // dataset spec (see dataset.hpp)
  nlohmann::json validation;      // null when absent
  nlohmann::json test;            // null when absent
  double validation_split = 0.0;  // Keras: the last fraction of train, before shuffling
  bool shuffle = true;
  int prefetch = 2;
  MixOptions mix{};  // "mixup" or "cutmix": {"alpha": ..., "probability": ...}
};

/// One entry of "callbacks": {"plugin": ..., "target": "template"|"meta", "ranks": "zero"|"all",
/// "options": {...}}. Options are checked against the plugin's schema when it is loaded.
struct CallbackConfig {
  std::string plugin;  // a name ("checkpoint") or a path to a .so
  Target target = Target::template_model;
  bool all_ranks = false;  // "ranks": "all" (default "zero": rank 0 only)
  nlohmann::json options = nlohmann::json::object();
  std::string path;  // "callbacks[2]"
};

struct RunConfig {
  std::string name = "run";
  std::uint64_t seed = 0;
  int epochs = 1;
  std::int64_t batch_size = 32;  // the global batch (see global_batch_size())
  /// When given instead of batch_size: the global batch is this times the number of replicas.
  std::int64_t batch_size_per_replica = 0;
  int verbose = 1;
  std::string devices = "cpu";            // a device plan text, checked by parse_device_plan
  std::string devices_path = "devices";   // where errors in it point: the key, or "--devices"
  Precision precision = Precision::fp32;  // "precision" (util/precision.hpp)
  bool precision_given = false;           // the config set "precision" (nn/dtype_policy.hpp)
  PipelineConfig pipeline;  // "pipeline" (parallel/pipeline_layout.hpp): stages, micro-batches
  /// batch_size, or batch_size_per_replica × replicas (a pipeline of stages is one replica).
  std::int64_t global_batch_size(int replicas) const {
    return batch_size_per_replica > 0 ? batch_size_per_replica * replicas : batch_size;
  }
  nlohmann::json model;
  nlohmann::json optimizer;
  std::int64_t steps_per_epoch = 0;  // 0: every batch of the data
  nlohmann::json loss;          // one loss, or per output: a list or an object by output name
  nlohmann::json loss_weights;  // null, or per output: a list or an object by output name
  nlohmann::json metrics;       // a list, or per output: a list of lists or an object
  nlohmann::json weighted_metrics;  // null, or as metrics: weighted by the samples' weights
  /// Keras' fit(class_weight=...): a training sample's weight by its class (absent classes: 1).
  std::map<std::int64_t, double> class_weight;
  DataConfig data;
  std::vector<CallbackConfig> callbacks;
  std::vector<std::filesystem::path> plugin_paths;  // searched before the standard places
  /// Folder that relative data paths resolve against (the config file's folder).
  std::filesystem::path base_dir;
  /// The whole document after overrides and defaults, as written to <run_dir>/config.json.
  nlohmann::json resolved;
};

/// Reads a JSON file; a syntax error is a ConfigError giving the line and column.
nlohmann::json load_json_file(const std::filesystem::path& path);

/// Applies "key.path=value" (value parsed as JSON when it is valid JSON, else taken as a string;
/// list items by index: "model.config.layers[1].config.units=64"). Missing objects are created.
void apply_override(nlohmann::json& config, const std::string& assignment);

/// Validates and fills in defaults. `base_dir` resolves relative data paths.
RunConfig parse_run_config(const nlohmann::json& config, const std::filesystem::path& base_dir);

/// The "callbacks" list of a run config, checked (paths "callbacks[i]..."), and back to JSON
/// (every key written, defaults included): parse_callbacks(callbacks_json(x)) == x.
std::vector<CallbackConfig> parse_callbacks(const nlohmann::json& callbacks);
nlohmann::json callbacks_json(const std::vector<CallbackConfig>& callbacks);

}  // namespace tandem

TANDEM_INTERNAL_API_END
