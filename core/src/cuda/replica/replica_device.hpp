// Private (CUDA module): what every CUDA replica (cuda_replica.cpp, cuda_pipeline_replica.cpp)
// does to drive a GPU: the run's precision as the backend's, and its GPU made current.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/dense_gemm.hpp"
#include "util/precision.hpp"

namespace tandem::cuda {

inline Precision device_precision(tandem::Precision p) {
  switch (p) {
    case tandem::Precision::tf32:
      return Precision::tf32;
    case tandem::Precision::bf16:
      return Precision::bf16;
    case tandem::Precision::fp16:
      return Precision::fp16;
    case tandem::Precision::fp32:
      break;
  }
  return Precision::fp32;
}

/// Whether a Keras dtype policy keeps some layer at float32 in a run at `run` precision
/// (`layers`: per layer, nn::layer_precisions): the replica then needs a float32 sibling backend.
inline bool keeps_float_layers(const std::vector<tandem::Precision>& layers,
                               tandem::Precision run) {
  for (tandem::Precision p : layers)
    if (p != run) return true;
  return false;
}

/// Makes `device` current for the calling thread: a kernel may only be queued on a stream of the
/// current device.
inline void use_device(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace tandem::cuda
