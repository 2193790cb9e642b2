#include "train/run.hpp"

#include <spdlog/spdlog.h>

#include <sched.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <thread>

#include "backend/cpu/parallel.hpp"
#include "data/data_loader.hpp"
#include "data/dataset.hpp"
#include "data/datasets.hpp"
#include "data/wrapped_dataset.hpp"
#include "io/indexed_checkpoints.hpp"
#include "io/run_folder_lock.hpp"
#include "nn/dtype_policy.hpp"
#include "nn/loss.hpp"
#include "parallel/call_probe.hpp"
#include "parallel/cuda_module.hpp"
#include "parallel/pinned_memory.hpp"
#include "parallel/placement.hpp"
#include "parallel/replica_model.hpp"
#include "plugin/plugin_host.hpp"
#include "tandem/atomic_file.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/device_plan.hpp"
#include "tandem/devices.hpp"
#include "tandem/error.hpp"
#include "tandem/event_sink.hpp"
#include "train/adapt_normalization.hpp"
#include "train/rank_agreement.hpp"
#include "train/trainer.hpp"
#include "util/environment_settings.hpp"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif

namespace tandem {

using nlohmann::json;

namespace {

// Keras' adapt() for a fresh run's adapted Normalization layers (every rank computes the same
// figures from the whole training set; rank 0 says what was done).
void adapt_to_training_data(Model& model, const Dataset& train, bool writer) {
  for (const AdaptNote& note : adapt_normalizations(model, train)) {
    if (!writer) continue;
    if (note.adapted)
      spdlog::info("{}", note.text);
    else
      spdlog::warn("{}", note.text);
  }
}

// --weights: the file's weights into `model`, saying so when they were not paired by name (a
// template nested in a Keras multi_gpu_model file, layers paired by order; a warning: predict
// and -q show no info).
void load_weights_file(Model& model, const std::filesystem::path& file) {
  const std::string how =
      model.load_weights(read_checkpoint_file(file, model.count_params()), file.string());
  if (!how.empty()) spdlog::warn("{}: {}", file.string(), how);
}

struct Built {
  std::unique_ptr<Model> model;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<Optimizer> optimizer;
  Precision precision = Precision::fp32;  // the run's, with the layers' dtype policies
};

// `data_shapes`: the shapes of the data the model is built for, asked for only when an input
// leaves a length to the data (nn/input_lengths.hpp).
Built build_model(const RunConfig& rc, const Model::DataInputShapes& data_shapes) {
  Built b;
  b.model = Model::from_config(rc.model, "model", rc.seed, data_shapes);
  b.precision = nn::effective_precision(*b.model, rc.precision, rc.precision_given);
  b.objective = std::make_unique<Objective>(
      make_objective(rc.loss, rc.loss_weights, rc.metrics, *b.model, rc.weighted_metrics));
  if (rc.pipeline.active()) b.objective->require_whole_batches("pipeline");
  b.optimizer = make_optimizer(rc.optimizer, "optimizer");
  // Keras' compile under mixed_float16: float16 gradients need a dynamic loss scale.
  if (b.precision == Precision::fp16 && !b.optimizer->loss_scale()) {
    b.optimizer->set_loss_scale(LossScaleConfig{});
    spdlog::debug(
        "precision fp16: the optimizer is wrapped in a LossScaleOptimizer (dynamic, "
        "initial scale 32768, doubled after 2000 good steps), as Keras does");
  }
  return b;
}

// Labels are class indices: data whose classes are named (image folders, CSV categories) must
// name the training data's classes in the same order, else a label would mean another class
// (a validation folder without one of the training classes' sub-folders shifted the others).
void require_the_training_classes(const std::shared_ptr<Dataset>& train,
                                  const std::shared_ptr<Dataset>& other, const std::string& where) {
  if (!train || !other) return;
  const std::vector<std::string> mine = other->class_names(), theirs = train->class_names();
  if (mine.empty() || theirs.empty() || mine == theirs) return;
  const auto text = [](const std::vector<std::string>& names) {
    std::string t;
    for (const std::string& n : names) t += (t.empty() ? "" : ", ") + n;
    return "[" + t + "]";
  };
  throw ConfigError(where, "its classes " + text(mine) + " are not the training data's " +
                               text(theirs) +
                               ": a label would mean another class; give both "
                               "the same classes (an empty sub-folder for a class it lacks, or "
                               "class_names)");
}

struct Datasets {
  std::shared_ptr<Dataset> train, validation, test;
};

Datasets open_datasets(const RunConfig& rc, bool need_train) {
  Datasets d;
  const std::string base = rc.base_dir.string();
  if (need_train || rc.data.validation_split > 0)
    d.train = make_dataset(rc.data.train, "data.train", base);
  if (!rc.data.validation.is_null())
    d.validation = make_dataset(rc.data.validation, "data.validation", base);
  if (!rc.data.test.is_null()) d.test = make_dataset(rc.data.test, "data.test", base);
  require_the_training_classes(d.train, d.validation, "data.validation");
  require_the_training_classes(d.train, d.test, "data.test");
  if (rc.data.validation_split > 0) {
    // Keras: the validation samples are the last fraction, taken before any shuffling.
    const std::int64_t n = d.train->size();
    const auto split_at = static_cast<std::int64_t>(
        std::floor(static_cast<double>(n) * (1.0 - rc.data.validation_split)));
    if (split_at <= 0 || split_at >= n)
      throw ConfigError("data.validation_split", "leaves no samples for training or validation (" +
                                                     std::to_string(n) + " samples)");
    std::shared_ptr<const Dataset> parent = d.train;
    d.validation = make_subset(parent, split_at, n - split_at);
    d.train = make_subset(parent, 0, split_at);
  }
  return d;
}

// A run's datasets, opened when first asked for: before the model is built when an input takes
// its lengths from the data, else after (a bad model is then reported before a bad data path).
// `split` picks the data the model is built for (InferenceRequest::split; "train" in training).
class LazyDatasets {
 public:
  LazyDatasets(const RunConfig& rc, bool need_train, std::string split = "train")
      : rc_(rc), need_train_(need_train), split_(std::move(split)) {}
  Datasets& get() {
    if (!datasets_) datasets_ = open_datasets(rc_, need_train_);
    return *datasets_;
  }
  /// The shapes of the split's samples, per input, for Model::from_config (borrows this).
  Model::DataInputShapes input_shapes();

 private:
  const RunConfig& rc_;
  bool need_train_;
  std::string split_;
  std::optional<Datasets> datasets_;
};

// The data of `split` ("train", "validation" — the test data when there is none — or "test").
std::shared_ptr<Dataset> pick_split(const std::string& split, const Datasets& d) {
  if (split == "train") return d.train;
  if (split == "test") {
    if (!d.test) throw ConfigError("data.test", "the config has no test data");
    return d.test;
  }
  if (split == "validation") {
    if (d.validation) return d.validation;
    if (d.test) return d.test;
    throw ConfigError("data.validation",
                      "the config has no validation or test data; use --split train");
  }
  throw ConfigError("--split", "expected validation, test or train, got '" + split + "'");
}

Model::DataInputShapes LazyDatasets::input_shapes() {
  return [this](const std::vector<Shape>&) { return pick_split(split_, get())->x_parts(); };
}

// The datasets of a training run: class_weight, as Keras' fit applies it, weighs the training
// samples only (validation and evaluation data keep their own sample weights, if any).
Datasets open_training_datasets(LazyDatasets& lazy, const RunConfig& rc, const Model& model) {
  Datasets d = lazy.get();
  if (rc.class_weight.empty()) return d;
  if (model.output_count() > 1)
    throw ConfigError("class_weight", "is for a model with one output (as in Keras), but model '" +
                                          model.name() + "' has " +
                                          std::to_string(model.output_count()) +
                                          "; give the data a sample_weight instead");
  // Keras refuses class_weight for targets of a class per position (3+ dimensional), or takes
  // the argmax of a sequence's labels as its class.
  if (const std::int64_t positions = positions_of(model.output_shape(0)); positions > 1)
    throw ConfigError("class_weight", "weighs a sample by its one class, but model '" +
                                          model.name() + "' has a class at each of " +
                                          std::to_string(positions) + " positions (output " +
                                          shape_to_string(model.output_shape(0), true) +
                                          "); give the data a sample_weight instead");
  // A class the model cannot output would weigh nothing: a typo, said so.
  const std::int64_t classes = std::max<std::int64_t>(2, shape_size(model.output_shape(0)));
  for (const auto& [cls, weight] : rc.class_weight)
    if (cls >= classes)
      throw ConfigError("class_weight", "class " + std::to_string(cls) +
                                            " is not a class of model '" + model.name() +
                                            "', which has " + std::to_string(classes) + " (0 to " +
                                            std::to_string(classes - 1) + ")");
  d.train = make_class_weighted(d.train, rc.class_weight, "class_weight");
  return d;
}

// Whether `dir` is the run folder `checkpoint` belongs to: the folder of its own model.h5, or a
// run's folder (its config.json) that holds the checkpoint directly or one folder down
// (run/checkpoints/x.h5, the checkpoint plugin's).
bool is_run_folder_of(const std::filesystem::path& dir, const std::filesystem::path& checkpoint) {
  const auto normal = [](const std::filesystem::path& p) {
    return std::filesystem::absolute(p).lexically_normal();
  };
  const std::filesystem::path folder = normal(dir), file = normal(checkpoint);
  if (normal(run_folder_of_checkpoint(file)) != folder) return false;
  return file == folder / "model.h5" || std::filesystem::exists(folder / "config.json");
}

// With --overwrite (or when it never trained), what the run `dir` holds is removed before the new
// one starts, `why` saying which in the log and errors: its stream
// (the new one must not continue it), model.h5 and config.json, the checkpoints its indexes list
// and the indexes (a stale checkpoints.json listed the old run's epochs as the new one's, and
// --resume of the folder took the old model.h5). Other files are the user's and stay.
void remove_old_run(const std::filesystem::path& dir, const std::string& why) {
  std::vector<std::filesystem::path> files;
  for (const IndexedCheckpoint& c : indexed_checkpoints(dir)) {
    files.push_back(c.file);
    files.push_back(c.index);  // once removed, later entries of the same index find it gone
  }
  for (const char* own : {"events.jsonl", "model.h5", "config.json"}) files.push_back(dir / own);
  int removed = 0;
  for (const auto& file : files) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) continue;
    std::filesystem::remove(file, ec);
    if (ec)
      throw RunError(why + ": cannot remove " + file.string() + " of the old run: " + ec.message());
    ++removed;
  }
  spdlog::info("{}: removed the {} files of the run {} held", why, removed, dir.string());
}

// Whether the run `dir` holds left something to resume: its model.h5 or a checkpoint its
// indexes list.
bool holds_a_checkpoint(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "model.h5") || !indexed_checkpoints(dir).empty();
}

// Whether the event stream of the run `dir` holds (if any) records a batch. With no checkpoint
// either, that run never took a step — refused as it began (a callback's check at
// on_train_begin, say) or killed before its first batch — and its record holds nothing a new run
// could lose. A torn last line (an append the kill cut short) is skipped, as every reader of the
// stream skips it; a line that is not an event anywhere else makes it a stream Tandem did not
// write, counted as one that trained (left alone).
bool stream_records_a_batch(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "events.jsonl")) return false;
  std::ifstream in(dir / "events.jsonl");
  std::string line;
  bool torn = false;
  while (in && std::getline(in, line)) {
    if (torn) return true;  // the unreadable line was not the last
    const json event = json::parse(line, nullptr, false);
    if (!event.is_object()) {
      torn = true;
      continue;
    }
    const json* name = event.contains("event") ? &event["event"] : nullptr;
    if (name && (*name == "batch_ended" || *name == "epoch_ended")) return true;
  }
  return in.bad();
}

// A run in `dir`: refused when the folder holds another run's record, unless `overwrite` (then
// the old run's files are removed: remove_old_run) or that run never trained (its record is
// replaced). A run resumed from `resumed_from` (null: a new run) may write only into the
// checkpoint's own run folder or into one that holds no run.
void claim_run_folder(const std::filesystem::path& dir, bool overwrite,
                      const std::filesystem::path* resumed_from = nullptr) {
  if (resumed_from && is_run_folder_of(dir, *resumed_from)) return;
  std::vector<std::string> found;
  for (const char* file : {"events.jsonl", "model.h5", "config.json"})
    if (std::filesystem::exists(dir / file)) found.push_back(file);
  if (found.empty()) return;
  if (overwrite) return remove_old_run(dir, "--overwrite");
  const bool checkpoint = holds_a_checkpoint(dir);
  if (!checkpoint && !stream_records_a_batch(dir))
    return remove_old_run(dir, "a run that never trained, replaced");
  std::string files;
  for (const auto& f : found) files += (files.empty() ? "" : ", ") + f;
  const std::string held =
      "the run folder " + dir.string() + " holds another run (" + files + "); ";
  if (resumed_from)
    throw ConfigError("--run-dir", held + "a run resumed from " + resumed_from->string() +
                                       " continues in that checkpoint's own run folder or in one "
                                       "that holds no run: give another --run-dir");
  if (!checkpoint)
    throw ConfigError("--run-dir", held +
                                       "it left no checkpoint to resume (a backup in a "
                                       "backup_and_restore backup_dir is restored by the run "
                                       "that replaces it): replace it with --overwrite, or "
                                       "give another --run-dir");
  throw ConfigError("--run-dir", held + "continue it with --resume " + dir.string() +
                                     ", replace it with --overwrite, or give another --run-dir");
}

// A resumed run with no epoch left to train would only write its checkpoint again.
void refuse_a_finished_resume(const TrainingState& state, int epochs,
                              const std::filesystem::path& checkpoint) {
  if (state.epoch < epochs) return;
  throw ConfigError("epochs", "the checkpoint " + checkpoint.string() + " has trained " +
                                  std::to_string(state.epoch) + " epoch" +
                                  (state.epoch == 1 ? "" : "s") + " already, and epochs is " +
                                  std::to_string(epochs) +
                                  ": nothing is left to train; continue it with --set epochs=" +
                                  std::to_string(state.epoch + 1) + " or more");
}

std::filesystem::path default_run_dir(const std::string& name) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::filesystem::path base = std::filesystem::path("runs") / (name + "-" + stamp);
  std::filesystem::path dir = base;
  for (int i = 2; std::filesystem::exists(dir); ++i) dir = base.string() + "-" + std::to_string(i);
  return dir;
}

// Whether CUDA plans can train: the CUDA module is there and has its backend. When not, a CUDA
// plan is refused with the reason (device_plan.cpp, replica_model.cpp).
bool cuda_trainable() {
  const auto& cuda = detail::cuda_module();
  return cuda.api && cuda.api->make_cuda_replica;
}

// Ranks on one machine share its cores: when the launcher did not bind them to cores of their
// own (and OMP_NUM_THREADS is unset), each takes cores / local ranks compute threads.
void share_cores_between_local_ranks(const World& world) {
  if (world.local_size() < 2 || std::getenv("OMP_NUM_THREADS")) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int usable = CPU_COUNT(&set);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (usable < cores) return;  // bound by the launcher: the binding already shares the cores
  cpu::set_compute_threads(std::max(1, cores / world.local_size()));
}

// Each rank of an MPI job takes the config's plan for itself; "auto" gives each rank the GPU of
// its local rank when GPUs train (else the CPU).
DevicePlan plan_for(const RunConfig& rc, const World& world = *single_process_world()) {
  // The machine is looked at once, and only when needed: a plan of CPU replicas does not look for
  // GPUs (parse_device_plan).
  std::optional<PlanDevices> machine;
  const auto devices = [&machine]() -> const PlanDevices& {
    if (!machine) machine = PlanDevices{discover_devices(), cuda_trainable()};
    return *machine;
  };
  std::string text = rc.devices;
  if (world.size() > 1 && text == "auto" && devices().cuda_trainable &&
      !devices().report.gpus.empty())
    text = "cuda:" +
           std::to_string(world.local_rank() % static_cast<int>(devices().report.gpus.size()));
  return parse_device_plan(text, devices, rc.devices_path);
}

// How the plan's devices train the model: one replica each, or pipelines of the config's stages
// (the time balance measures the model on one micro-batch of the global batch's split).
struct Placement {
  std::optional<PipelinePlan> pipeline;
  int replicas = 1;  // in this process
};

Placement placement_for(const RunConfig& rc, const Model& model, const DevicePlan& plan,
                        int ranks = 1) {
  if (!rc.pipeline.active()) return {std::nullopt, plan.size()};
  Placement placement;
  placement.replicas = pipeline_replicas(plan, rc.pipeline.stages);
  const std::int64_t pipelines = static_cast<std::int64_t>(placement.replicas) * ranks;
  const std::int64_t batch = rc.global_batch_size(placement.replicas * ranks);
  const std::int64_t rows = (batch + pipelines - 1) / pipelines;  // the most a pipeline gets
  std::vector<double> seconds;
  if (rc.pipeline.balance == PipelineBalance::time && rc.pipeline.stage_layers.empty())
    seconds = measure_call_seconds(
        model, std::max<std::int64_t>(1, batch / pipelines / rc.pipeline.microbatches));
  placement.pipeline = PipelinePlan{cut_into_stages(model, rc.pipeline, seconds),
                                    rc.pipeline.microbatches, rc.pipeline.schedule};
  if (rc.pipeline.microbatches > rows)
    spdlog::warn(
        "pipeline.microbatches: {} micro-batches for the {} rows each pipeline gets of a batch: "
        "{} of them are empty every step; at most {} have rows",
        rc.pipeline.microbatches, rows, rc.pipeline.microbatches - rows, rows);
  // Stages on GPUs hand over only to the next stage: said by `tandem check` too, before training.
  if (!plan.all_cpu()) require_device_hand_offs(model, placement.pipeline->layout, plan.text);
  return placement;
}

std::vector<DevicePlacement> placement_of(const RunConfig& rc, const Built& b,
                                          const DevicePlan& plan, const Placement& placement,
                                          int ranks = 1) {
  return place_on_devices(
      *b.model, plan, placement.pipeline, rc.global_batch_size(placement.replicas * ranks) / ranks,
      static_cast<int>(b.optimizer->slot_names().size()), measure_call_bytes_per_row(*b.model));
}

// Refuses a plan whose GPUs cannot hold their share (the estimate against each GPU's memory or
// TANDEM_CUDA_MEMORY_LIMIT, which is checked on every plan).
void check_memory(const std::vector<DevicePlacement>& placement, const DevicePlan& plan) {
  const std::optional<std::int64_t> limit = cuda_memory_limit_setting();
  if (!plan.all_cpu()) check_placement_fits(placement, discover_devices(), limit);
}

// The plan as `check` and run_started give it: each device with the replica it serves (several
// devices make one replica when they are a pipeline's stages) and, in a pipeline, its stage —
// the placement's numbers — and the compute threads.
json device_plan_json(const DevicePlan& plan, const std::vector<DevicePlacement>& placed,
                      bool pipeline) {
  json j = plan.to_json();
  json& devices = j["replicas"];
  for (std::size_t i = 0; i < devices.size() && i < placed.size(); ++i) {
    devices[i]["replica"] = placed[i].replica;
    if (pipeline) devices[i]["stage"] = placed[i].stage;
  }
  j["threads"] = cpu::compute_threads();
  return j;
}

// A resumed run goes on at the rate in force when its checkpoint was written (a schedule may have
// moved it), unless the config's learning_rate differs from the one the checkpoint's own run was
// given: then it was changed on purpose (`--set optimizer.config.learning_rate=...` after a
// divergence) and applies.
void adopt_a_changed_learning_rate(Trainer& trainer, const json& resolved,
                                   const CheckpointData& checkpoint) {
  const json::json_pointer at("/optimizer/config/learning_rate");
  const json& saved = checkpoint.training->state.value("run_config", json());
  if (!resolved.contains(at) || !saved.is_object() || !saved.contains(at)) return;
  const json& now = resolved.at(at);
  const json& then = saved.at(at);
  if (!now.is_number() || !then.is_number() || now.get<double>() == then.get<double>()) return;
  spdlog::info("learning rate {} from the config (the checkpoint's run was given {})",
               now.get<double>(), then.get<double>());
  trainer.set_learning_rate(now.get<double>());
}

// A resumed run given other settings than its checkpoint's run goes on with them, but is no
// longer the run an uninterrupted one would have been: said once, each change named.
void warn_of_changed_settings(const json& resolved, const CheckpointData& checkpoint) {
  const json& saved = checkpoint.training->state.value("run_config", json());
  if (!saved.is_object()) return;
  const std::vector<std::string> changes = changes_since_checkpoint(saved, resolved);
  if (changes.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < changes.size() && i < 8; ++i) list += "\n  " + changes[i];
  if (changes.size() > 8) list += "\n  ... and " + std::to_string(changes.size() - 8) + " more";
  spdlog::warn(
      "resuming with settings other than the checkpoint's run had: the run goes on with "
      "them, no longer the run an uninterrupted one would have been:{}",
      list);
}

// The loader's check of each batch's class indices (Objective::label_check), naming the sample
// of `data` whose label is no class of `model`.
void check_labels_of(DataLoaderOptions& options, const Model& model, const Objective& objective,
                     const Dataset& data) {
  // The loader holds the dataset as long as its check.
  options.check_targets =
      objective.label_check(model, [&data](std::int64_t i) { return data.sample_place(i); });
}

// Loads the plugins the config names, checks their options and adds their callbacks to `bus`.
// Returns the plugin records for run_started. `events_options` (from the command line: --events
// -, --device-stats) also apply to an events plugin the config lists itself.
json add_configured_callbacks(const std::vector<CallbackConfig>& callbacks, PluginHost& host,
                              CallbackBus& bus, const json& events_options, int rank,
                              const RunLength& length) {
  json plugins = json::array();
  for (const auto& cc : callbacks) {
    LoadedPlugin loaded = [&] {  // every rank checks every plugin
      try {
        return host.load(cc.plugin);
      } catch (const PluginError& e) {
        throw ConfigError(cc.path + ".plugin", e.what());  // check --json names the entry
      }
    }();
    if (rank != 0 && !cc.all_ranks) continue;
    json options = cc.options;
    if (cc.plugin == "events" && !events_options.empty()) {
      if (!options.is_object()) options = json::object();
      options.update(events_options);
    }
    bus.add(loaded.create(options, {cc.target, cc.path, length.epochs, length.steps_per_epoch}),
            cc.target);
    plugins.push_back({{"plugin", loaded.record.info.name},
                       {"version", loaded.record.info.version},
                       {"path", loaded.record.path.string()},
                       {"target", target_name(cc.target)}});
  }
  return plugins;
}

}  // namespace

json check_plugins(const std::vector<CallbackConfig>& callbacks,
                   const std::vector<std::filesystem::path>& plugin_paths,
                   const RunLength& length) {
  PluginHost host(plugin_paths);
  CallbackBus bus;
  return add_configured_callbacks(callbacks, host, bus, json::object(), 0, length);
}

json check_run_config(const RunConfig& rc, const PluginChecker& check_plugins_of) {
  LazyDatasets lazy(rc, true);
  Built b = build_model(rc, lazy.input_shapes());
  const DevicePlan plan = plan_for(rc);
  ReplicaModel::check_precision(plan, *b.model, b.precision);
  const Placement placement = placement_for(rc, *b.model, plan);
  const std::vector<DevicePlacement> placed = placement_of(rc, b, plan, placement);
  check_memory(placed, plan);
  Datasets data = open_training_datasets(lazy, rc, *b.model);
  // What Trainer::check_fit_data asks before a run: the data fits the model's inputs and outputs.
  Trainer::check_data_fits(*b.model, *b.objective, *data.train, "training");
  if (data.validation)
    Trainer::check_data_fits(*b.model, *b.objective, *data.validation, "validation");
  DataLoaderOptions train_options{rc.global_batch_size(placement.replicas), false, 0, 0};
  train_options.mix = rc.data.mix;  // checks that the data can be mixed so
  const DataLoader train(data.train, train_options);
  const RunLength length{rc.epochs,
                         Trainer::steps_per_epoch(train, {rc.epochs, rc.steps_per_epoch})};
  json plugins = check_plugins_of(rc.callbacks, rc.plugin_paths, length);
  return {{"name", rc.name},
          {"parameters", b.model->count_params()},
          {"devices", device_plan_json(plan, placed, placement.pipeline.has_value())},
          {"batch_size", rc.global_batch_size(placement.replicas)},
          {"precision", precision_name(b.precision)},
          {"placement", placement_json(placed)},
          {"train_samples", data.train->size()},
          {"validation_samples", data.validation ? data.validation->size() : 0},
          {"plugins", plugins}};
}

std::unique_ptr<Model> build_run_model(const RunConfig& rc) {
  return Model::from_config(rc.model, "model", rc.seed, training_input_shapes(rc));
}

Model::DataInputShapes training_input_shapes(const RunConfig& rc) {
  return [rc](const std::vector<Shape>&) { return open_datasets(rc, true).train->x_parts(); };
}

std::string placement_summary(const RunConfig& rc) {
  LazyDatasets lazy(rc, true);
  Built b = build_model(rc, lazy.input_shapes());
  const DevicePlan plan = plan_for(rc);
  const Placement placement = placement_for(rc, *b.model, plan);
  std::string head = "Placement on " + plan.text + ": " + std::to_string(placement.replicas) +
                     (placement.replicas == 1 ? " replica" : " replicas");
  if (placement.pipeline)
    head += " of " + std::to_string(placement.pipeline->stage_count()) + " stages, " +
            std::to_string(placement.pipeline->microbatches) + " micro-batches (" +
            schedule_name(placement.pipeline->schedule) + ")";
  head += ", global batch " + std::to_string(rc.global_batch_size(placement.replicas)) + "\n";
  return head + placement_table(placement_of(rc, b, plan, placement));
}

StoredRun run_config_of_checkpoint(const std::filesystem::path& path) {
  CheckpointData data = read_checkpoint_file(path);
  StoredRun stored;
  stored.has_training_state = data.training.has_value();
  if (data.training && data.training->state.contains("run_config"))
    stored.config = data.training->state["run_config"];
  return stored;
}

TrainResult run_training(const TrainRequest& request) {
  const RunConfig& rc = request.config;
  const std::shared_ptr<World> world = request.world ? request.world : single_process_world();
  const int rank = world->rank(), ranks = world->size();
  const bool writer = rank == 0;  // rank 0 writes the run folder, the stream, model.h5
  // Everything that can be wrong with the input is checked before the run folder exists.
  LazyDatasets lazy(rc, true);
  Built b = build_model(rc, lazy.input_shapes());
  const DevicePlan plan = plan_for(rc, *world);
  const Placement placement = placement_for(rc, *b.model, plan, ranks);
  const std::vector<DevicePlacement> placed = placement_of(rc, b, plan, placement, ranks);
  check_memory(placed, plan);
  const std::int64_t batch_size = rc.global_batch_size(placement.replicas * ranks);
  Datasets data = open_training_datasets(lazy, rc, *b.model);
  std::optional<CheckpointData> resume;
  if (request.resume) resume = read_checkpoint_file(*request.resume, b.model->count_params());
  if (request.weights) load_weights_file(*b.model, *request.weights);
  if (!request.resume && !request.weights) adapt_to_training_data(*b.model, *data.train, writer);
  // The ranks of an MPI job compare what they were given before any other collective.
  json position;
  if (resume && resume->training)
    for (const char* key : {"epoch", "batch", "step"})
      position[key] = resume->training->state.value(key, json());
  check_ranks_agree(
      *world, rank_fingerprint(rc.resolved, {data.train.get(), data.validation.get()}, position));

  // Every rank walks the same global order and reads its shard of each batch.
  DataLoaderOptions train_opts{
      batch_size, rc.data.shuffle, Rng::derive(rc.seed, 1), rc.data.prefetch, rank, ranks};
  train_opts.mix = rc.data.mix;
  DataLoaderOptions val_opts{batch_size, false, 0, rc.data.prefetch, rank, ranks};
  if (!plan.all_cpu())  // batches in pinned memory: full-speed, asynchronous copies to the GPUs
    train_opts.allocate = val_opts.allocate = detail::pinned_batch_storage();
  check_labels_of(train_opts, *b.model, *b.objective, *data.train);
  if (data.validation) check_labels_of(val_opts, *b.model, *b.objective, *data.validation);
  DataLoader train_loader(data.train, train_opts);
  std::unique_ptr<DataLoader> val_loader;
  if (data.validation) val_loader = std::make_unique<DataLoader>(data.validation, val_opts);

  // Plugins are loaded and their options checked before the run folder exists. Callbacks run on
  // rank 0, or on every rank when their config says "ranks": "all".
  PluginHost host(rc.plugin_paths);
  CallbackBus bus;
  json events_options = json::object();
  if (request.events_to_stdout) events_options["stdout"] = true;
  if (request.device_stats_seconds)
    events_options["device_stats_seconds"] = *request.device_stats_seconds;
  const RunLength length{rc.epochs,
                         Trainer::steps_per_epoch(train_loader, {rc.epochs, rc.steps_per_epoch})};
  json plugins = add_configured_callbacks(rc.callbacks, host, bus, events_options, rank, length);
  for (const auto& cb : request.callbacks) bus.add(cb);
  // The standard plugins: the event stream always, the progress bar when verbose (unless the
  // config lists them itself, with its own options).
  auto listed = [&](const std::string& name) {
    for (const auto& cc : rc.callbacks)
      if (cc.plugin == name) return true;
    return false;
  };
  auto add_standard = [&](const std::string& name, const json& options) {
    if (listed(name)) return;
    LoadedPlugin loaded = host.load(name);
    bus.add(loaded.create(options, {Target::template_model, name}));
    plugins.push_back({{"plugin", name},
                       {"version", loaded.record.info.version},
                       {"path", loaded.record.path.string()},
                       {"target", "template"}});
  };
  if (writer) {
    json events = {{"stdout", request.events_to_stdout}};
    events.update(events_options);
    add_standard("events", events);
    if (rc.verbose > 0) add_standard("progress", {{"verbose", rc.verbose}});
  }

  share_cores_between_local_ranks(*world);
  ReplicaModel meta(*b.model, *b.optimizer, plan, world, b.precision, placement.pipeline);
  Trainer trainer(meta, std::move(*b.objective));
  trainer.check_fit_data(train_loader, val_loader.get());
  if (resume) {
    trainer.restore(*resume, request.resume->string());
    refuse_a_finished_resume(trainer.state(), rc.epochs, *request.resume);
    adopt_a_changed_learning_rate(trainer, rc.resolved, *resume);
  }
  // The config as resolved, with the precision the layers' dtype policies chose.
  json resolved = rc.resolved;
  resolved["precision"] = precision_name(b.precision);
  if (resume && rank == 0) warn_of_changed_settings(resolved, *resume);

  TrainResult result;
  std::optional<RunFolderLock> folder_lock;  // held by the writing rank until the run ends
  // Absolute, so that paths in the event stream stay valid for readers in other folders. Rank 0
  // names it (a default name holds the time) and the others take its name.
  std::string run_dir = std::filesystem::absolute(request.run_dir  ? *request.run_dir
                                                  : request.resume ? request.resume->parent_path()
                                                                   : default_run_dir(rc.name))
                            .lexically_normal()
                            .string();
  if (ranks > 1) run_dir = world->all_gather_bytes(run_dir).front();
  result.run_dir = run_dir;
  if (writer) {
    std::error_code ec;
    if (std::filesystem::exists(result.run_dir, ec) &&
        !std::filesystem::is_directory(result.run_dir, ec))
      throw ConfigError("--run-dir", result.run_dir.string() + " is a file, not a folder");
    std::filesystem::create_directories(result.run_dir, ec);
    if (ec)
      throw RunError("cannot create the run folder " + result.run_dir.string() + ": " +
                     ec.message());
    // Before anything is written: a folder another engine is running in is left alone, and so
    // is the record of a finished run unless the user says to continue or replace it.
    folder_lock.emplace(result.run_dir);
    claim_run_folder(result.run_dir, request.overwrite,
                     request.resume ? &*request.resume : nullptr);
    if (const int stray = remove_stray_temporaries(result.run_dir); stray > 0)
      spdlog::info("removed {} temporary file{} left by writers that died mid-write", stray,
                   stray == 1 ? "" : "s");
    write_file_atomically(result.run_dir / "config.json", resolved.dump(2) + "\n");
  }

  trainer.set_run_dir(result.run_dir);
  trainer.set_interrupt_flag(request.interrupt);
  trainer.set_run_config(resolved);
  trainer.set_class_names(data.train->class_names());
  trainer.set_callbacks(std::move(bus));

  // Every rank's device plan, in rank order.
  json rank_plans = json::array();
  for (const auto& text : world->all_gather_bytes(
           device_plan_json(plan, placed, placement.pipeline.has_value()).dump()))
    rank_plans.push_back(json::parse(text));
  json devices = rank_plans.front();
  if (ranks > 1) devices["ranks"] = rank_plans;
  json started = {{"name", rc.name},
                  {"tandem_version", TANDEM_VERSION},
                  {"run_dir", result.run_dir.string()},
                  {"config", resolved},
                  {"devices", devices},
                  {"batch_size", batch_size},
                  {"plugins", plugins},
                  {"world_size", ranks},
                  {"train_samples", data.train->size()},
                  {"validation_samples", data.validation ? data.validation->size() : 0},
                  {"parameters", b.model->count_params()},
                  {"placement", placement_json(placed)}};
  if (request.resume)
    started["resumed_from"] =
        std::filesystem::absolute(*request.resume).lexically_normal().string();
  if (writer) {
    spdlog::info("run folder: {}", result.run_dir.string());
    spdlog::info("training on {}; validating on {}", data.train->describe(),
                 data.validation ? data.validation->describe() : "nothing");
    if (ranks > 1)
      spdlog::info("{} processes (MPI ranks), {} replicas each; global batch {}", ranks,
                   placement.replicas, batch_size);
  }

  try {
    // Inside: a callback failing on it ends the run with run_failed after it in the stream.
    trainer.publish_run_event("run_started", started);
    // The run's failure, reported once its weights are saved.
    std::optional<DivergedRun> diverged;
    std::optional<FailedAfterTraining> failed_after;
    std::optional<Error> failed_mid_run;
    try {
      result.history = trainer.fit(train_loader, val_loader.get(), {rc.epochs, rc.steps_per_epoch});
    } catch (const DivergedRun& e) {
      diverged = e;
      result.history = trainer.state().history;
    } catch (const FailedAfterTraining& e) {
      failed_after = e;
      result.history = trainer.state().history;
    } catch (const Error& e) {
      if (!writer || !trainer.failed_between_steps()) throw;
      failed_mid_run = e;  // reported once the weights of the steps done are saved
      result.history = trainer.state().history;
    }
    result.interrupted = trainer.interrupted();
    result.stop_reason = trainer.state().stop_reason;

    result.checkpoint = result.run_dir / "model.h5";
    if (ranks > 1)  // each rank's own line (quiet under -q: the run's error says the rest)
      spdlog::info("[rank {}/{}] {} after epoch {}, step {}{}{}", rank, ranks,
                   result.interrupted ? "interrupted" : "finished", trainer.state().epoch,
                   trainer.state().step, result.stop_reason.empty() ? "" : ": ",
                   result.stop_reason);
    if (!writer) {
      if (diverged) throw *diverged;
      if (failed_after) throw *failed_after;
      return result;
    }
    const auto t0 = std::chrono::steady_clock::now();
    // Written at once, before anything trains again: the model's own tensors, not a copy of
    // them (a second copy of the weights and slots in memory, 494 MB for seed-mlp). Holds the
    // run config (set_run_config).
    CheckpointData ckpt = trainer.checkpoint(Target::template_model, Snapshot::shared);
    try {
      write_checkpoint_file(result.checkpoint, ckpt);
    } catch (const Error& e) {
      // A run that failed already (a full disk fails the checkpoint callback, then this) is
      // reported by its own failure first.
      const Error* first = diverged         ? static_cast<const Error*>(&*diverged)
                           : failed_after   ? &*failed_after
                           : failed_mid_run ? &*failed_mid_run
                                            : nullptr;
      if (!first) throw;
      throw Error(first->code(), std::string(first->what()) +
                                     " (and its weights could not be saved: " + e.what() + ")");
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // 1-based, as every event's: the epoch the run stopped in (an interrupt mid-epoch), else
    // the last one it finished.
    const TrainingState& at = trainer.state();
    trainer.publish_run_event("checkpoint_saved",
                              {{"path", result.checkpoint.string()},
                               {"epoch", at.batch > 0 ? at.epoch + 1 : at.epoch},
                               {"step", trainer.state().step},
                               {"monitor", nullptr},
                               {"value", nullptr},
                               {"best", false},
                               {"target", "template"},
                               {"reason", diverged             ? "diverged"
                                          : failed_mid_run     ? "failed"
                                          : result.interrupted ? "interrupted"
                                                               : "final"},
                               {"resumable", true},
                               {"bytes", std::filesystem::file_size(result.checkpoint)},
                               {"seconds", secs}});
    if (diverged)
      throw RunError(diverged->where() + "; the weights of the step before are saved in " +
                     result.checkpoint.string() +
                     ", resumable there with --resume (or resume an earlier checkpoint when "
                     "they have grown too large already). Lower the learning rate (a --set at "
                     "--resume applies), check the data for NaN or extreme values, or clip "
                     "gradients (clipnorm).");
    if (failed_mid_run)
      throw Error(failed_mid_run->code(),
                  std::string(failed_mid_run->what()) + " (the weights of the " +
                      std::to_string(at.step) + " steps done are saved in " +
                      result.checkpoint.string() +
                      ", resumable there with --resume once the cause is fixed)");
    if (failed_after)
      throw RunError(std::string(failed_after->what()) +
                     " (training had ended: its weights are saved in " +
                     result.checkpoint.string() + ")");
    spdlog::info("{} checkpoint: {}", result.interrupted ? "resumable" : "final",
                 result.checkpoint.string());
  } catch (const Error& e) {
    trainer.publish_run_event("run_failed",
                              {{"error", e.what()}, {"exit_code", static_cast<int>(e.code())}});
    throw;
  } catch (const std::exception& e) {
    trainer.publish_run_event("run_failed", {{"error", e.what()}, {"exit_code", 1}});
    throw;
  }
  json history = json::array();
  for (const auto& h : result.history) history.push_back(h.to_json());
  trainer.publish_run_event("run_finished", {{"epochs_done", trainer.state().epoch},
                                             {"steps", trainer.state().step},
                                             {"interrupted", result.interrupted},
                                             {"stop_reason", result.stop_reason},
                                             {"history", history},
                                             {"checkpoint", result.checkpoint.string()}});
  return result;
}

namespace {

// Everything evaluate and predict share: the model with loaded weights, the chosen data, a trainer.
struct Inference {
  Built built;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<ReplicaModel> meta;
  std::unique_ptr<Trainer> trainer;

  // `evaluating`: the targets are used, so their class indices are checked as batches are read.
  Inference(const InferenceRequest& request, bool evaluating)
      : Inference(request, evaluating,
                  LazyDatasets(request.config, request.split == "train", request.split)) {}

 private:
  Inference(const InferenceRequest& request, bool evaluating, LazyDatasets lazy)
      : built(build_model(request.config, lazy.input_shapes())) {
    const RunConfig& rc = request.config;
    const DevicePlan plan = plan_for(rc);
    Datasets d = lazy.get();
    load_weights_file(*built.model, request.weights);
    const Placement placement = placement_for(rc, *built.model, plan);
    DataLoaderOptions options{rc.global_batch_size(placement.replicas), false, 0, rc.data.prefetch};
    if (!plan.all_cpu()) options.allocate = detail::pinned_batch_storage();
    const std::shared_ptr<Dataset> data = pick_split(request.split, d);
    if (evaluating) check_labels_of(options, *built.model, *built.objective, *data);
    loader = std::make_unique<DataLoader>(data, options);
    meta =
        std::make_unique<ReplicaModel>(*built.model, *built.optimizer, plan, single_process_world(),
                                       built.precision, placement.pipeline);
    trainer = std::make_unique<Trainer>(*meta, std::move(*built.objective));
    if (rc.verbose > 0) {
      CallbackBus bus;
      bus.add(PluginHost(rc.plugin_paths)
                  .load("progress")
                  .create({{"verbose", rc.verbose}}, {Target::template_model, "progress"}));
      trainer->set_callbacks(std::move(bus));
    }
  }
};

}  // namespace

namespace {

// The rows of `parent` over and over: sample i is parent's i % parent->size().
class RepeatedDataset final : public WrappedDataset {
 public:
  RepeatedDataset(std::shared_ptr<const Dataset> parent, std::int64_t size)
      : WrappedDataset(std::move(parent)), size_(size) {}
  std::int64_t size() const override { return size_; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    mapped_.resize(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) mapped_[k] = indices[k] % parent().size();
    parent().read(mapped_, x, y);
  }
  std::string sample_file(std::int64_t i) const override {
    return parent().sample_file(i % parent().size());
  }
  std::string describe() const override { return parent().describe() + ", repeated"; }

 private:
  std::int64_t size_;
  mutable std::vector<std::int64_t> mapped_;
};

// Stops a fit once `seconds` have passed since its first step ended, counting the steps since.
class StepTimer final : public Callback {
 public:
  explicit StepTimer(double seconds) : seconds_(seconds) {}
  std::string name() const override { return "data bench timer"; }
  void on_train_batch_end(CallbackContext& context, std::int64_t, const Logs&) override {
    const auto now = std::chrono::steady_clock::now();
    if (steps_ < 0) {
      start_ = now;
      steps_ = 0;
      return;
    }
    ++steps_;
    elapsed_ = std::chrono::duration<double>(now - start_).count();
    if (elapsed_ >= seconds_) context.request_stop("data bench: timed");
  }
  std::int64_t steps() const { return std::max<std::int64_t>(steps_, 0); }
  double elapsed() const { return elapsed_; }

 private:
  double seconds_;
  std::chrono::steady_clock::time_point start_;
  std::int64_t steps_ = -1;
  double elapsed_ = 0;
};

}  // namespace

DataBenchResult run_data_bench(const RunConfig& rc, double seconds) {
  LazyDatasets lazy(rc, true);
  Built b = build_model(rc, lazy.input_shapes());
  const DevicePlan plan = plan_for(rc);
  const Placement placement = placement_for(rc, *b.model, plan);
  Datasets data = open_training_datasets(lazy, rc, *b.model);
  DataBenchResult result;
  result.dataset = data.train->describe();
  result.batch_size = rc.global_batch_size(placement.replicas);

  DataLoaderOptions pipeline{result.batch_size, rc.data.shuffle, Rng::derive(rc.seed, 1),
                             rc.data.prefetch};
  pipeline.mix = rc.data.mix;
  {
    DataLoader loader(data.train, pipeline);
    const auto start = std::chrono::steady_clock::now();
    int epoch = 0;
    loader.start_epoch(epoch);
    Batch batch;
    while (result.pipeline_seconds < seconds) {
      if (loader.next(batch))
        result.pipeline_samples += batch.size();
      else
        loader.start_epoch(++epoch);
      result.pipeline_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }

  // One batch of the data, in memory, repeated for up to 10,000 steps.
  const std::int64_t rows = std::min(result.batch_size, data.train->size());
  const auto one_batch = data::make_cached(make_subset(data.train, 0, rows), "data.train");
  const auto repeated = std::make_shared<RepeatedDataset>(one_batch, result.batch_size * 10000);
  DataLoader steps(repeated, {result.batch_size, false, 0, rc.data.prefetch});
  ReplicaModel meta(*b.model, *b.optimizer, plan, single_process_world(), b.precision,
                    placement.pipeline);
  Trainer trainer(meta, std::move(*b.objective));
  auto timer = std::make_shared<StepTimer>(seconds);
  CallbackBus bus;
  bus.add(timer);
  trainer.set_callbacks(std::move(bus));
  trainer.fit(steps, nullptr, {1, 0});
  result.steps = timer->steps();
  result.step_seconds = timer->elapsed();
  return result;
}

// Files that failed to decode while inference ran, each replaced in its batch by the next sample
// that decodes (an image folder's on_bad_file "skip", made for training).
std::string files_replaced_during(const Inference& inference, std::int64_t skipped_before) {
  const Dataset& data = inference.loader->dataset();
  const std::int64_t replaced = data.skipped_files() - skipped_before;
  if (replaced <= 0) return "";
  return std::to_string(replaced) + (replaced == 1 ? " file" : " files") + " of " +
         data.describe() +
         " could not be decoded and were replaced by the next samples (on_bad_file \"skip\"; "
         "the warnings above name them)";
}

Logs run_evaluation(const InferenceRequest& request) {
  Inference inference(request, true);
  const std::int64_t skipped = inference.loader->dataset().skipped_files();
  Logs logs = inference.trainer->evaluate(*inference.loader);
  if (const std::string replaced = files_replaced_during(inference, skipped); !replaced.empty())
    spdlog::warn("{}: those samples count twice in these logs", replaced);
  return logs;
}

Predictions run_prediction(const InferenceRequest& request) {
  Inference inference(request, false);
  const Dataset& data = inference.loader->dataset();
  const std::int64_t skipped = data.skipped_files();
  Predictions out{inference.trainer->predict(*inference.loader), {}};
  // A replaced row would give one file's output in another file's place, unseen.
  if (const std::string replaced = files_replaced_during(inference, skipped); !replaced.empty())
    throw DataError(replaced + ": the predictions would not follow the files; fix or remove them");
  if (data.size() > 0 && !data.sample_file(0).empty()) {
    out.files.reserve(static_cast<std::size_t>(data.size()));
    for (std::int64_t i = 0; i < data.size(); ++i) out.files.push_back(data.sample_file(i));
  }
  return out;
}

std::filesystem::path run_folder_of_checkpoint(const std::filesystem::path& checkpoint) {
  // Absolute first: "model.h5" in the working folder has no parent to name ("" made every
  // caller's absolute() fail).
  const std::filesystem::path dir = std::filesystem::absolute(checkpoint).parent_path();
  if (!std::filesystem::exists(dir / "config.json") && dir.has_parent_path() &&
      std::filesystem::exists(dir.parent_path() / "config.json"))
    return dir.parent_path();
  return dir;
}

}  // namespace tandem
