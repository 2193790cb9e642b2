// Private: CUDA GPU discovery for the device registry. Exactly one of cuda_devices.cpp (built with
// CUDA, TANDEM_HAVE_CUDA=1) and cuda_devices_none.cpp (built without) defines discover_cuda.
#pragma once

#include "tandem/devices.hpp"

namespace tandem::detail {

/// Fills report.gpus, cuda_built, cuda_runtime_version, cuda_driver_version and gpu_status.
/// Never throws for a missing driver or GPU: gpu_status then says why there is none.
/// Thread-safe (the CUDA runtime's queries are).
void discover_cuda(DeviceReport& report);

}  // namespace tandem::detail
