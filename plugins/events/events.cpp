// events: writes the run's event stream (DESIGN.md contract 6) — every event the engine and the
// callbacks publish, as versioned JSON lines, to <run_dir>/events.jsonl and, with "stdout", to
// standard output (`tandem train --events -`). `tandem train` always loads it.
#include <memory>

#include "tandem/event_sink.hpp"
#include "tandem/plugin.hpp"

namespace {

class Events : public tandem::Callback {
 public:
  Events(std::string path, bool to_stdout) : path_(std::move(path)), to_stdout_(to_stdout) {}
  std::string name() const override { return "events"; }

  void on_event(tandem::CallbackContext& ctx, const std::string& event,
                const nlohmann::json& fields) override {
    if (!sink_) {
      sink_ = std::make_unique<tandem::EventSink>();
      std::filesystem::path file = path_;
      if (file.is_relative() && !ctx.run_dir().empty()) file = ctx.run_dir() / file;
      if (!path_.empty()) sink_->open_file(file);
      sink_->also_stdout(to_stdout_);
    }
    sink_->emit(event, fields);
  }

 private:
  std::string path_;
  bool to_stdout_;
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
                 {"description", "also write every event to standard output"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<Events>(options.at("path").get<std::string>(),
                                    options.at("stdout").get<bool>());
  }
};

}  // namespace

TANDEM_PLUGIN(EventsPlugin)
