// NVML through dlopen: the few entry points the registry needs, declared here by hand from
// NVML's documented C API (all return nvmlReturn_t, an int enum where 0 is NVML_SUCCESS).
#include "parallel/nvml.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <string>

namespace tandem::detail {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel ran, over the last sample period
  unsigned int memory;  // percent of time device memory was read or written
};
struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleByPciBusIdFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using UtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using MemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using TemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using PowerUsageFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);

// One loaded and initialised NVML. Immutable after construction, so concurrent readers need no
// lock (NVML itself is thread-safe). Destruction shuts NVML down and closes the library.
class NvmlLibrary {
 public:
  explicit NvmlLibrary(const char* library) {
    dlerror();
    lib_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* why = dlerror();
      status_ = std::string("NVML not available: ") + (why ? why : library);
      return;
    }
    bool found = sym(init_, "nvmlInit_v2") && sym(shutdown_, "nvmlShutdown") &&
                 sym(error_string_, "nvmlErrorString") &&
                 sym(handle_by_pci_, "nvmlDeviceGetHandleByPciBusId_v2") &&
                 sym(utilization_, "nvmlDeviceGetUtilizationRates") &&
                 sym(memory_, "nvmlDeviceGetMemoryInfo") &&
                 sym(temperature_, "nvmlDeviceGetTemperature") &&
                 sym(power_, "nvmlDeviceGetPowerUsage");
    if (!found) return;  // sym() set status_
    nvmlReturn_t rc = init_();
    if (rc != kNvmlSuccess) {
      status_ = "NVML not available: nvmlInit failed: " + error(rc);
      return;
    }
    initialised_ = true;
  }
  ~NvmlLibrary() {
    if (initialised_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return initialised_; }
  const std::string& status() const { return status_; }

  // Fills `s` for `gpu`; returns "" or why the GPU could not be read at all.
  std::string read(const GpuInfo& gpu, GpuSample& s) const {
    const std::string device = "cuda:" + std::to_string(gpu.index);
    if (gpu.pci_bus_id.empty()) return "NVML could not read " + device + ": no PCI bus id";
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t rc = handle_by_pci_(gpu.pci_bus_id.c_str(), &dev);
    if (rc != kNvmlSuccess)
      return "NVML could not read " + device + " (" + gpu.pci_bus_id + "): " + error(rc);
    nvmlUtilization_t util{};
    if (utilization_(dev, &util) == kNvmlSuccess) s.utilization_percent = util.gpu;
    nvmlMemory_t mem{};
    if (memory_(dev, &mem) == kNvmlSuccess)
      s.memory_used_bytes = static_cast<std::int64_t>(mem.used);
    unsigned int temp = 0;
    if (temperature_(dev, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) s.temperature_c = temp;
    unsigned int milliwatts = 0;
    if (power_(dev, &milliwatts) == kNvmlSuccess) s.power_w = milliwatts / 1000.0;
    return {};
  }

 private:
  template <typename Fn>
  bool sym(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(lib_, name));
    if (!fn) status_ = std::string("NVML not available: the library has no ") + name;
    return fn != nullptr;
  }
  std::string error(nvmlReturn_t rc) const {
    const char* text = error_string_ ? error_string_(rc) : nullptr;
    return std::string(text ? text : "unknown error") + " (error " + std::to_string(rc) + ")";
  }

  void* lib_ = nullptr;
  bool initialised_ = false;
  std::string status_;
  InitFn init_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  HandleByPciBusIdFn handle_by_pci_ = nullptr;
  UtilizationFn utilization_ = nullptr;
  MemoryInfoFn memory_ = nullptr;
  TemperatureFn temperature_ = nullptr;
  PowerUsageFn power_ = nullptr;
};

// The process-wide copy: loaded on first use (thread-safe static initialisation).
const NvmlLibrary& process_nvml() {
  static const NvmlLibrary instance("libnvidia-ml.so.1");
  return instance;
}

}  // namespace

std::string nvml_status() {
  return process_nvml().status();
}

std::string nvml_sample(const std::vector<GpuInfo>& gpus, std::vector<GpuSample>& out) {
  out.clear();
  for (const GpuInfo& gpu : gpus) {
    GpuSample s;
    s.index = gpu.index;
    out.push_back(s);
  }
  const NvmlLibrary& nvml = process_nvml();
  if (!nvml.ok()) return nvml.status();
  std::string status;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    std::string why = nvml.read(gpus[i], out[i]);
    if (!why.empty() && status.empty()) status = why;
  }
  return status;
}

std::string nvml_probe(const char* library) {
  NvmlLibrary nvml(library);
  return nvml.status();
}

}  // namespace tandem::detail
