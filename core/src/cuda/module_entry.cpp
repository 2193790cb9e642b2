// libtandem-cuda.so's entry point: the table libtandem reads after dlopen
// (parallel/cuda_module_api.hpp).
#include "parallel/cuda_module_api.hpp"

namespace tandem::detail {

void discover_cuda(DeviceReport& report);  // cuda_devices.cpp
std::unique_ptr<StreamCommunicator> make_nccl_communicator(const DevicePlan&, World&);  // nccl_*.cpp
std::unique_ptr<Replica> make_cuda_replica(Model&, Optimizer&, DeviceSpec, Precision,
                                           StreamCommunicator*,
                                           int);  // replica/cuda_replica.cpp
std::unique_ptr<Replica> make_cuda_pipeline_replica(Model&, Optimizer&, std::vector<DeviceSpec>,
                                                    Precision, std::vector<StreamCommunicator*>,
                                                    int, PipelineLayout, int,
                                                    PipelineSchedule);  // replica/cuda_pipeline_*
void* allocate_pinned(std::size_t bytes);         // pinned_host.cpp
void free_pinned(void* block);

}  // namespace tandem::detail

extern "C" __attribute__((visibility("default"))) const tandem::detail::CudaModuleApi*
tandem_cuda_module() {
  static const tandem::detail::CudaModuleApi api{
      TANDEM_VERSION,
      &tandem::detail::discover_cuda,
#ifdef TANDEM_HAVE_NCCL
      &tandem::detail::make_nccl_communicator,
#else
      nullptr,
#endif
      &tandem::detail::make_cuda_replica,
      &tandem::detail::make_cuda_pipeline_replica,
      &tandem::detail::allocate_pinned,
      &tandem::detail::free_pinned,
  };
  return &api;
}
