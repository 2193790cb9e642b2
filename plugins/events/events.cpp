// events: writes the run's event stream (docs/design.md contract 6) — every event the engine and
// the callbacks publish, as versioned JSON lines, to <run_dir>/events.jsonl and, with "stdout",
// to standard output (`tandem train --events -`). `tandem train` always loads it. Every
// "device_stats_seconds" of training it also publishes a `device_stats` event: CPU utilisation
// and memory, and per GPU utilisation, memory, temperature and power (NVML), of this machine.
#include <chrono>
#include <memory>
#include <optional>

#include "tandem/devices.hpp"
#include "tandem/event_sink.hpp"
#include "tandem/plugin.hpp"
#include "tandem/run_files.hpp"

namespace {

class Events : public tandem::Callback {
 public:
  using Clock = std::chrono::steady_clock;
  Events(std::string path, bool to_stdout, double device_stats_seconds, std::string option)
      : path_(std::move(path)),
        to_stdout_(to_stdout),
        device_stats_seconds_(device_stats_seconds),
        option_(std::move(option)) {}
  std::string name() const override { return "events"; }

  void on_train_begin(tandem::CallbackContext&, const tandem::Logs&) override {
    if (device_stats_seconds_ <= 0) return;
    report_ = tandem::discover_devices();
    tandem::sample_devices(*report_);  // the baseline CPU utilisation is measured against
    last_stats_ = Clock::now();
  }

  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t batch,
                          const tandem::Logs&) override {
    if (!report_ ||
        std::chrono::duration<double>(Clock::now() - last_stats_).count() < device_stats_seconds_)
      return;
    last_stats_ = Clock::now();
    const tandem::DeviceSample sample = tandem::sample_devices(*report_);
    nlohmann::json fields = tandem::to_json(*report_, &sample)["sample"];
    // The reading's own time: the event's "time" is when it is written, after the reading and
    // the JSON, so only "sampled_at" keeps the interval between readings.
    fields["sampled_at"] = fields["time"];
    fields.erase("time");
    fields["epoch"] = ctx.state().epoch + 1;
    fields["batch"] = batch + 1;
    fields["step"] = ctx.state().step;
    ctx.publish("device_stats", fields);
  }

  void on_event(tandem::CallbackContext& ctx, const std::string& event,
                const nlohmann::json& fields) override {
    if (!sink_) {
      sink_ = std::make_unique<tandem::EventSink>();
      std::filesystem::path file = path_;
      if (!path_.empty()) tandem::refuse_run_file(ctx.run_dir(), file, option_, kOwnFile);
      if (file.is_relative() && !ctx.run_dir().empty()) file = ctx.run_dir() / file;
      if (!path_.empty()) sink_->open_file(file);
      sink_->also_stdout(to_stdout_);
    }
    sink_->emit(event, fields);
  }

 private:
  static constexpr tandem::RunFile kOwnFile = tandem::RunFile::event_stream;
  std::string path_;
  bool to_stdout_;
  double device_stats_seconds_;
  std::string option_;  // the path option's config path, for errors
  std::optional<tandem::DeviceReport> report_;
  Clock::time_point last_stats_;
  std::unique_ptr<tandem::EventSink> sink_;
};

class EventsPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"events",
            "1.0.0",
            "Writes the JSON-lines event stream (schema 1) of the run",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"path",
                {{"type", "string"},
                 {"default", "events.jsonl"},
                 {"description", "file, relative to the run folder; \"\" for none"}}},
               {"stdout",
                {{"type", "boolean"},
                 {"default", false},
                 {"description", "also write every event to standard output"}}},
               {"device_stats_seconds",
                {{"type", "number"},
                 {"minimum", 0},
                 {"default", 10},
                 {"description",
                  "publish a device_stats event (CPU, memory, GPUs of this machine) this often "
                  "during training; 0: never"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup& setup) const override {
    const std::string path = options.at("path").get<std::string>();
    const std::string option = setup.config_path + ".options.path";
    if (!path.empty() && std::filesystem::path(path).is_relative())
      tandem::refuse_run_file(".", path, option, tandem::RunFile::event_stream);
    return std::make_shared<Events>(path, options.at("stdout").get<bool>(),
                                    options.at("device_stats_seconds").get<double>(), option);
  }
};

}  // namespace

TANDEM_PLUGIN(EventsPlugin)
