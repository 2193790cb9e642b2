// discover_cuda for a Tandem built without CUDA: no GPUs, and the reason says so.
#include "parallel/cuda_devices.hpp"

namespace tandem::detail {

void discover_cuda(DeviceReport& report) {
  report.gpus.clear();
  report.cuda_built = false;
  report.cuda_runtime_version = 0;
  report.cuda_driver_version = 0;
  report.gpu_status = "no CUDA GPU: this Tandem was built without CUDA";
}

}  // namespace tandem::detail
