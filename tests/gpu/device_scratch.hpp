// Shared by the GPU tests of the CUDA building blocks (they link tandem_cuda_ops): a stream and a
// caching allocator of a test's own on device 0, device buffers from host vectors and back, and
// the random inputs and error measure the tests compare with.
//
// Ownership: DeviceScratch owns its stream, its allocator and every buffer it handed out (freed
// with it, buffers first). Thread-safety: one thread.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/device_allocator.hpp"

namespace tandem::gpu_test {

/// n floats uniform in [lo, hi) from `seed`.
inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float lo = -1,
                                        float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

/// max |got - want| / max |want| (with a floor): the error relative to the result's scale;
/// infinite when the sizes differ.
template <class Got, class Want>
double relative_error(const std::vector<Got>& got, const std::vector<Want>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0, scale = 1e-30;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

class DeviceScratch {
 public:
  DeviceScratch() {
    cuda::check(cudaSetDevice(0), "cudaSetDevice");
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    allocator_ = std::make_unique<cuda::DeviceAllocator>(0);
  }
  ~DeviceScratch() {
    buffers_.clear();  // before the allocator that handed them out
    allocator_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  cudaStream_t stream() const { return stream_; }
  cuda::DeviceAllocator& allocator() { return *allocator_; }

  /// A device copy of `host` (queued on the stream), alive as long as this scratch.
  float* upload(const std::vector<float>& host) {
    buffers_.emplace_back(*allocator_, static_cast<std::int64_t>(host.size()));
    float* d = buffers_.back().data();
    cuda::check(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                                stream_),
                "upload");
    return d;
  }
  float* filled(std::size_t n, float value) { return upload(std::vector<float>(n, value)); }
  /// n floats from the device, after everything queued on the stream.
  std::vector<float> download(const float* d, std::size_t n) {
    std::vector<float> host(n);
    cuda::check(cudaMemcpyAsync(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                "download");
    cuda::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return host;
  }

 private:
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::DeviceAllocator> allocator_;
  std::vector<cuda::DeviceBuffer> buffers_;
};

}  // namespace tandem::gpu_test
