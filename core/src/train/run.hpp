// Whole-run entry points behind the `tandem` commands: build everything a run config describes,
// then train, evaluate or predict. The CLI stays a thin argument parser over these.
//
// run_training owns the run folder: <run_dir>/config.json (the resolved config),
// <run_dir>/events.jsonl (the event stream) and <run_dir>/model.h5 (the final or interrupted
// checkpoint, resumable with `--resume`). A config or data error is raised before anything is
// created on disk.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/world.hpp"
#include "tandem/callback.hpp"
#include "tandem/logs.hpp"
#include "tandem/model.hpp"
#include "tandem/tensor.hpp"
#include "train/run_config.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct TrainRequest {
  RunConfig config;
  std::optional<std::filesystem::path> run_dir;  // default: runs/<name>-<UTC time>
  bool events_to_stdout = false;
  /// The events plugin's device_stats_seconds (`--device-stats`), for the standard events plugin
  /// and one the config lists; unset: the plugin's option or default (10 s).
  std::optional<double> device_stats_seconds;
  std::optional<std::filesystem::path> resume;       // a checkpoint with training state
  std::optional<std::filesystem::path> weights;      // initial weights only
  /// A run folder that holds another run (its events.jsonl, model.h5 or config.json) is refused
  /// unless the run resumes it or this is set: then its stream starts afresh and its files are
  /// replaced.
  bool overwrite = false;
  const std::atomic<bool>* interrupt = nullptr;      // raised by SIGINT/SIGTERM handlers
  std::vector<std::shared_ptr<Callback>> callbacks;  // in-process callbacks (tests, embedding)
  /// The processes of the run (an MPI job: process_world()); null: this process alone.
  std::shared_ptr<World> world;
};

struct TrainResult {
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint;  // <run_dir>/model.h5
  std::vector<Logs> history;
  bool interrupted = false;
  std::string stop_reason;
};

/// The run folder a checkpoint belongs to: the folder holding it, or that folder's parent when
/// the parent is a run's folder (its config.json) and the folder is not (run/checkpoints/x.h5).
/// A resumed run continues there unless given another folder.
std::filesystem::path run_folder_of_checkpoint(const std::filesystem::path& checkpoint);

/// The length of a run as its callbacks are told it (CallbackSetup::epochs, steps_per_epoch);
/// zeros when not known.
struct RunLength {
  int epochs = 0;
  std::int64_t steps_per_epoch = 0;
};

/// Everything run_training checks before it creates the run folder (model, device plan, datasets,
/// plugins and their options), without training. Throws the error a run would; returns a summary:
/// name, parameters, devices, batch_size, precision, placement (parallel/placement.hpp),
/// train_samples, validation_samples, plugins.
/// `plugins` checks the callbacks: check_plugins, or a checker that runs it in another process.
using PluginChecker =
    std::function<nlohmann::json(const std::vector<CallbackConfig>&,
                                 const std::vector<std::filesystem::path>&, const RunLength&)>;
nlohmann::json check_run_config(const RunConfig& config, const PluginChecker& plugins);

/// The run's model with its initial weights, built for the training data's lengths where the
/// config leaves an input's length null (nn/input_lengths.hpp; the data is opened only then).
/// Throws the config's errors as check_run_config does.
std::unique_ptr<Model> build_run_model(const RunConfig& config);
/// The shapes of the config's training samples, per input, for Model::from_config: opens the
/// training data when called (`config` is copied into it).
Model::DataInputShapes training_input_shapes(const RunConfig& config);

/// The devices of the config's plan and what each holds (parallel/placement.hpp): a heading
/// ("Placement on cpu:2: 1 replica of 2 stages, 4 micro-batches (1f1b), global batch 2048") and
/// the table. Throws the config's errors as check_run_config does.
std::string placement_summary(const RunConfig& config);

/// Loads the plugin of each callback (searching `plugin_paths` first, built-in names from the
/// built-in folders) and checks its options by making its callback, in this process: plugin code
/// runs here. Throws the error a run would; returns the plugins part of check_run_config's summary.
nlohmann::json check_plugins(const std::vector<CallbackConfig>& callbacks,
                             const std::vector<std::filesystem::path>& plugin_paths,
                             const RunLength& length = {});

/// Trains as the config says. On failure emits run_failed and rethrows.
TrainResult run_training(const TrainRequest& request);

/// Which data evaluate/predict read: "validation" (the default: data.validation, else the
/// validation split, else data.test), "test" or "train".
struct InferenceRequest {
  RunConfig config;
  std::filesystem::path weights;
  std::string split = "validation";
};

Logs run_evaluation(const InferenceRequest& request);
/// A dataset's predictions: `values` is (samples, outputs...) in dataset order; `files` holds
/// the file each row was read from (Dataset::sample_file), or is empty when the samples are
/// not files of their own.
struct Predictions {
  Tensor values;
  std::vector<std::string> files;
};
Predictions run_prediction(const InferenceRequest& request);

/// `tandem data bench`: which one bounds a run, the input pipeline or the training step. The
/// pipeline is timed alone (the training DataLoader as a run makes it — shuffle, prefetch,
/// mixing — its batches taken and dropped), then the step alone (the model trained on one
/// batch of the data held in memory, the first step not timed), each for about `seconds`.
struct DataBenchResult {
  std::string dataset;
  std::int64_t batch_size = 0;
  std::int64_t pipeline_samples = 0;
  double pipeline_seconds = 0;
  std::int64_t steps = 0;
  double step_seconds = 0;
  double pipeline_rate() const { return pipeline_seconds > 0 ? pipeline_samples / pipeline_seconds : 0; }
  double step_rate() const { return step_seconds > 0 ? steps * batch_size / step_seconds : 0; }
};
DataBenchResult run_data_bench(const RunConfig& config, double seconds);

/// What a checkpoint says of its run: whether it holds a training state, and the run config
/// run_training stored in it, if any.
struct StoredRun {
  bool has_training_state = false;
  std::optional<nlohmann::json> config;
};
StoredRun run_config_of_checkpoint(const std::filesystem::path& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
