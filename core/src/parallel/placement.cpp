#include "parallel/placement.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "parallel/replica_model.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

constexpr std::int64_t kFloat = sizeof(float);

// The most micro-batches stage s of S holds activations for at once.
int in_flight(const PipelinePlan& pipeline, int s) {
  const int S = pipeline.stage_count(), M = pipeline.microbatches;
  return pipeline.schedule == PipelineSchedule::gpipe ? M : std::min(M, S - s);
}

std::int64_t trainable_count(const Model& model, std::size_t l) {
  std::int64_t n = 0;
  if (!model.layer(l).trainable()) return 0;
  for (Parameter* p : const_cast<Layer&>(model.layer(l)).parameters())
    if (p->trainable) n += p->value.size();
  return n;
}

std::string device_label(const DeviceSpec& d) {
  return d.kind == DeviceKind::cpu ? "cpu worker " + std::to_string(d.index) : d.name();
}

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

std::vector<DevicePlacement> place_on_devices(const Model& model, const DevicePlan& plan,
                                              const std::optional<PipelinePlan>& pipeline,
                                              std::int64_t batch, int optimizer_slots,
                                              const std::vector<std::int64_t>& call_bytes_per_row) {
  if (call_bytes_per_row.size() != model.call_count())
    throw std::invalid_argument("place_on_devices: " + std::to_string(call_bytes_per_row.size()) +
                                " activation sizes for " + std::to_string(model.call_count()) +
                                " calls");
  const PipelinePlan stages =
      pipeline ? *pipeline : PipelinePlan{PipelineLayout::whole(model), 1, {}};
  const int S = stages.stage_count();
  const int replicas = std::max(1, plan.size() / S);
  const auto shards = ReplicaModel::split(batch, replicas);
  std::vector<DevicePlacement> out;
  for (int r = 0; r < replicas; ++r) {
    const std::int64_t rows = (shards[static_cast<std::size_t>(r)] + stages.microbatches - 1) /
                              stages.microbatches;  // the largest micro-batch
    for (int s = 0; s < S; ++s) {
      const auto i = static_cast<std::size_t>(s);
      DevicePlacement d;
      d.device = plan.replicas[static_cast<std::size_t>(r * S + s)];
      d.replica = r;
      d.stage = s;
      d.parameters = stages.layout.parameters[i];
      std::int64_t trainable = 0;
      for (std::size_t l : stages.layout.layers[i]) {
        d.layers.push_back(model.layer(l).name());
        trainable += trainable_count(model, l);
      }
      std::int64_t bytes_per_row = 0;
      for (std::size_t k : stages.layout.calls[i]) bytes_per_row += call_bytes_per_row[k];
      d.memory.weights = d.parameters * kFloat;
      // A pipeline keeps a second gradient buffer: each micro-batch's, added into the sum.
      d.memory.gradients = trainable * kFloat * (pipeline ? 2 : 1);
      d.memory.optimizer = trainable * kFloat * optimizer_slots;
      d.memory.activations = bytes_per_row * rows * in_flight(stages, s);
      out.push_back(std::move(d));
    }
  }
  return out;
}

void check_placement_fits(const std::vector<DevicePlacement>& placement,
                          const DeviceReport& report, std::optional<std::int64_t> limit) {
  for (const DevicePlacement& d : placement) {
    if (d.device.kind != DeviceKind::cuda) continue;
    std::int64_t holds = limit.value_or(0);
    std::string source = "TANDEM_CUDA_MEMORY_LIMIT";
    for (const GpuInfo& gpu : report.gpus)
      if (gpu.index == d.device.index && gpu.memory_bytes > 0 &&
          (!limit || gpu.memory_bytes < *limit)) {
        holds = gpu.memory_bytes;
        source = gpu.name;
      }
    if (holds <= 0 || d.memory.total() <= holds) continue;
    throw ConfigError(
        "devices",
        d.device.name() + " (replica " + std::to_string(d.replica) + ", stage " +
            std::to_string(d.stage) + ") needs an estimated " + mib(d.memory.total()) +
            " — weights " + mib(d.memory.weights) + ", gradients " + mib(d.memory.gradients) +
            ", optimizer " + mib(d.memory.optimizer) + ", activations " +
            mib(d.memory.activations) + " — but has " + mib(holds) + " (" + source +
            "); use a smaller batch, more micro-batches, or more stages (docs/pipeline.md)");
  }
}

nlohmann::json placement_json(const std::vector<DevicePlacement>& placement) {
  nlohmann::json out = nlohmann::json::array();
  for (const DevicePlacement& d : placement)
    out.push_back({{"device", d.device.name()},
                   {"index", d.device.index},
                   {"replica", d.replica},
                   {"stage", d.stage},
                   {"layers", d.layers},
                   {"parameters", d.parameters},
                   {"memory",
                    {{"weights", d.memory.weights},
                     {"gradients", d.memory.gradients},
                     {"optimizer", d.memory.optimizer},
                     {"activations", d.memory.activations},
                     {"total", d.memory.total()}}}});
  return out;
}

std::string placement_table(const std::vector<DevicePlacement>& placement) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-14s %7s %5s %11s %12s %12s  ", "Device", "Replica",
                "Stage", "Parameters", "Weights", "Memory");
  out << line << "Layers\n";
  for (const DevicePlacement& d : placement) {
    std::string layers;
    for (std::size_t i = 0; i < d.layers.size(); ++i) {
      if (i == 3 && d.layers.size() > 4) {
        layers += ", ... " + d.layers.back();
        break;
      }
      layers += (i ? ", " : "") + d.layers[i];
    }
    std::snprintf(line, sizeof line, "%-14s %7d %5d %11lld %12s %12s  ",
                  device_label(d.device).c_str(), d.replica, d.stage,
                  static_cast<long long>(d.parameters), mib(d.memory.weights).c_str(),
                  mib(d.memory.total()).c_str());
    out << line << layers << "\n";
  }
  return out.str();
}

}  // namespace tandem
