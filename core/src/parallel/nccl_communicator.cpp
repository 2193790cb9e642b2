// The "nccl" communicator: gradient all-reduce across CUDA replicas of one process.
// Built whenever NCCL is found (with CUDA); exercised on a GPU machine (scripts/gpu-check).
#include <cuda_runtime.h>
#include <nccl.h>

#include "tandem/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw RunError(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(r));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw RunError(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(e) + " (error " +
                   std::to_string(static_cast<int>(e)) + ")");
}

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const DevicePlan& plan) {
    for (const auto& d : plan.replicas) devices_.push_back(d.index);
    comms_.resize(devices_.size());
    check_nccl(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()),
               ("initialisation on " + plan.text).c_str());
    for (int device : devices_) {
      check_cuda(cudaSetDevice(device), "cudaSetDevice");
      cudaStream_t s;
      check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      streams_.push_back(s);
    }
  }

  ~NcclCommunicator() override {
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      cudaSetDevice(devices_[i]);
      cudaStreamDestroy(streams_[i]);
    }
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
  }

  std::string name() const override { return "nccl"; }
  int size() const override { return static_cast<int>(devices_.size()); }

  void all_reduce_sum(const std::vector<float*>& buffers, std::size_t count) override {
    if (buffers.size() != devices_.size())
      throw RunError("all_reduce_sum: " + std::to_string(buffers.size()) + " buffers for " +
                     std::to_string(devices_.size()) + " participants");
    check_nccl(ncclGroupStart(), "group start");
    for (std::size_t i = 0; i < devices_.size(); ++i)
      check_nccl(
          ncclAllReduce(buffers[i], buffers[i], count, ncclFloat, ncclSum, comms_[i], streams_[i]),
          "all-reduce");
    check_nccl(ncclGroupEnd(), "group end");
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      check_cuda(cudaSetDevice(devices_[i]), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(streams_[i]), "cudaStreamSynchronize");
    }
  }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const DevicePlan& plan) {
  if (plan.all_cpu()) return nullptr;
  for (const auto& d : plan.replicas)
    if (d.kind != DeviceKind::cuda)
      throw ConfigError("devices", "a plan cannot mix CPU and CUDA replicas: " + plan.text);
  return std::make_unique<NcclCommunicator>(plan);
}

}  // namespace tandem
