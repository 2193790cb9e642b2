// Private: live GPU readings from NVML, loaded at run time with dlopen("libnvidia-ml.so.1") (no
// NVML header or package at build time). The library is loaded and initialised once, on first
// use, and kept for the life of the process; every function here is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "tandem/devices.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

/// "" when NVML is loaded and initialised; else one sentence saying why not, e.g.
/// "NVML not available: libnvidia-ml.so.1: cannot open shared object file: ...".
std::string nvml_status();

/// One GpuSample per entry of `gpus`, in the same order (index copied), matched to NVML devices
/// by PCI bus id. Readings NVML cannot give are null. Returns "" when NVML answered for every
/// GPU, else one sentence saying what went wrong (the samples are then null where affected).
std::string nvml_sample(const std::vector<GpuInfo>& gpus, std::vector<GpuSample>& out);

/// For tests: loads `library` afresh (not the process-wide copy), initialises and shuts NVML
/// down, and returns the status nvml_status() would give for it.
std::string nvml_probe(const char* library);

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
