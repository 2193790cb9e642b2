// The device registry: CPU facts from /proc, GPUs from the CUDA module, live readings from
// /proc/stat, /proc/meminfo and NVML; JSON and table renderings.
#include <sched.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "backend/ops.hpp"
#include "parallel/cuda_module.hpp"
#include "parallel/nvml.hpp"
#include "tandem/devices.hpp"
#include "util/utc_time.hpp"

namespace tandem {

namespace {

using nlohmann::json;

std::string trim(const std::string& s) {
  const char* space = " \t\r\n";
  auto first = s.find_first_not_of(space);
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

// The first "model name" in /proc/cpuinfo; other architectures name the CPU differently, and
// the machine type from uname is the last resort.
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::map<std::string, std::string> fallbacks;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    std::string value = trim(line.substr(colon + 1));
    if (value.empty()) continue;
    if (key == "model name") return value;
    if ((key == "Hardware" || key == "cpu model" || key == "cpu") && !fallbacks.count(key))
      fallbacks[key] = value;
  }
  for (const char* key : {"cpu model", "Hardware", "cpu"})
    if (fallbacks.count(key)) return fallbacks[key];
  struct utsname u {};
  if (uname(&u) == 0) return u.machine;
  return "unknown CPU";
}

// CPUs this process may run on (a container or taskset may allow fewer than the machine has).
int usable_cores() {
  for (int n = 1024; n <= 1 << 20; n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) break;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      int count = CPU_COUNT_S(size, set);
      CPU_FREE(set);
      return count;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;  // EINVAL: the mask is too small for the kernel's; grow it
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// A /proc/meminfo field in bytes ("MemTotal:  16318208 kB"); 0 when absent.
std::int64_t meminfo_bytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  const std::string prefix = field + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    std::int64_t value = 0;
    std::string unit;
    fields >> value >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return 0;
}

struct CpuTimes {
  unsigned long long busy = 0, total = 0;
};

// The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal (guest
// time is already counted in user and nice).
std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  unsigned long long v[8] = {};
  for (auto& x : v)
    if (!(in >> x)) return std::nullopt;
  CpuTimes t;
  for (auto x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];  // minus idle and iowait
  return t;
}

// CPU utilisation since the previous call in this process; null on the first call.
std::optional<double> cpu_utilization_since_last() {
  static std::mutex mutex;
  static std::optional<CpuTimes> previous;
  std::lock_guard lock(mutex);  // read under the lock so that readings stay in order
  std::optional<CpuTimes> now = read_cpu_times();
  std::optional<double> result;
  if (now && previous && now->total > previous->total && now->busy >= previous->busy) {
    double percent = 100.0 * static_cast<double>(now->busy - previous->busy) /
                     static_cast<double>(now->total - previous->total);
    result = std::round(std::clamp(percent, 0.0, 100.0) * 10.0) / 10.0;
  }
  if (now) previous = now;
  return result;
}

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json positive_or_null(std::int64_t v) {
  return v > 0 ? json(v) : json(nullptr);
}
json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

// "7.8 GiB"; "-" when unknown.
std::string format_bytes(std::optional<std::int64_t> bytes) {
  if (!bytes || *bytes < 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(*bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

std::string format_number(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, format, *v);
  return buffer;
}

// Display width of UTF-8 text (every code point counts as one column; enough for "°").
std::size_t display_width(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

const GpuSample* sample_for(const DeviceSample* sample, int index) {
  if (!sample) return nullptr;
  for (const GpuSample& g : sample->gpus)
    if (g.index == index) return &g;
  return nullptr;
}

// The precisions the CPU backend computes in on this machine.
std::vector<std::string> cpu_precisions() {
  std::vector<std::string> out{"fp32"};
  if (backend::cpu_precision_unavailable(Precision::bf16).empty()) out.push_back("bf16");
  return out;
}

// The precisions the CUDA backend computes in on a GPU: TF32 and bfloat16 tensor cores from
// Ampere on (the module's kernels are built for sm_80 and later), half from Volta on.
std::vector<std::string> gpu_precisions(const GpuInfo& g) {
  std::vector<std::string> out{"fp32"};
  if (g.compute_capability_major >= 8) {
    out.push_back("tf32");
    out.push_back("bf16");
  }
  if (g.compute_capability_major >= 7) out.push_back("fp16");
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "-" : out;
}

// The CPU's precisions, with bf16's measured rate where bf16 is slower than fp32: "fp32 bf16
// (0.49x fp32)".
std::string cpu_precisions_column(const CpuInfo& cpu) {
  std::string column = joined(cpu.precisions);
  if (cpu.bf16_product_rate && *cpu.bf16_product_rate < 1.0)
    column += format_number(cpu.bf16_product_rate, " (%.2fx fp32)");
  return column;
}

}  // namespace

DeviceReport discover_devices() {
  DeviceReport report;
  report.cpu.model_name = cpu_model_name();
  report.cpu.logical_cores = usable_cores();
  report.cpu.memory_bytes = meminfo_bytes("MemTotal");
  report.cpu.precisions = cpu_precisions();
  report.cpu.bf16_product_rate = backend::cpu_bf16_product_rate();
  const detail::CudaModule& cuda = detail::cuda_module();
  report.cuda_built = cuda.api != nullptr;
  if (cuda.api) {
    cuda.api->discover(report);
    for (GpuInfo& g : report.gpus) g.precisions = gpu_precisions(g);
  } else {
    report.gpus.clear();
    report.cuda_runtime_version = 0;
    report.cuda_driver_version = 0;
    report.gpu_status = "no CUDA GPU: " + cuda.why_not;
  }
  return report;
}

DeviceSample sample_devices(const DeviceReport& report) {
  DeviceSample sample;
  sample.time = detail::utc_now();
  sample.cpu_utilization_percent = cpu_utilization_since_last();
  sample.memory_available_bytes = meminfo_bytes("MemAvailable");
  sample.nvml_status = detail::nvml_sample(report.gpus, sample.gpus);
  return sample;
}

json to_json(const DeviceReport& report, const DeviceSample* sample) {
  json out;
  out["cpu"] = {{"device", "cpu"},
                {"model_name", text_or_null(report.cpu.model_name)},
                {"logical_cores",
                 report.cpu.logical_cores > 0 ? json(report.cpu.logical_cores) : json(nullptr)},
                {"memory_bytes", positive_or_null(report.cpu.memory_bytes)},
                {"precisions", report.cpu.precisions},
                {"bf16_product_rate", or_null(report.cpu.bf16_product_rate)}};
  json gpus = json::array();
  for (const GpuInfo& g : report.gpus) {
    gpus.push_back({{"device", "cuda:" + std::to_string(g.index)},
                    {"index", g.index},
                    {"name", text_or_null(g.name)},
                    {"memory_bytes", positive_or_null(g.memory_bytes)},
                    {"compute_capability", std::to_string(g.compute_capability_major) + "." +
                                               std::to_string(g.compute_capability_minor)},
                    {"multiprocessors", g.multiprocessors},
                    {"pci_bus_id", text_or_null(g.pci_bus_id)},
                    {"precisions", g.precisions}});
  }
  out["gpus"] = std::move(gpus);
  out["cuda"] = {{"built", report.cuda_built},
                 {"runtime_version", positive_or_null(report.cuda_runtime_version)},
                 {"driver_version", positive_or_null(report.cuda_driver_version)},
                 {"status", report.gpu_status}};
  if (sample) {
    json cpu = {{"utilization_percent", or_null(sample->cpu_utilization_percent)},
                {"memory_available_bytes", positive_or_null(sample->memory_available_bytes)},
                {"memory_used_bytes", nullptr}};
    if (report.cpu.memory_bytes > 0 && sample->memory_available_bytes > 0)
      cpu["memory_used_bytes"] = report.cpu.memory_bytes - sample->memory_available_bytes;
    json sampled = json::array();
    for (const GpuSample& g : sample->gpus) {
      sampled.push_back({{"device", "cuda:" + std::to_string(g.index)},
                         {"index", g.index},
                         {"utilization_percent", or_null(g.utilization_percent)},
                         {"memory_used_bytes", or_null(g.memory_used_bytes)},
                         {"temperature_c", or_null(g.temperature_c)},
                         {"power_w", or_null(g.power_w)}});
    }
    out["sample"] = {{"time", sample->time},
                     {"cpu", std::move(cpu)},
                     {"gpus", std::move(sampled)},
                     {"nvml_status", sample->nvml_status}};
  }
  return out;
}

std::string to_table(const DeviceReport& report, const DeviceSample* sample) {
  using Row = std::vector<std::string>;
  std::vector<Row> rows;
  rows.push_back({"device", "name", "memory", "compute capability", "SMs", "precisions", "util",
                  "mem used", "temp", "power"});

  std::string cpu_name = report.cpu.model_name.empty() ? "unknown CPU" : report.cpu.model_name;
  cpu_name += " (" + std::to_string(report.cpu.logical_cores) +
              (report.cpu.logical_cores == 1 ? " core)" : " cores)");
  std::optional<std::int64_t> cpu_total, cpu_used;
  if (report.cpu.memory_bytes > 0) cpu_total = report.cpu.memory_bytes;
  if (sample && cpu_total && sample->memory_available_bytes > 0)
    cpu_used = *cpu_total - sample->memory_available_bytes;
  rows.push_back({"cpu", cpu_name, format_bytes(cpu_total), "-", "-",
                  cpu_precisions_column(report.cpu),
                  format_number(sample ? sample->cpu_utilization_percent : std::nullopt, "%.1f%%"),
                  format_bytes(cpu_used), "-", "-"});

  for (const GpuInfo& g : report.gpus) {
    const GpuSample* s = sample_for(sample, g.index);
    rows.push_back({"cuda:" + std::to_string(g.index), g.name,
                    format_bytes(g.memory_bytes > 0 ? std::optional(g.memory_bytes) : std::nullopt),
                    std::to_string(g.compute_capability_major) + "." +
                        std::to_string(g.compute_capability_minor),
                    std::to_string(g.multiprocessors), joined(g.precisions),
                    format_number(s ? s->utilization_percent : std::nullopt, "%.0f%%"),
                    format_bytes(s ? s->memory_used_bytes : std::nullopt),
                    format_number(s ? s->temperature_c : std::nullopt, "%.0f°C"),
                    format_number(s ? s->power_w : std::nullopt, "%.0f W")});
  }

  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const Row& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], display_width(row[c]));
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      line += row[c];
      if (c + 1 < row.size()) line.append(widths[c] - display_width(row[c]), ' ');
    }
    out += line + "\n";
  }
  if (report.gpus.empty() && !report.gpu_status.empty()) out += report.gpu_status + "\n";
  if (sample && !report.gpus.empty() && !sample->nvml_status.empty())
    out += sample->nvml_status + "\n";
  return out;
}

}  // namespace tandem
