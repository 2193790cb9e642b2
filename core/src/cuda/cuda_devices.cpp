// GPU discovery through the CUDA runtime API (linked statically into the CUDA module: no
// libcudart.so needed at run time). The runtime loads the driver (libcuda.so.1) lazily, so on a
// machine without a driver or GPU every query returns an error code that becomes gpu_status,
// never a crash.
#include "parallel/cuda_module_api.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace tandem::detail {

namespace {

std::string no_gpu(cudaError_t err) {
  cudaGetLastError();  // clear the error so later CUDA calls in this process start clean
  return std::string("no CUDA GPU: ") + cudaGetErrorString(err) + " (error " +
         std::to_string(static_cast<int>(err)) + ")";
}

}  // namespace

void discover_cuda(DeviceReport& report) {
  report.gpus.clear();
  report.gpu_status.clear();

  int runtime_version = 0;
  if (cudaRuntimeGetVersion(&runtime_version) != cudaSuccess) runtime_version = 0;
  report.cuda_runtime_version = runtime_version;
  int driver_version = 0;  // 0 when no driver is installed
  if (cudaDriverGetVersion(&driver_version) != cudaSuccess) driver_version = 0;
  report.cuda_driver_version = driver_version;

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    report.gpu_status = no_gpu(err);
    return;
  }
  if (count <= 0) {
    report.gpu_status = "no CUDA GPU: the CUDA runtime found no device";
    return;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      report.gpus.clear();
      report.gpu_status = no_gpu(err);
      return;
    }
    GpuInfo gpu;
    gpu.index = i;
    gpu.name = prop.name;
    gpu.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    gpu.compute_capability_major = prop.major;
    gpu.compute_capability_minor = prop.minor;
    gpu.multiprocessors = prop.multiProcessorCount;
    char bus_id[64] = {};
    if (cudaDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof bus_id), i) == cudaSuccess)
      gpu.pci_bus_id = bus_id;
    else
      cudaGetLastError();
    report.gpus.push_back(std::move(gpu));
  }
}

}  // namespace tandem::detail
