// The "nccl" communicator: gradient all-reduce across CUDA replicas, of one process or of every
// rank of an MPI job (one NCCL communicator over all GPUs; rank 0's unique id is broadcast through
// the World). Part of the CUDA module when NCCL is found; exercised on a GPU machine
// (scripts/gpu-check).
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/stream_reducer.hpp"
#include "tandem/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

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

class NcclCommunicator : public Communicator, public cuda::StreamReducer {
 public:
  NcclCommunicator(const DevicePlan& plan, World& world) {
    for (const auto& d : plan.replicas) devices_.push_back(d.index);
    comms_.resize(devices_.size());
    if (world.size() == 1) {
      check_nccl(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()),
                 ("initialisation on " + plan.text).c_str());
    } else {
      // Every rank's GPU count, then one NCCL rank per GPU, numbered in MPI rank order.
      const double mine = static_cast<double>(devices_.size());
      const std::vector<double> counts = world.all_gather(&mine, 1);
      int total = 0, first = 0;
      for (int r = 0; r < world.size(); ++r) {
        if (r == world.rank()) first = total;
        total += static_cast<int>(counts[static_cast<std::size_t>(r)]);
      }
      ncclUniqueId id;
      if (world.rank() == 0) check_nccl(ncclGetUniqueId(&id), "unique id");
      world.broadcast(&id, sizeof id, 0);
      check_nccl(ncclGroupStart(), "group start");
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        check_cuda(cudaSetDevice(devices_[i]), "cudaSetDevice");
        check_nccl(ncclCommInitRank(&comms_[i], total, id, first + static_cast<int>(i)),
                   ("initialisation of rank " + std::to_string(first + i) + " of " +
                    std::to_string(total) + " on " + plan.text)
                       .c_str());
      }
      check_nccl(ncclGroupEnd(), "group end");
      spans_world_ = true;
    }
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
  bool spans_world() const override { return spans_world_; }
  int size() const override { return static_cast<int>(devices_.size()); }

  // One participant's share of a reduction, from that participant's thread (one NCCL
  // communicator per device, so no group call is needed).
  void all_reduce_on_stream(int participant, float* data, std::size_t count,
                            cudaStream_t stream) override {
    const auto i = static_cast<std::size_t>(participant);
    if (i >= comms_.size())
      throw RunError("all_reduce_on_stream: participant " + std::to_string(participant) + " of " +
                     std::to_string(comms_.size()));
    check_nccl(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comms_[i], stream),
               "all-reduce of a gradient bucket");
  }

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
  bool spans_world_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const DevicePlan& plan, World& world) {
  return std::make_unique<NcclCommunicator>(plan, world);
}

}  // namespace tandem::detail
