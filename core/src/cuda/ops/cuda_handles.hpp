// Private (CUDA module): owning handles of a CUDA stream and a CUDA event (RAII: destroyed with
// the handle, on the device they were made on).
//
// Ownership: each owns its stream or event. Thread-safety: one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/ops/cuda_check.hpp"

namespace tandem::cuda {

class CudaStream {
 public:
  /// A non-blocking stream on `device` (made current).
  explicit CudaStream(int device) : device_(device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaStream() {
    if (!stream_) return;
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);  // nothing queued may outlive the memory it uses
    cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  /// An event without timing (the cheapest to record and wait for), on the current device.
  CudaEvent() { check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate"); }
  ~CudaEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace tandem::cuda
