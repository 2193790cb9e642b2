// Private (CUDA module): what every CUDA replica (cuda_replica.cpp, cuda_pipeline_replica.cpp)
// does to drive a GPU: the run's precision as the backend's, and its GPU made current.
#pragma once

#include <cuda_runtime_api.h>

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

/// Makes `device` current for the calling thread: a kernel may only be queued on a stream of the
/// current device.
inline void use_device(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace tandem::cuda
