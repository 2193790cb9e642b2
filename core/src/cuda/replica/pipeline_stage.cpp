#include "cuda/replica/pipeline_stage.hpp"

#include "cuda/ops/cuda_check.hpp"
#include "cuda/replica/replica_device.hpp"

namespace tandem::cuda {

PipelineStage::PipelineStage(int device_index, Precision precision, bool float_layers)
    : device(device_index),
      stream(device_index),
      activation_copies(device_index),
      gradient_copies(device_index),
      allocator(std::make_shared<DeviceAllocator>(device_index)),
      gemm(*allocator, stream.get(), precision),
      backend(allocator, stream.get(), gemm, precision),
      float_gemm(float_layers
                     ? std::make_unique<DenseGemm>(*allocator, stream.get(), Precision::fp32)
                     : nullptr),
      float_backend(float_gemm ? backend.sibling(*float_gemm, Precision::fp32) : nullptr),
      penalty_sums(backend.sums()) {}

void copy_between_devices(const Tensor& src, int src_device, Tensor& dst, int dst_device,
                          CudaBackend& backend, cudaStream_t stream) {
  backend.place(dst, src.shape());
  if (src.size() == 0) return;
  check(cudaMemcpyPeerAsync(dst.data(), dst_device, src.data(), src_device,
                            static_cast<std::size_t>(src.size()) * sizeof(float), stream),
        "the copy between pipeline stages (cudaMemcpyPeerAsync)");
}

void enable_neighbour_access(const std::vector<int>& devices) {
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j : {i - 1, i + 1}) {
      if (j >= devices.size() || devices[j] == devices[i]) continue;  // (i - 1 wraps for i = 0)
      int can = 0;
      check(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]), "cudaDeviceCanAccessPeer");
      if (!can) continue;
      use_device(devices[i]);
      const cudaError_t e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();  // another replica's stage enabled it: fine
      else
        check(e, "cudaDeviceEnablePeerAccess");
    }
}

}  // namespace tandem::cuda
