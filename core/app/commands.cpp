#include "app/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/devices_command.hpp"
#include "app/export_command.hpp"
#include "app/import_command.hpp"
#include "app/inspect_command.hpp"
#include "app/optimizers_command.hpp"
#include "app/options_command.hpp"
#include "app/output_over_input.hpp"
#include "app/plugin_child.hpp"
#include "app/plugins_command.hpp"
#include "app/prediction_writer.hpp"
#include "io/indexed_checkpoints.hpp"
#include "parallel/world.hpp"
#include "plugin/plugin_host.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "train/run.hpp"
#include "train/stored_config.hpp"
#include "util/environment_settings.hpp"

namespace tandem::app {

namespace fs = std::filesystem;

namespace {

// The exit code of a run stopped by a signal (SIGINT, SIGTERM, SIGUSR1), as shells report
// SIGINT's end.
constexpr int kInterruptedExit = 130;

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The config `tandem train` uses when none is given.
fs::path default_config() {
  const char* name = "fashion-mlp.json";
  for (const fs::path& dir : {executable_dir() / ".." / "share" / "tandem" / "configs",
                              fs::path(TANDEM_SOURCE_DIR) / "resources" / "configs"}) {
    if (fs::exists(dir / name)) return fs::canonical(dir / name);
  }
  throw ConfigError("<config>", std::string("no config given and the default ") + name +
                                    " was not found; pass a run config file");
}

struct ConfigSource {
  std::string config;
  std::string checkpoint;  // a checkpoint whose stored run config may be used
  bool use_default = false;
  bool trust_checkpoint = false;  // --trust-checkpoint-config: use the stored config as it is
};

// The stored run config of `checkpoint`, less what could run code or write files outside the
// run folder unless the user trusts the file (train/stored_config.hpp); says what it left out.
nlohmann::json stored_config_to_use(const std::string& checkpoint, const nlohmann::json& stored,
                                    bool trusted) {
  if (trusted) return stored;
  ReviewedConfig reviewed = untrusted_stored_config(stored);
  if (reviewed.left_out.empty()) return reviewed.config;
  for (const auto& line : reviewed.left_out)
    spdlog::warn("left out of the run config stored in {}: {}", checkpoint, line);
  spdlog::warn(
      "a checkpoint's stored run config is used as data: its plugin libraries and paths "
      "outside the run folder only with --trust-checkpoint-config (for checkpoints you trust), "
      "or give the run config file");
  return reviewed.config;
}

// How --devices PLAN goes into the overrides: --set devices=PLAN whose errors name the flag.
constexpr const char* kDevicesFlag = "--devices=";

RunConfig resolve_config(const ConfigSource& src, const std::vector<std::string>& overrides,
                         bool quiet) {
  check_environment_settings();  // the machine's settings, before any work
  nlohmann::json doc;
  fs::path base_dir = fs::current_path();
  if (!src.config.empty()) {
    doc = load_json_file(src.config);
    base_dir = fs::absolute(src.config).parent_path();
  } else if (!src.checkpoint.empty()) {
    const StoredRun stored = run_config_of_checkpoint(src.checkpoint);
    if (!stored.has_training_state)
      throw ConfigError("<config>", src.checkpoint +
                                        " holds weights only (no training state, no run config): "
                                        "pass the run config file as well; `tandem train CONFIG "
                                        "--weights FILE` starts a new run from these weights");
    if (!stored.config)
      throw ConfigError("<config>", src.checkpoint +
                                        " holds no run config (not written by tandem train); "
                                        "pass the run config file as well");
    doc = stored_config_to_use(src.checkpoint, *stored.config, src.trust_checkpoint);
  } else if (src.use_default) {
    fs::path path = default_config();
    doc = load_json_file(path);
    base_dir = path.parent_path();
  } else {
    throw ConfigError("<config>", "a run config file is required");
  }
  bool devices_from_flag = false;  // the last plan given came from --devices (kDevicesFlag)
  for (const auto& o : overrides) {
    const bool flag = o.rfind(kDevicesFlag, 0) == 0;
    if (flag || o.rfind("devices=", 0) == 0) devices_from_flag = flag;
    apply_override(doc, flag ? "devices=" + o.substr(std::string(kDevicesFlag).size()) : o);
  }
  RunConfig rc = parse_run_config(doc, base_dir);
  if (devices_from_flag) rc.devices_path = "--devices";
  if (quiet) {
    rc.verbose = 0;
    spdlog::set_level(spdlog::level::warn);
  }
  return rc;
}

// `--resume RUN_DIR` means the newest resumable checkpoint of that run: its model.h5 (written by
// the engine at the end or on interrupt) or the newest resumable entry of a checkpoints.json index
// (the checkpoint plugin's) in the folder or a subfolder of it, whichever file is newer.
// `--resume CKPT` is that file.
fs::path resume_checkpoint(const fs::path& arg) {
  if (!fs::is_directory(arg)) return arg;
  std::optional<fs::path> newest;
  fs::file_time_type newest_time;
  auto consider = [&](const fs::path& file) {
    std::error_code ec;
    const auto t = fs::last_write_time(file, ec);
    if (!ec && fs::is_regular_file(file, ec) && (!newest || t > newest_time)) {
      newest = file;
      newest_time = t;
    }
  };
  consider(arg / "model.h5");
  // "rewriting" entries too: files being written again when the run stopped, whole (the old save
  // or the new one: the write replaces them atomically).
  for (const IndexedCheckpoint& c : indexed_checkpoints(arg))
    if (c.resumable) consider(c.file);
  if (!newest)
    throw ConfigError("--resume", arg.string() +
                                      " holds no resumable checkpoint: no model.h5 and no "
                                      "checkpoints.json entry with training state");
  return *newest;
}

// The run folder a resumed run continues in: RUN_DIR itself, else the checkpoint's folder, or its
// parent when the checkpoint sits in a subfolder of a run (run/checkpoints/x.h5).
fs::path resumed_run_dir(const fs::path& arg, const fs::path& checkpoint) {
  return fs::is_directory(arg) ? arg : run_folder_of_checkpoint(checkpoint);
}

// Whether a callback of `rc` loads a plugin from outside Tandem's built-in folders: a path, or a
// name found in a folder of plugin_paths or TANDEM_PLUGIN_PATH.
bool uses_outside_plugins(const RunConfig& rc) {
  const PluginHost host(rc.plugin_paths);
  const std::vector<PluginCandidate> candidates = host.candidates();
  const auto built_in = [&](const fs::path& file) {
    for (std::size_t i = 0; i < host.search_path().size(); ++i)
      if (host.is_builtin_folder(i) && file.parent_path() == host.search_path()[i]) return true;
    return false;
  };
  for (const CallbackConfig& cb : rc.callbacks) {
    const auto found = std::find_if(candidates.begin(), candidates.end(),
                                    [&](const PluginCandidate& c) { return c.name == cb.plugin; });
    if (found == candidates.end() || !built_in(found->path)) return true;
  }
  return false;
}

// Under mpirun every rank must run the same command: a rank running another one (a per-host
// wrapper that differs) left the others waiting forever in the first collective of theirs.
// Collective: the first thing train, evaluate and predict do under mpirun. Throws on every rank.
void check_every_rank_runs(const std::string& command) {
  if (!launched_by_mpi()) return;
  const auto world = process_world();
  if (world->size() == 1) return;
  const std::vector<std::string> commands = world->all_gather_bytes(command);
  for (std::size_t r = 1; r < commands.size(); ++r)
    if (commands[r] != commands[0])
      throw Error(ExitCode::bad_input,
                  "rank " + std::to_string(r) + " of the " + std::to_string(commands.size()) +
                      " runs `tandem " + commands[r] + "` and rank 0 `tandem " + commands[0] +
                      "`: every rank of an MPI job must run the same command (check the "
                      "per-host wrappers)");
}

// evaluate and predict are single-process commands: under mpirun, rank 0 does the work and the
// other ranks end at once (once every rank has said it runs `command`).
bool on_rank_zero(const std::string& command) {
  check_every_rank_runs(command);
  return !launched_by_mpi() || process_world()->rank() == 0;
}

// For the commands that may use the run config stored in a checkpoint (without CONFIG).
// `tandem data bench`'s report: both rates and which one bounds the run.
void print_data_bench(const DataBenchResult& r, bool as_json) {
  const double pipeline = r.pipeline_rate(), step = r.step_rate();
  if (as_json) {
    std::cout << nlohmann::json{{"dataset", r.dataset},
                                {"batch_size", r.batch_size},
                                {"pipeline_samples_per_sec", pipeline},
                                {"pipeline_samples", r.pipeline_samples},
                                {"pipeline_seconds", r.pipeline_seconds},
                                {"step_samples_per_sec", step},
                                {"steps", r.steps},
                                {"step_seconds", r.step_seconds},
                                {"bound_by", pipeline < step ? "input pipeline" : "training step"}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return;
  }
  std::printf("data: %s\n", r.dataset.c_str());
  std::printf("input pipeline alone: %12.0f samples/s (%lld samples in %.1f s)\n", pipeline,
              static_cast<long long>(r.pipeline_samples), r.pipeline_seconds);
  std::printf("training step alone:  %12.0f samples/s (%lld steps of %lld in %.1f s)\n", step,
              static_cast<long long>(r.steps), static_cast<long long>(r.batch_size),
              r.step_seconds);
  if (pipeline >= step)
    std::printf("the training step bounds the run: the input pipeline is %.1fx as fast\n",
                step > 0 ? pipeline / step : 0.0);
  else  // what helps depends on what reads: decoding images, or a file from disk
    std::printf(
        "the input pipeline bounds the run: it delivers %.0f%% of what the step takes "
        "(%s help)\n",
        100.0 * pipeline / step,
        r.dataset.rfind("images", 0) == 0
            ? "more workers, \"cache\": true or smaller images"
            : "data small enough to be read whole, a faster disk or a larger \"prefetch\"");
}

void add_trust_option(CLI::App* cmd, bool& trust) {
  cmd->add_flag("--trust-checkpoint-config", trust,
                "Use the checkpoint's stored run config as it is, plugin libraries and file paths "
                "included (default: those are left out; only for checkpoints you trust)");
}

// `config_must_exist`: CLI11 checks the file; otherwise the command reads it and reports a missing
// one itself (check --json prints that as JSON too).
void add_config_options(CLI::App* cmd, std::string& config, std::vector<std::string>& overrides,
                        bool config_must_exist = true) {
  CLI::Option* file = cmd->add_option("config", config, "Run config (JSON)");
  if (config_must_exist) file->check(CLI::ExistingFile);
  cmd->add_option("--set", overrides, "Override a config value: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
  // --devices PLAN is --set devices=PLAN, spelled the way users expect.
  cmd->add_option_function<std::string>(
         "--devices",
         [&overrides](const std::string& plan) { overrides.push_back(kDevicesFlag + plan); },
         "Device plan: auto, cpu, cpu:N, cuda:0,2, cuda:all (overrides the config's \"devices\")")
      ->type_name("PLAN");
}

}  // namespace

void Commands::register_all(CLI::App& app, const std::atomic<bool>* interrupt) {
  interrupt_ = interrupt;

  auto* train = app.add_subcommand("train", "Train a model from a run config");
  train->footer(
      "Without CONFIG, trains resources/configs/fashion-mlp.json. Writes <run-dir>/config.json, "
      "events.jsonl and model.h5. Ctrl-C stops at the next batch and saves a resumable "
      "checkpoint.\nExit codes: 0 done, 1 run failed, 2 bad usage, config or data, 130 "
      "stopped by a signal (the checkpoint resumes).");
  add_config_options(train, config_, overrides_);
  train->add_option("--run-dir", run_dir_, "Run folder (default runs/<name>-<UTC time>)");
  train->add_option("--events", events_, "'-' also writes the event stream to stdout");
  train
      ->add_option("--device-stats", device_stats_,
                   "Sample CPU/GPU utilisation into the event stream every SECONDS (0 = never; "
                   "default: the events plugin's device_stats_seconds, 10)")
      ->type_name("SECONDS");
  train
      ->add_option("--resume", resume_,
                   "Continue from a checkpoint with training state, or from the newest one of a "
                   "run folder")
      ->type_name("CKPT|RUN_DIR")
      ->check(CLI::ExistingPath);
  train
      ->add_option("--weights", weights_,
                   "Start from these weights (Tandem or Keras .h5, Keras 3 .weights.h5 or .keras)")
      ->check(CLI::ExistingPath);
  train->add_flag("--overwrite", overwrite_,
                  "Replace the run a --run-dir folder holds: its model.h5, config.json, events and "
                  "the checkpoints its indexes list are removed (default: refuse it)");
  train->add_flag("-q,--quiet", quiet_, "No progress output on stderr");
  add_trust_option(train, trust_checkpoint_);
  train->callback([this] {
    selected_ = [this] {
      check_every_rank_runs("train");
      if (!events_.empty() && events_ != "-")
        throw ConfigError("--events",
                          "only '-' (stdout) is supported; the file stream is always "
                          "<run-dir>/events.jsonl");
      if (!resume_.empty() && !weights_.empty())
        throw ConfigError("--weights", "give --resume or --weights, not both");
      TrainRequest req;
      const fs::path resume = resume_.empty() ? fs::path() : resume_checkpoint(resume_);
      req.config = resolve_config({config_, resume.string(), true, trust_checkpoint_}, overrides_,
                                  quiet_);
      if (!run_dir_.empty()) req.run_dir = run_dir_;
      if (!resume_.empty()) {
        req.resume = resume;
        if (run_dir_.empty()) req.run_dir = resumed_run_dir(resume_, resume);
        spdlog::info("resuming from {}", resume.string());
      }
      if (!weights_.empty()) req.weights = weights_;
      // A plugin of the user's is loaded in a child process first, as `check` does: one that
      // crashes while it loads (built against another C++ library) is then an error naming it,
      // not an abort in the middle of the run.
      if (uses_outside_plugins(req.config))
        check_plugins_in_child(req.config.callbacks, req.config.plugin_paths);
      if (overwrite_ && !resume_.empty())
        throw ConfigError("--overwrite", "give --resume or --overwrite, not both");
      req.overwrite = overwrite_;
      req.events_to_stdout = events_ == "-";
      if (device_stats_) {
        if (!std::isfinite(*device_stats_) || *device_stats_ < 0 || *device_stats_ > 86400)
          throw ConfigError("--device-stats", "expected seconds from 0 to 86400, got " +
                                                  fmt::format("{:g}", *device_stats_));
        req.device_stats_seconds = *device_stats_;
      }
      req.interrupt = interrupt_;
      req.world = process_world();  // the ranks of an MPI job, or this process alone
      TrainResult result = run_training(req);
      // Stopped by a signal (with a resumable checkpoint): 130, so that scripts can tell it
      // from a finished run. Under MPI only rank 0 says so, after it has written the
      // checkpoint: a rank ending non-zero first would make mpirun end the others.
      if (result.interrupted && req.world->rank() == 0) return kInterruptedExit;
      return static_cast<int>(ExitCode::ok);
    };
  });

  auto* evaluate = app.add_subcommand("evaluate", "Loss and metrics of saved weights on a dataset");
  evaluate->footer(
      "Prints one JSON object of logs on stdout. Without CONFIG, uses the run "
      "config stored in the checkpoint.");
  add_config_options(evaluate, config_, overrides_);
  evaluate
      ->add_option("--weights", weights_,
                   "Checkpoint, or Keras weights (.h5, Keras 3 .weights.h5 or .keras)")
      ->required()
      ->check(CLI::ExistingPath);
  evaluate->add_option("--split", split_, "validation (default), test or train");
  evaluate->add_flag("-q,--quiet", quiet_, "No progress output on stderr");
  add_trust_option(evaluate, trust_checkpoint_);
  evaluate->callback([this] {
    selected_ = [this] {
      if (!on_rank_zero("evaluate")) return static_cast<int>(ExitCode::ok);
      InferenceRequest req{
          resolve_config({config_, weights_, false, trust_checkpoint_}, overrides_, quiet_),
          weights_, split_};
      Logs logs = run_evaluation(req);
      std::cout << logs.to_json().dump() << std::endl;
      return static_cast<int>(ExitCode::ok);
    };
  });

  auto* predict = app.add_subcommand("predict", "Model outputs of saved weights on a dataset");
  predict->footer(
      "Writes one row per sample: CSV (default, to stdout), NumPy .npy or JSON Lines (one array "
      "per line, or {\"path\": file, \"outputs\": array} for samples read from files of "
      "their own), chosen by --format or the output's extension.");
  add_config_options(predict, config_, overrides_);
  predict
      ->add_option("--weights", weights_,
                   "Checkpoint, or Keras weights (.h5, Keras 3 .weights.h5 or .keras)")
      ->required()
      ->check(CLI::ExistingPath);
  predict->add_option("--split", split_, "validation (default), test or train");
  predict->add_option("-o,--output", output_, "Output file (.csv, .npy, .jsonl); '-' = stdout");
  predict->add_option("--format", format_, "csv, npy or jsonl (default: by the output's extension)");
  add_trust_option(predict, trust_checkpoint_);
  predict->callback([this] {
    selected_ = [this] {
      if (!on_rank_zero("predict")) return static_cast<int>(ExitCode::ok);
      RunConfig rc = resolve_config({config_, weights_, false, trust_checkpoint_}, overrides_, true);
      const PredictionFormat format = prediction_format(format_, output_);
      if (output_ != "-") {
        refuse_bad_output(output_, {weights_, config_}, "--output");
        refuse_output_over_data(output_, {rc.data.train, rc.data.validation, rc.data.test},
                                rc.base_dir, "--output");
        // Before the predictions are computed, not after.
        const fs::path folder = fs::absolute(output_).parent_path();
        if (!fs::is_directory(folder))
          throw ConfigError("--output", "the folder " + folder.string() + " of " + output_ +
                                            " does not exist");
      }
      const Predictions out = run_prediction({rc, weights_, split_});
      write_predictions(out.values, out.files, output_, format);
      if (format == PredictionFormat::npy && !out.files.empty())
        spdlog::warn(
            "{} holds the predictions alone: its rows follow the data's {} files in "
            "the order it reads them (--format csv or jsonl writes each row's file)",
            output_, out.files.size());
      return static_cast<int>(ExitCode::ok);
    };
  });

  auto* summary = app.add_subcommand(
      "summary", "Print the model's layers and parameter counts, and what each device holds");
  add_config_options(summary, config_, overrides_);
  summary->add_flag("--expand-nested", expand_nested_,
                    "Also list the layers of the models nested in the model, after each");
  summary->callback([this] {
    selected_ = [this] {
      RunConfig rc = resolve_config({config_, "", true}, overrides_, true);
      auto model = build_run_model(rc);
      std::cout << model->summary(expand_nested_) << "\n";
      // The placement needs the plan's devices: a plan this machine lacks (a GPU config on a
      // laptop) still gets the model's summary. A wrong "pipeline" is the config's error.
      try {
        std::cout << placement_summary(rc);
      } catch (const ConfigError& e) {
        if (e.path() != rc.devices_path) throw;
        std::cout << "Placement not shown on this machine: " << e.what() << "\n";
      }
      return static_cast<int>(ExitCode::ok);
    };
  });

  auto* data = app.add_subcommand("data", "Look at a run's data");
  data->require_subcommand(1);
  auto* bench = data->add_subcommand(
      "bench", "Time the input pipeline alone and the training step alone: which bounds the run");
  bench->footer(
      "Reads the training data as a run would (shuffle, prefetch, workers, cache, mixing) for "
      "--seconds and drops the batches, then trains the model on one batch of it held in memory "
      "for --seconds. The slower of the two bounds the run.");
  add_config_options(bench, config_, overrides_);
  bench->add_option("--seconds", bench_seconds_, "Seconds for each of the two measurements")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  bench->add_flag("--json", json_, "Print one JSON object");
  bench->callback([this] {
    selected_ = [this] {
      const RunConfig rc = resolve_config({config_, "", true}, overrides_, true);
      print_data_bench(run_data_bench(rc, bench_seconds_), json_);
      return static_cast<int>(ExitCode::ok);
    };
  });

  auto* check = app.add_subcommand("check", "Check a run config without training");
  check->footer(
      "Builds everything `tandem train` checks before it starts (model, device plan, datasets, "
      "plugins and their options) and prints a summary, or the first error with its JSON path. "
      "--json prints one JSON object: {\"ok\": true, \"summary\": ...} or {\"ok\": false, "
      "\"error\": ..., \"path\": ...}.\nExit codes: 0 valid, 2 invalid.");
  add_config_options(check, config_, overrides_, false);
  check->add_flag("--json", json_, "Print one JSON object (for tandem-gui and scripts)");
  check->callback([this] {
    selected_ = [this] {
      if (!json_) {
        const nlohmann::json summary =
            check_run_config(resolve_config({config_, "", true}, overrides_, true),
                             check_plugins_in_child);
        std::cout << "ok: " << summary["name"].get<std::string>() << ", " << summary["parameters"]
                  << " parameters, devices " << summary["devices"]["plan"].get<std::string>()
                  << " in " << summary["precision"].get<std::string>() << ", batch "
                  << summary["batch_size"] << ", " << summary["train_samples"]
                  << " training samples, " << summary["plugins"].size()
                  << (summary["plugins"].size() == 1 ? " plugin\n" : " plugins\n");
        return static_cast<int>(ExitCode::ok);
      }
      std::string line;
      int code = static_cast<int>(ExitCode::ok);
      try {
        const nlohmann::json out = {
            {"ok", true},
            {"summary", check_run_config(resolve_config({config_, "", true}, overrides_, true),
                                         check_plugins_in_child)}};
        line = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } catch (const ConfigError& e) {
        line = check_failure_line(e.what(), e.path());
        code = static_cast<int>(e.code());
      } catch (const Error& e) {
        line = check_failure_line(e.what());
        code = static_cast<int>(e.code());
      } catch (const std::exception& e) {  // not Tandem's: still one JSON object
        line = check_failure_line(e.what());
        code = static_cast<int>(ExitCode::run_failed);
      }
      std::cout << line << std::endl;
      return code;
    };
  });

  add_devices_command(app, selected_, interrupt_);
  add_inspect_command(app, selected_);
  add_plugins_command(app, selected_);
  add_plugin_child_command(app, selected_);
  add_optimizers_command(app, selected_);
  add_import_command(app, selected_);
  add_export_command(app, selected_);
  add_check_options_command(app, selected_);
}

bool Commands::reads_interrupts(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands())
    if (sub->get_name() == "train" || sub->get_name() == "devices") return true;
  return false;
}

int Commands::run() {
  return selected_ ? selected_() : static_cast<int>(ExitCode::bad_input);
}

std::string check_failure_line(const std::string& error, const nlohmann::json& path) {
  // An error may quote the user's bytes, valid UTF-8 or not: those become U+FFFD.
  return nlohmann::json{{"ok", false}, {"error", error}, {"path", path}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::app
