// Shared by the GPU tests (label "gpu"): whether they can run here, and the model-building
// helpers of the tests that go through ReplicaModel. A test that cannot run skips itself with the
// reason (GTEST_SKIP), as on CI, which has no GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "tandem/device_plan.hpp"
#include "tandem/devices.hpp"
#include "tandem/model.hpp"

namespace tandem::gpu_test {

/// Why the CUDA runtime sees no device, or "" when it does (for the building blocks' tests).
inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(e);
  }
  return count > 0 ? "" : "the runtime found none";
}

/// Why CUDA replicas cannot train here (no CUDA module, no device), or "" when they can.
inline std::string no_replica_reason() {
  const DeviceReport report = discover_devices();
  if (!report.cuda_built) return "no CUDA module: " + report.gpu_status;
  if (report.gpus.empty()) return "no CUDA device: " + report.gpu_status;
  return "";
}

/// A device plan on this machine ("cuda:0", "cuda:0,1").
inline DevicePlan plan(const std::string& text) {
  return parse_device_plan(text, discover_devices(), "devices", true);
}

inline nlohmann::json layer(const std::string& cls, nlohmann::json config) {
  return {{"class_name", cls}, {"config", config}};
}

/// A Keras Sequential config of `layers` taking samples of shape `input`.
inline nlohmann::json sequential(const Shape& input, nlohmann::json layers) {
  layers[0]["config"]["batch_input_shape"] = nlohmann::json::array({nullptr});
  for (auto d : input) layers[0]["config"]["batch_input_shape"].push_back(d);
  return {{"class_name", "Sequential"}, {"config", {{"layers", layers}}}};
}

}  // namespace tandem::gpu_test

/// Skips the test unless the CUDA runtime sees a device.
#define REQUIRE_DEVICE()                                            \
  do {                                                              \
    const std::string why = ::tandem::gpu_test::no_device_reason(); \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;    \
  } while (false)

/// Skips the test unless CUDA replicas can train here.
#define REQUIRE_GPU()                                                \
  do {                                                               \
    const std::string why = ::tandem::gpu_test::no_replica_reason(); \
    if (!why.empty()) GTEST_SKIP() << why;                           \
  } while (false)
