// checkpoint: Keras ModelCheckpoint plus Lightning's top-k, last and time triggers, with
// asynchronous, crash-safe writes and an index of the checkpoints kept (checkpoints.json).
//
// When it saves (one trigger per callback):
//   save_freq "epoch" (default)  at the end of every `every_n_epochs`-th epoch;
//   save_freq N                  every N training batches (steps since the run began);
//   train_time_interval S        at the first batch end S seconds after the previous save.
// What it keeps: every save (save_top_k -1), none (0) or the k best by `monitor` (k >= 1);
// save_best_only saves only when `monitor` improves on the best so far (or on
// initial_value_threshold); save_last also keeps <folder>/last.h5 = the newest save.
// The file holds the callback's target ("template": loads on any device plan; "meta": records the
// device plan) and, unless save_weights_only, the training state to resume from.
// Documentation: docs/checkpoint-format.md, "The checkpoint plugin".
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/checkpoint_writer.hpp"
#include "checkpoint/filepath_template.hpp"
#include "renamed_option.hpp"
#include "tandem/error.hpp"
#include "tandem/plugin.hpp"
#include "tandem/run_files.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tandem::checkpoint::CheckpointWriter;
using tandem::checkpoint::FieldValue;
using tandem::checkpoint::FilepathTemplate;
using tandem::checkpoint::WriteJob;
using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultFilepath = "checkpoints/epoch{epoch:03d}-step{step}.h5";
constexpr const char* kLastFile = "last.h5";

struct Options {
  std::string filepath;
  std::string filepath_option;  // its config path ("callbacks[1].options.filepath"), for errors
  std::string monitor;
  bool maximize = false;
  bool save_best_only = false;
  bool save_weights_only = false;
  std::int64_t save_freq = 0;  // 0 = "epoch"
  std::optional<double> initial_value_threshold;
  int verbose = 0;
  int save_top_k = -1;
  bool save_last = false;
  int every_n_epochs = 1;
  double train_time_interval = 0;  // 0 = off
  bool async = true;
};

enum class Trigger { epoch, batch, time };

const char* trigger_name(Trigger t) {
  return t == Trigger::epoch ? "epoch" : t == Trigger::batch ? "save_freq" : "train_time_interval";
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%0.5f", v);
  return buf;
}

class ModelCheckpoint : public tandem::Callback {
 public:
  ModelCheckpoint(Options options, tandem::Target target)
      : o_(std::move(options)), tpl_(o_.filepath), target_(target), writer_(o_.async) {
    best_ =
        o_.initial_value_threshold.value_or(o_.maximize ? -std::numeric_limits<double>::infinity()
                                                        : std::numeric_limits<double>::infinity());
  }

  std::string name() const override { return "checkpoint"; }

  void on_train_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    publish_finished(ctx);
    last_save_ = Clock::now();
    if (ctx.state().step > 0) adopt_previous(ctx);
  }

  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t batch,
                          const tandem::Logs& logs) override {
    publish_finished(ctx);
    // The trainer shows callbacks a batch whose loss is not finite without applying it: there is
    // no new step to save.
    if (auto loss = logs.get("loss"); loss && !std::isfinite(*loss)) return;
    if (o_.save_freq > 0) {
      // Every N steps since the run began: Keras's count of batches for a new run, and the same
      // rhythm after resuming (Lightning's every_n_train_steps).
      if (ctx.state().step % o_.save_freq != 0) return;
      save(ctx, logs, Trigger::batch, ctx.state().epoch, batch);
    } else if (o_.train_time_interval > 0) {
      const auto now = Clock::now();
      if (std::chrono::duration<double>(now - last_save_).count() < o_.train_time_interval) return;
      last_save_ = now;
      save(ctx, logs, Trigger::time, ctx.state().epoch, batch);
    }
  }

  void on_epoch_end(tandem::CallbackContext& ctx, int epoch, const tandem::Logs& logs) override {
    publish_finished(ctx);
    if (o_.save_freq > 0 || o_.train_time_interval > 0) return;
    if ((epoch + 1) % o_.every_n_epochs != 0) return;
    save(ctx, logs, Trigger::epoch, epoch, -1);
  }

  void on_train_end(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    writer_.drain();
    publish_finished(ctx);
  }

 private:
  struct Kept {
    std::string path;
    double value;
  };

  bool better(double value, double than) const {
    if (std::isnan(value)) return false;
    return o_.maximize ? value > than : value < than;
  }

  fs::path resolve(const tandem::CallbackContext& ctx, const std::string& text) const {
    fs::path p(text);
    if (p.is_relative()) {
      const fs::path base = ctx.run_dir().empty() ? fs::current_path() : ctx.run_dir();
      p = base / p;
    }
    return fs::absolute(p).lexically_normal();
  }

  void warn_once(bool& warned, const std::string& text) {
    if (warned) return;
    warned = true;
    std::fprintf(stderr, "checkpoint: warning: %s\n", text.c_str());
  }

  static std::string keys_of(const tandem::Logs& logs) {
    std::string s;
    for (const auto& [k, v] : logs.items()) s += (s.empty() ? "" : ", ") + k;
    return s.empty() ? "none" : s;
  }

  // `epoch` is 0-based (the hook's); `batch` is the 0-based batch of a batch-level trigger.
  void save(tandem::CallbackContext& ctx, const tandem::Logs& logs, Trigger trigger, int epoch,
            std::int64_t batch) {
    const tandem::TrainingState& st = ctx.state();
    const int epoch1 = epoch + 1;
    const std::string where =
        "Epoch " + std::to_string(epoch1) +
        (trigger == Trigger::epoch ? "" : ", batch " + std::to_string(batch + 1));

    // The file name first (as Keras does): a template naming a missing key is an error whether
    // or not this save happens.
    std::map<std::string, FieldValue> values = {{"epoch", std::int64_t{epoch1}},
                                                {"step", std::int64_t{st.step}}};
    if (trigger != Trigger::epoch) values["batch"] = std::int64_t{batch + 1};
    for (const auto& [k, v] : logs.items())
      if (!values.count(k)) values[k] = v;
    // The rate in force, under Keras 2's and Keras 3's names, unless the logs carry them.
    for (const char* name : {"lr", "learning_rate"})
      if (!values.count(name)) values[name] = ctx.learning_rate();
    fs::path path;
    try {
      path = resolve(ctx, tpl_.format(values));
      tandem::refuse_run_file(ctx.run_dir(), path, o_.filepath_option);
    } catch (const std::out_of_range& e) {
      std::string available;
      for (const auto& [k, v] : values) available += (available.empty() ? "" : ", ") + k;
      throw tandem::RunError("filepath \"" + tpl_.text() + "\" uses {" + e.what() +
                             "}, which is not available at " + where + " (available: " + available +
                             "). Validation values (val_*) exist only at epoch ends "
                             "and with validation data; {batch} only when saving by batch.");
    } catch (const std::invalid_argument& e) {
      throw tandem::RunError("filepath \"" + tpl_.text() + "\": " + e.what());
    }

    std::optional<double> value = logs.get(o_.monitor);
    const bool usable = value && !std::isnan(*value);
    const bool improved = usable && better(*value, best_);
    const double previous_best = best_;
    if (improved) best_ = *value;

    bool write_main = true;
    std::optional<std::size_t> evict;
    if (o_.save_best_only) {
      if (!value) {
        // Keras 3 saves then (model_checkpoint.py, _should_save_model): a misspelt monitor
        // loses no checkpoint (tf.keras 2.15 skipped every save).
        warn_once(warned_best_only_, "can save best model only with " + o_.monitor +
                                         " available; saving every time, as Keras 3 does (the "
                                         "logs have: " +
                                         keys_of(logs) + ")");
      } else if (!improved) {
        if (o_.verbose > 0)
          std::fprintf(stderr, "%s: %s did not improve from %s\n", where.c_str(),
                       o_.monitor.c_str(), number_text(previous_best).c_str());
        write_main = false;
      }
    }
    if (write_main && o_.save_top_k == 0) write_main = false;
    if (write_main && o_.save_top_k > 0) {
      if (!usable) {
        warn_once(warned_top_k_, "save_top_k ranks checkpoints by " + o_.monitor +
                                     ", which is not available (the logs have: " + keys_of(logs) +
                                     "); not saving");
        write_main = false;
      } else if (o_.initial_value_threshold && !better(*value, *o_.initial_value_threshold)) {
        write_main = false;
      } else {
        // A file written again under the same name replaces its old self, so it is not counted.
        std::optional<std::size_t> worst;
        std::size_t others = 0;
        for (std::size_t i = 0; i < kept_.size(); ++i) {
          if (kept_[i].path == path.string()) continue;
          ++others;
          if (!worst || better(kept_[*worst].value, kept_[i].value)) worst = i;
        }
        if (others >= static_cast<std::size_t>(o_.save_top_k)) {
          if (better(*value, kept_[*worst].value)) {
            evict = worst;
          } else {
            if (o_.verbose > 0)
              std::fprintf(stderr, "%s: %s %s is not in the top %d, not saving\n", where.c_str(),
                           o_.monitor.c_str(), number_text(*value).c_str(), o_.save_top_k);
            write_main = false;
          }
        }
      }
    }
    const bool write_last = o_.save_last;
    if (!write_main && !write_last) return;

    if (write_main && o_.verbose > 0) {
      if (o_.save_best_only)
        std::fprintf(stderr, "%s: %s improved from %s to %s, saving model to %s\n", where.c_str(),
                     o_.monitor.c_str(), number_text(previous_best).c_str(),
                     number_text(*value).c_str(), path.c_str());
      else
        std::fprintf(stderr, "%s: saving model to %s\n", where.c_str(), path.c_str());
    }

    // "A step waits only if the previous write is still running": here, before the capture.
    const double waited = writer_.wait_idle();
    WriteJob job;
    const auto t0 = Clock::now();
    job.data = ctx.target().checkpoint(!o_.save_weights_only);
    const double capture = std::chrono::duration<double>(Clock::now() - t0).count();
    json entry = {{"epoch", epoch1},
                  {"step", st.step},
                  {"batch", trigger == Trigger::epoch ? json(nullptr) : json(batch + 1)},
                  {"trigger", trigger_name(trigger)},
                  {"monitor", o_.monitor},
                  {"value", usable ? json(*value) : json(nullptr)},
                  {"best", improved},
                  {"target", tandem::target_name(target_)},
                  {"resumable", !o_.save_weights_only},
                  {"filepath", tpl_.text()},
                  {"capture_seconds", capture},
                  {"wait_seconds", waited}};
    const fs::path last = path.parent_path() / kLastFile;
    if (write_main) {
      entry["path"] = path.string();
      entry["file"] = path.filename().string();
      entry["last"] = false;
      job.files.push_back(path);
      job.entries.push_back(entry);
      if (o_.save_top_k > 0) {
        const std::string evicted = evict ? kept_[*evict].path : std::string();
        if (evict) job.evict.push_back(evicted);
        std::erase_if(kept_, [&](const Kept& k) {
          return k.path == path.string() || (evict && k.path == evicted);
        });
        kept_.push_back({path.string(), *value});
      }
    }
    if (write_last && !(write_main && path == last)) {
      entry["path"] = last.string();
      entry["file"] = last.filename().string();
      entry["last"] = true;
      job.files.push_back(last);
      job.entries.push_back(entry);
    }
    writer_.submit(std::move(job));
  }

  // The file an index entry of folder `dir` describes, when it is in `dir`: its "file" (a name in
  // the folder, which survives moving the folder), else its "path" when that is in the folder.
  static std::optional<fs::path> file_in(const fs::path& dir, const json& entry) {
    const json file = entry.value("file", json());
    if (file.is_string()) {
      const fs::path name(file.get<std::string>());
      if (name.has_filename() && name == name.filename() && name != "." && name != "..")
        return dir / name;
      return std::nullopt;
    }
    const fs::path path = fs::path(entry["path"].get<std::string>()).lexically_normal();
    if (path.parent_path() == dir.lexically_normal() && path.has_filename()) return path;
    return std::nullopt;
  }

  // Resuming (the state is past step 0): the checkpoints this callback kept before, listed in the
  // index of its folder, count again for top-k and for the best value.
  void adopt_previous(const tandem::CallbackContext& ctx) {
    const fs::path probe = resolve(ctx, tpl_.text());
    const fs::path dir = probe.parent_path();
    if (dir.string().find('{') != std::string::npos) return;  // the folder itself varies
    std::vector<json> entries;
    try {
      entries = tandem::checkpoint::read_index(dir);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "checkpoint: warning: %s; starting a new index\n", e.what());
      return;
    }
    kept_.clear();
    for (const auto& e : entries) {
      if (e.value("filepath", "") != tpl_.text() || e.value("monitor", "") != o_.monitor ||
          e.value("last", false) || e.value("step", std::int64_t{0}) > ctx.state().step)
        continue;
      if (!e.contains("value") || !e["value"].is_number()) continue;
      // Only files of this folder: an index is data, and top-k deletes what it adopts.
      const std::optional<fs::path> file = file_in(dir, e);
      if (!file) {
        std::fprintf(stderr, "checkpoint: warning: ignored an entry of %s/checkpoints.json that "
                             "names a file outside the folder: %s\n",
                     dir.c_str(), e["path"].dump().c_str());
        continue;
      }
      const double v = e["value"].get<double>();
      if (o_.save_top_k > 0) kept_.push_back({file->string(), v});
      if (better(v, best_)) best_ = v;
    }
  }

  void publish_finished(tandem::CallbackContext& ctx) {
    std::vector<json> done;
    try {
      done = writer_.take_finished();
    } catch (const std::exception& e) {
      throw tandem::RunError(e.what());
    }
    for (auto& entry : done) {
      json fields = entry;
      fields.erase("time");
      fields.erase("file");
      fields.erase("filepath");
      ctx.publish("checkpoint_saved", fields);
    }
  }

  Options o_;
  FilepathTemplate tpl_;
  tandem::Target target_;
  CheckpointWriter writer_;
  double best_ = 0;
  std::vector<Kept> kept_;  // save_top_k > 0: the files kept, with their monitored values
  Clock::time_point last_save_ = Clock::now();
  bool warned_best_only_ = false, warned_top_k_ = false;
};

json option(const char* type, json default_value, const std::string& description) {
  return {{"type", type}, {"default", std::move(default_value)}, {"description", description}};
}

class CheckpointPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {
        {"filepath",
         {{"type", "string"},
          {"minLength", 1u},
          {"default", kDefaultFilepath},
          {"description",
           "Where to save: a template with {epoch} (1-based), {step}, {batch} (1-based, when "
           "saving by batch) and any log key, with Python format specs ({epoch:02d}, "
           "{val_loss:.4f}); relative to the run folder"}}},
        {"monitor",
         {{"type", "string"},
          {"minLength", 1u},
          {"default", "val_loss"},
          {"description", "The log value that ranks checkpoints (save_best_only, save_top_k)"}}},
        {"mode",
         {{"type", "string"},
          {"enum", {"auto", "min", "max"}},
          {"default", "auto"},
          {"description",
           "min or max: which direction of `monitor` is better; auto = max for accuracies, auc, "
           "precision, recall and IoU, else min (Keras 3's metric directions)"}}},
        {"save_best_only",
         option("boolean", false,
                "Save only when `monitor` improves on the best value so far; skipped with a "
                "warning when `monitor` is missing from the logs")},
        {"save_weights_only",
         option("boolean", false,
                "Weights only (no /tandem training state: not resumable, no device plan)")},
        {"save_freq",
         {{"type", json::array({"string", "integer"})},
          {"minimum", 1},
          {"maximum", std::int64_t{1} << 53},  // steps a double counts exactly
          {"default", "epoch"},
          {"description",
           "\"epoch\": save at epoch ends; an integer N: every N training batches (steps since "
           "the run began, so counted across epochs and resumes)"}}},
        {"initial_value_threshold",
         {{"type", json::array({"number", "null"})},
          {"default", nullptr},
          {"description",
           "A value of `monitor` a checkpoint must beat to be saved (save_best_only, "
           "save_top_k); null = none"}}},
        {"verbose",
         {{"type", "integer"},
          {"minimum", 0},
          {"maximum", 1},
          {"default", 0},
          {"description", "1: a line on stderr for every save decision"}}},
        {"save_top_k",
         {{"type", "integer"},
          {"minimum", -1},
          {"maximum", 2147483647},  // read as an int
          {"default", -1},
          {"description",
           "-1: keep every checkpoint; 0: none (only last.h5 with save_last); k: the k best "
           "by `monitor`, the others are deleted"}}},
        {"save_last",
         option("boolean", false,
                "Also keep last.h5 (the newest save) next to the checkpoints, at every save "
                "trigger")},
        {"every_n_epochs",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 2147483647},  // read as an int
          {"default", 1},
          {"description", "With save_freq \"epoch\": save every n-th epoch"}}},
        {"period",
         {{"type", json::array({"integer", "null"})},
          {"minimum", 1},
          {"maximum", 2147483647},  // read as an int
          {"default", nullptr},
          {"description",
           "Keras 2's name for every_n_epochs, read as it (with a warning); null = not given"}}},
        {"train_time_interval",
         {{"type", json::array({"number", "null"})},
          {"exclusiveMinimum", 0},
          {"default", nullptr},
          {"description",
           "Save at the first batch end at least this many seconds after the previous save "
           "(instead of save_freq); null = off"}}},
        {"async",
         option("boolean", true,
                "Write on a background thread (the step waits only while the previous write "
                "runs); false: write before the step returns")}};
    return {"checkpoint",
            "1.0.0",
            "Saves checkpoints (Keras ModelCheckpoint with top-k, last, time triggers and "
            "asynchronous, crash-safe writes)",
            {{"type", "object"}, {"additionalProperties", false}, {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    const std::string at = setup.config_path + ".options.";
    Options o;
    o.filepath = options.at("filepath").get<std::string>();
    o.monitor = options.at("monitor").get<std::string>();
    const std::string mode = options.at("mode").get<std::string>();
    o.maximize = mode == "max" || (mode == "auto" && tandem::higher_is_better(o.monitor));
    o.save_best_only = options.at("save_best_only").get<bool>();
    o.save_weights_only = options.at("save_weights_only").get<bool>();
    const json& freq = options.at("save_freq");
    if (freq.is_string()) {
      if (freq.get<std::string>() != "epoch")
        throw tandem::ConfigError(at + "save_freq",
                                  "expected \"epoch\" or a number of batches "
                                  ">= 1, got " +
                                      freq.dump());
    } else {
      o.save_freq = freq.get<std::int64_t>();
    }
    if (!options.at("initial_value_threshold").is_null())
      o.initial_value_threshold = options.at("initial_value_threshold").get<double>();
    o.verbose = options.at("verbose").get<int>();
    o.save_top_k = options.at("save_top_k").get<int>();
    o.save_last = options.at("save_last").get<bool>();
    o.every_n_epochs =
        tandem::plugins::read_renamed_option(options, at, "checkpoint", "period", "every_n_epochs",
                                             "Keras 2", options.at("every_n_epochs").get<int>(), 1);
    if (!options.at("train_time_interval").is_null())
      o.train_time_interval = options.at("train_time_interval").get<double>();
    o.async = options.at("async").get<bool>();

    const int triggers = (o.save_freq > 0) + (o.every_n_epochs != 1) + (o.train_time_interval > 0);
    if (triggers > 1)
      throw tandem::ConfigError(
          at + (o.train_time_interval > 0 ? "train_time_interval" : "every_n_epochs"),
          "save_freq (a number of batches), every_n_epochs and "
          "train_time_interval are exclusive: give one of them");
    std::optional<FilepathTemplate> tpl;
    try {
      tpl.emplace(o.filepath);
    } catch (const std::invalid_argument& e) {
      throw tandem::ConfigError(at + "filepath", e.what());
    }
    if (tpl->uses("batch") && o.save_freq == 0 && o.train_time_interval <= 0)
      throw tandem::ConfigError(at + "filepath",
                                "{batch} is known only when saving by batch (save_freq N or "
                                "train_time_interval); at epoch ends use {epoch} or {step}");
    const fs::path file(o.filepath);
    if (file.filename().empty() || file.filename() == "." || file.filename() == "..")
      throw tandem::ConfigError(at + "filepath", "\"" + o.filepath +
                                                     "\" names a folder; give a file name "
                                                     "(\"ck/{epoch:02d}.h5\")");
    // Formatted once with stand-ins (epoch, step and batch 1, log values 1.0), so that a spec
    // that cannot format them ({epoch:.2}: a precision on an integer) fails here, not after
    // the first epoch.
    std::map<std::string, FieldValue> stand_ins;
    for (const std::string& field : tpl->fields())
      stand_ins[field] = field == "epoch" || field == "step" || field == "batch"
                             ? FieldValue{std::int64_t{1}}
                             : FieldValue{1.0};
    try {
      tpl->format(stand_ins);
    } catch (const std::invalid_argument& e) {
      throw tandem::ConfigError(at + "filepath", "\"" + o.filepath + "\": " + e.what());
    }
    if (file.filename() == tandem::checkpoint::kIndexFile)
      throw tandem::ConfigError(at + "filepath",
                                std::string(tandem::checkpoint::kIndexFile) +
                                    " is the checkpoint index; choose another file name");
    o.filepath_option = at + "filepath";
    if (tpl->constant() && file.is_relative())  // else checked at each save, in the run folder
      tandem::refuse_run_file(".", file, o.filepath_option);
    return std::make_shared<ModelCheckpoint>(std::move(o), setup.target);
  }
};

}  // namespace

TANDEM_PLUGIN(CheckpointPlugin)
