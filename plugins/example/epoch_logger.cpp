// epoch_logger — the example plugin: copy this folder to start your own (docs/plugins.md).
//
// Writes one line per epoch (every `every` epochs) with the chosen metrics to a text file in the
// run folder:
//
//   epoch=1 loss=0.512345 accuracy=0.81 val_loss=0.47 val_accuracy=0.83
//
// With "target": "meta" in the run config it also writes the number of replicas and the slowest
// replica's step time: the meta view sees the device plan, the template view does not.
//
// A plugin is: a Callback (the hooks), a CallbackPlugin (name, version, description, an options
// schema, and create()), and one TANDEM_PLUGIN(...) line that exports it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <tandem/error.hpp>
#include <tandem/plugin.hpp>

namespace {

struct Options {
  std::string file;                  // relative to the run folder
  std::vector<std::string> metrics;  // empty: every metric in the epoch's logs
  int every = 1;
  bool append = false;
  int precision = 6;
};

class EpochLogger : public tandem::Callback {
 public:
  explicit EpochLogger(Options options) : opt_(std::move(options)) {}
  std::string name() const override { return "epoch_logger"; }

  void on_train_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    std::filesystem::path path = opt_.file;
    if (path.is_relative() && !ctx.run_dir().empty()) path = ctx.run_dir() / path;
    out_.open(path, opt_.append ? std::ios::app : std::ios::trunc);
    // An exception from a hook stops the run with an error naming this callback and the hook.
    if (!out_)
      throw tandem::RunError("epoch_logger: cannot open " + path.string() + " for writing");
  }

  void on_epoch_end(tandem::CallbackContext& ctx, int epoch, const tandem::Logs& logs) override {
    if ((epoch + 1) % opt_.every != 0) return;
    std::ostringstream line;
    line.precision(opt_.precision);
    line << "epoch=" << epoch + 1;  // hooks get 0-based epochs, as in Keras; people count from 1
    if (opt_.metrics.empty()) {
      for (const auto& [key, value] : logs.items()) line << ' ' << key << '=' << value;
    } else {
      for (const auto& key : opt_.metrics) {
        const auto value = logs.get(key);
        line << ' ' << key << '=';
        if (value)
          line << *value;
        else
          line << "NA";  // e.g. val_loss in a run without validation data
      }
    }
    if (ctx.target().target() == tandem::Target::meta) {
      const auto replicas = ctx.target().replicas();
      double slowest = 0;
      for (const auto& r : replicas) slowest = std::max(slowest, r.step_seconds);
      line << " replicas=" << replicas.size() << " slowest_step_s=" << slowest;
    }
    out_ << line.str() << '\n';
    out_.flush();  // a crash later in the run keeps the lines written so far
    if (!out_) throw tandem::RunError("epoch_logger: write failed");
  }

  void on_train_end(tandem::CallbackContext&, const tandem::Logs&) override { out_.close(); }

 private:
  Options opt_;
  std::ofstream out_;
};

class EpochLoggerPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    // The schema is checked when the plugin loads; options are validated against it (defaults
    // filled in) before create() sees them. `tandem plugins --json` prints it; tandem-gui builds
    // its option form from it. docs/plugins.md lists the keywords Tandem supports.
    return {"epoch_logger",
            "1.0.0",
            "Writes one line per epoch with the chosen metrics to a text file (the example plugin)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"file",
                {{"type", "string"},
                 {"minLength", 1},
                 {"default", "epochs.log"},
                 {"description", "output file, relative to the run folder"}}},
               {"metrics",
                {{"type", "array"},
                 {"items", {{"type", "string"}, {"minLength", 1}}},
                 {"default", nlohmann::json::array()},
                 {"description", "metrics to write, in order (empty: all of them)"}}},
               {"every",
                {{"type", "integer"},
                 {"minimum", 1},
                 {"maximum", 2147483647},  // read as an int
                 {"default", 1},
                 {"description", "write a line every N epochs"}}},
               {"append",
                {{"type", "boolean"},
                 {"default", false},
                 {"description", "append to the file instead of replacing it"}}},
               {"precision",
                {{"type", "integer"},
                 {"minimum", 1},
                 {"maximum", 17},
                 {"default", 6},
                 {"description", "significant digits of each value"}}}}}}};
  }

  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup& setup) const override {
    Options opt;
    opt.file = options.at("file").get<std::string>();
    opt.metrics = options.at("metrics").get<std::vector<std::string>>();
    opt.every = options.at("every").get<int>();
    opt.append = options.at("append").get<bool>();
    opt.precision = options.at("precision").get<int>();
    // What the schema cannot say is checked here, with the option's JSON path in the error.
    std::set<std::string> seen;
    for (const auto& m : opt.metrics)
      if (!seen.insert(m).second)
        throw tandem::ConfigError(setup.config_path + ".options.metrics",
                                  "'" + m + "' is listed twice");
    return std::make_shared<EpochLogger>(std::move(opt));
  }
};

}  // namespace

TANDEM_PLUGIN(EpochLoggerPlugin)
