// Private (CUDA module): asynchronous copies of float arrays between the host and a GPU, queued
// on a stream, each naming what failed. The caller keeps both sides alive until the stream
// reaches the copy (a synchronization or a later event).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/ops/cuda_check.hpp"

namespace tandem::cuda {

inline void copy_to_device(float* dst, const float* src, std::int64_t n, cudaStream_t stream) {
  if (n > 0)
    check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                          cudaMemcpyHostToDevice, stream),
          "copy to the device");
}

inline void copy_to_host(float* dst, const float* src, std::int64_t n, cudaStream_t stream) {
  if (n > 0)
    check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                          cudaMemcpyDeviceToHost, stream),
          "copy to the host");
}

}  // namespace tandem::cuda
