// replica_stats: what the meta view is for — publishes, every `every_n_batches` optimizer steps,
// one "replica_stats" event with each replica's device, slice of the batch (samples), forward +
// backward time of the last step and device memory in use (NVML, for CUDA devices; null on CPU
// and where NVML does not answer). The replicas' samples add up to the global batch.
//
// Per-replica facts exist only on the meta-model, so this plugin refuses target "template".
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "tandem/devices.hpp"
#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

using nlohmann::json;
using tandem::CallbackContext;
using tandem::Logs;

class ReplicaStats : public tandem::Callback {
 public:
  explicit ReplicaStats(std::int64_t every) : every_(every) {}
  std::string name() const override { return "replica_stats"; }

  void on_train_batch_end(CallbackContext& ctx, std::int64_t batch, const Logs&) override {
    const auto& st = ctx.state();
    if (st.step % every_ != 0) return;
    const auto facts = ctx.target().replicas();
    std::optional<tandem::DeviceSample> sample;
    json replicas = json::array();
    std::int64_t total = 0;
    for (const auto& f : facts) {
      json memory = nullptr;
      if (f.device.rfind("cuda:", 0) == 0) {
        if (!sample) {
          if (!report_) report_ = tandem::discover_devices();
          sample = tandem::sample_devices(*report_);
        }
        const int index = std::stoi(f.device.substr(5));
        for (const auto& g : sample->gpus)
          if (g.index == index && g.memory_used_bytes) memory = *g.memory_used_bytes;
      }
      json entry = {{"replica", f.replica},
                    {"rank", f.rank},
                    {"device", f.device},
                    {"samples", f.samples},
                    {"step_seconds", f.step_seconds},
                    {"memory_used_bytes", memory}};
      if (!f.stages.empty()) {
        // A pipeline: each stage's worker, layers and compute time, and the bubble — the
        // fraction of the step its workers waited, 1 - sum(stage seconds) / (S * step).
        json stages = json::array();
        double busy = 0;
        for (const auto& s : f.stages) {
          stages.push_back({{"device", s.device},
                            {"index", s.device_index},
                            {"layers", s.layers},
                            {"parameters", s.parameters},
                            {"step_seconds", s.step_seconds}});
          busy += s.step_seconds;
        }
        entry["stages"] = stages;
        const double span = static_cast<double>(f.stages.size()) * f.step_seconds;
        entry["bubble"] = span > 0 ? std::max(0.0, 1.0 - busy / span) : 0.0;
      }
      replicas.push_back(entry);
      total += f.samples;
    }
    ctx.publish("replica_stats", {{"epoch", st.epoch + 1},
                                  {"batch", batch + 1},
                                  {"step", st.step},
                                  {"plan", ctx.target().plan().text},
                                  {"batch_size", total},
                                  {"replicas", replicas}});
  }

 private:
  std::int64_t every_;
  std::optional<tandem::DeviceReport> report_;  // discovered on the first CUDA replica
};

class ReplicaStatsPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"replica_stats",
            "1.0.0",
            "Publishes per-replica device, batch slice, step time and memory (needs target meta)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"every_n_batches",
                {{"type", "integer"},
                 {"minimum", 1},
                 {"default", 1},
                 {"description", "publish after every N-th optimizer step"}}}}}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    if (setup.target != tandem::Target::meta)
      throw tandem::ConfigError(setup.config_path + ".target",
                                "replica_stats reports per-replica facts, which only the "
                                "meta-model has: set \"target\": \"meta\"");
    return std::make_shared<ReplicaStats>(
        static_cast<std::int64_t>(options.at("every_n_batches").get<double>()));
  }
};

}  // namespace

TANDEM_PLUGIN(ReplicaStatsPlugin)
