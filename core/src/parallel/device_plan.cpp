#include "tandem/device_plan.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "tandem/error.hpp"

namespace tandem {

std::string DeviceSpec::name() const {
  return kind == DeviceKind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

DevicePlan DevicePlan::cpus(int n) {
  DevicePlan plan;
  for (int i = 0; i < n; ++i) plan.replicas.push_back({DeviceKind::cpu, i});
  plan.text = "cpu:" + std::to_string(n);
  return plan;
}

bool DevicePlan::all_cpu() const {
  return std::all_of(replicas.begin(), replicas.end(),
                     [](const DeviceSpec& d) { return d.kind == DeviceKind::cpu; });
}

nlohmann::json DevicePlan::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < replicas.size(); ++i)
    list.push_back({{"replica", i}, {"device", replicas[i].name()}});
  return {{"plan", text}, {"replicas", list}};
}

namespace {

// What a parse knows of the machine, discovered at the first need (a plan of CPU replicas needs
// it only for an error).
class Machine {
 public:
  explicit Machine(const std::function<PlanDevices()>& discover) : discover_(discover) {}
  const DeviceReport& report() { return devices().report; }
  bool cuda_trainable() { return devices().cuda_trainable; }

 private:
  const PlanDevices& devices() {
    if (!devices_) devices_ = discover_();
    return *devices_;
  }
  const std::function<PlanDevices()>& discover_;
  std::optional<PlanDevices> devices_;
};

std::string available(const DeviceReport& report) {
  std::string s = "cpu (" + std::to_string(report.cpu.logical_cores) + " cores)";
  for (const auto& g : report.gpus) s += ", cuda:" + std::to_string(g.index) + " (" + g.name + ")";
  if (report.gpus.empty() && !report.gpu_status.empty()) s += "; " + report.gpu_status;
  return s;
}

[[noreturn]] void fail(const std::string& path, const std::string& text, const std::string& why,
                       Machine& machine) {
  throw ConfigError(path, why + " in device plan '" + text +
                              "'. This machine has: " + available(machine.report()) +
                              ". Plans: auto, cpu, cpu:N, cuda:0,2, cuda:all.");
}

int parse_count(const std::string& digits, const std::string& path, const std::string& text,
                Machine& machine) {
  const auto all_digits = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (digits.size() > 1 && digits[0] == '-' && all_digits(digits.substr(1)))
    fail(path, text, "'" + digits + "' is negative", machine);
  if (!all_digits(digits)) fail(path, text, "'" + digits + "' is not a number", machine);
  if (digits.size() > 6) fail(path, text, "'" + digits + "' is too large", machine);
  return std::stoi(digits);
}

}  // namespace

DevicePlan parse_device_plan(const std::string& text, const DeviceReport& report,
                             const std::string& path, bool cuda_trainable) {
  return parse_device_plan(
      text,
      [&] {
        return PlanDevices{report, cuda_trainable};
      },
      path);
}

DevicePlan parse_device_plan(const std::string& text, const std::function<PlanDevices()>& discover,
                             const std::string& path) {
  Machine machine(discover);
  DevicePlan plan;
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ' '; }), t.end());
  if (t.empty()) fail(path, text, "empty", machine);
  if (t == "auto")
    t = (machine.cuda_trainable() && !machine.report().gpus.empty()) ? "cuda:all" : "cpu";
  if (t == "cpu") t = "cpu:1";
  if (t.rfind("cpu:", 0) == 0) {
    if (t.find(',') != std::string::npos)  // cpu:1,cpu:1
      fail(path, text, "the CPU is one entry, cpu:N for N replicas (cpu:2, not cpu:1,cpu:1)",
           machine);
    const int n = parse_count(t.substr(4), path, text, machine);
    if (n < 1) fail(path, text, "cpu:N needs N >= 1", machine);
    if (n > 1024) fail(path, text, "at most 1024 CPU replicas", machine);
    return DevicePlan::cpus(n);
  }
  if (t.rfind("cuda:", 0) != 0) fail(path, text, "unknown device '" + text + "'", machine);
  const DeviceReport& report = machine.report();
  std::vector<int> ordinals;
  if (t == "cuda:all") {
    if (report.gpus.empty()) fail(path, text, "there is no CUDA GPU", machine);
    for (const auto& g : report.gpus) ordinals.push_back(g.index);
  } else {
    std::string list = t.substr(5);
    std::size_t pos = 0;
    while (pos <= list.size()) {
      const auto comma = list.find(',', pos);
      ordinals.push_back(parse_count(
          list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), path,
          text, machine));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  std::set<int> seen;
  for (int o : ordinals) {
    const bool exists = std::any_of(report.gpus.begin(), report.gpus.end(),
                                    [o](const GpuInfo& g) { return g.index == o; });
    if (!exists) fail(path, text, "there is no device cuda:" + std::to_string(o), machine);
    if (!seen.insert(o).second)
      fail(path, text, "cuda:" + std::to_string(o) + " is listed twice", machine);
    plan.replicas.push_back({DeviceKind::cuda, o});
  }
  if (!machine.cuda_trainable())
    throw ConfigError(path, "device plan '" + text +
                                "' names CUDA devices, but this Tandem build trains on the CPU "
                                "only (no CUDA backend); use \"cpu\" or \"cpu:N\"");
  plan.text = "cuda:";
  for (std::size_t i = 0; i < ordinals.size(); ++i) {
    if (i > 0) plan.text += ',';
    plan.text += std::to_string(ordinals[i]);
  }
  return plan;
}

}  // namespace tandem
