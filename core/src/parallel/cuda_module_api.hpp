// Private: the interface between libtandem and its CUDA module, libtandem-cuda.so.
//
// Declared here, in parallel/, because parallel defines it and loads the module
// (cuda_module.hpp); the CUDA module (core/src/cuda) implements it (module_entry.cpp). So cuda
// includes parallel and never the other way round (scripts/check-includes).
//
// Everything that needs a CUDA library (the CUDA runtime, NCCL, and the CUDA backend) lives in
// the module, never in libtandem itself, so libtandem, `tandem` and `tandem-gui` start on any
// machine; the module is loaded on first use (cuda_module.hpp) and its own dependencies
// (libnccl.so.2, ...) only then. It is built from the same sources as the libtandem that loads it
// and checked by version string, so C++ types cross the boundary freely.
#pragma once

#include <memory>

#include "parallel/replica.hpp"
#include "parallel/communicator.hpp"
#include "tandem/device_plan.hpp"
#include "tandem/devices.hpp"
#include "util/internal_api.hpp"
#include "util/precision.hpp"
#include "parallel/world.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

/// The module's one exported symbol: `extern "C" const CudaModuleApi* tandem_cuda_module()`.
inline constexpr const char* kCudaModuleEntry = "tandem_cuda_module";

struct CudaModuleApi {
  /// TANDEM_VERSION of the build the module came from; libtandem refuses any other.
  const char* version;
  /// Fills report.gpus, cuda_runtime_version, cuda_driver_version and gpu_status (not
  /// cuda_built). Never throws for a missing driver or GPU: gpu_status then says why there is
  /// none. Thread-safe.
  void (*discover)(DeviceReport& report);
  /// The NCCL communicator for an all-CUDA plan spanning `world` (null as a function when the
  /// module was built without NCCL).
  std::unique_ptr<StreamCommunicator> (*make_nccl_communicator)(const DevicePlan& plan,
                                                                World& world);
  /// A replica training a copy of `model` with `optimizer`'s rule on the GPU `device`, mirroring
  /// into them (replica.hpp); borrows both. It is participant `participant` of `communicator`
  /// (the plan's, which outlives it; null when there is nothing to sum): it sums its gradients
  /// itself, in buckets during the backward pass (Replica::sums_gradients). Throws ConfigError
  /// naming the first layer, loss, metric or optimizer it cannot run. Null as a function when the
  /// module was built without the backend.
  std::unique_ptr<Replica> (*make_cuda_replica)(Model& model, Optimizer& optimizer,
                                                DeviceSpec device, Precision precision,
                                                StreamCommunicator* communicator, int participant);
  /// A replica training a copy of `model` as a pipeline (docs/pipeline.md): `layout`'s stage s
  /// on the GPU devices[s], the shard cut into `microbatches` that flow through the stages in
  /// `schedule`'s order, tensors copied between neighbouring GPUs; stage s is participant
  /// `participant` of communicators[s] (the replicas' stage s; null when there is nothing to sum)
  /// and sums its gradients itself. The layout must pass require_device_hand_offs. Borrows
  /// everything. Null as a function when the module was built without the backend.
  std::unique_ptr<Replica> (*make_cuda_pipeline_replica)(
      Model& model, Optimizer& optimizer, std::vector<DeviceSpec> devices, Precision precision,
      std::vector<StreamCommunicator*> communicators, int participant, PipelineLayout layout,
      int microbatches, PipelineSchedule schedule);
  /// Page-locked host memory (cudaHostAlloc, usable by every GPU), null when it cannot be had;
  /// and its release. Thread-safe.
  void* (*allocate_pinned)(std::size_t bytes);
  void (*free_pinned)(void* block);
};

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
