// The "nccl" communicator (parallel/communicator.hpp): gradient all-reduce across CUDA replicas,
// of one process or of every rank of an MPI job (one NCCL communicator over all GPUs; rank 0's
// unique id is broadcast through the World). Part of the CUDA module when NCCL is found;
// exercised on a GPU machine (scripts/gpu-check).
//
// Ownership: one NCCL communicator and one stream (for all_reduce_sum) per local GPU, each an
// RAII handle. Buffers are borrowed for the call and must be on their participant's GPU.
//
// abort() (a replica failed mid-step): NCCL's reductions wait for every participant on the GPU,
// so the others' kernels would spin, and their threads wait on them, forever. abort() revokes
// every communicator (NCCL 2.28's ncclCommRevoke: in-flight operations stop, the communicator
// stays allocated, so a participant's thread that is inside an NCCL call meanwhile reads no freed
// memory; before 2.28, ncclCommAbort); the destructor then aborts them instead of destroying
// them, which would wait for the revoked operations.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <memory>

#include "cuda/ops/cuda_handles.hpp"
#include "parallel/abandoned_step.hpp"
#include "parallel/communicator.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw RunError("NCCL " + what + " failed: " + ncclGetErrorString(r));
}

struct NcclCommDeleter {
  void operator()(ncclComm* comm) const { ncclCommDestroy(comm); }
};
using NcclComm = std::unique_ptr<ncclComm, NcclCommDeleter>;

class NcclCommunicator : public StreamCommunicator {
 public:
  NcclCommunicator(const DevicePlan& plan, World& world) {
    for (const auto& d : plan.replicas) devices_.push_back(d.index);
    std::vector<ncclComm_t> comms(devices_.size(), nullptr);
    if (world.size() == 1) {
      const ncclResult_t made =
          ncclCommInitAll(comms.data(), static_cast<int>(devices_.size()), devices_.data());
      adopt(comms);
      check_nccl(made, "initialisation on " + plan.text);
    } else {
      init_across_ranks(plan, world, comms);
      spans_world_ = true;
    }
    for (int device : devices_) streams_.push_back(std::make_unique<cuda::CudaStream>(device));
  }

  ~NcclCommunicator() override {
    if (!aborted_) return;  // the comms_' deleters destroy them
    for (NcclComm& comm : comms_)
      if (ncclComm_t c = comm.release()) ncclCommAbort(c);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override { return "nccl"; }
  bool spans_world() const override { return spans_world_; }
  int size() const override { return static_cast<int>(devices_.size()); }

  // One participant's share of a reduction, from that participant's thread (one NCCL
  // communicator per device, so no group call is needed).
  void all_reduce_on_stream(int participant, Tensor& slice, CUstream_st* stream) override {
    if (participant < 0 || participant >= size())
      throw RunError("all_reduce_on_stream: participant " + std::to_string(participant) + " of " +
                     std::to_string(size()));
    const auto i = static_cast<std::size_t>(participant);
    require_buffer_on(i, slice, device_of(i));
    refuse_if_aborted();
    check_nccl(ncclAllReduce(slice.data(), slice.data(), static_cast<std::size_t>(slice.size()),
                             ncclFloat, ncclSum, comms_[i].get(), stream),
               "all-reduce of a gradient bucket");
  }

  void all_reduce_sum(const std::vector<Tensor*>& buffers) override {
    require_buffers(buffers, size(), [&](std::size_t i) { return device_of(i); });
    refuse_if_aborted();
    const auto count = static_cast<std::size_t>(buffers[0]->size());
    check_nccl(ncclGroupStart(), "group start");
    for (std::size_t i = 0; i < devices_.size(); ++i)
      check_nccl(ncclAllReduce(buffers[i]->data(), buffers[i]->data(), count, ncclFloat, ncclSum,
                               comms_[i].get(), streams_[i]->get()),
                 "all-reduce");
    check_nccl(ncclGroupEnd(), "group end");
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      cuda::check(cudaSetDevice(devices_[i]), "cudaSetDevice");
      cuda::check(cudaStreamSynchronize(streams_[i]->get()), "the NCCL all-reduce");
    }
  }

  void abort() override {
    if (aborted_.exchange(true)) return;
    for (NcclComm& comm : comms_) {
      if (!comm) continue;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
      ncclCommRevoke(comm.get(), NCCL_REVOKE_DEFAULT);
#else
      ncclCommAbort(comm.release());
#endif
    }
  }

 private:
  void refuse_if_aborted() const {
    if (aborted_)
      throw AbandonedStep(
          "NCCL: the communicator was stopped when a replica failed during a step; it sums no "
          "more gradients");
  }

  // Every rank's GPU count, then one NCCL rank per GPU, numbered in MPI rank order.
  void init_across_ranks(const DevicePlan& plan, World& world, std::vector<ncclComm_t>& comms) {
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
    ncclResult_t made = ncclSuccess;
    std::string failure;
    for (std::size_t i = 0; i < devices_.size() && made == ncclSuccess; ++i) {
      cuda::check(cudaSetDevice(devices_[i]), "cudaSetDevice");
      made = ncclCommInitRank(&comms[i], total, id, first + static_cast<int>(i));
      if (made != ncclSuccess)
        failure = "initialisation of rank " + std::to_string(first + i) + " of " +
                  std::to_string(total) + " on " + plan.text;
    }
    const ncclResult_t ended = ncclGroupEnd();
    adopt(comms);
    check_nccl(made, failure);
    check_nccl(ended, "group end");
  }

  // Takes ownership of the communicators NCCL made (also of those made before a failure).
  void adopt(const std::vector<ncclComm_t>& comms) {
    for (ncclComm_t c : comms) comms_.emplace_back(c);
  }

  // Participant i's GPU.
  Device device_of(std::size_t i) const { return {MemoryKind::cuda, devices_[i]}; }

  std::vector<int> devices_;
  std::vector<NcclComm> comms_;                             // per local GPU
  std::vector<std::unique_ptr<cuda::CudaStream>> streams_;  // per local GPU, for all_reduce_sum
  bool spans_world_ = false;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<StreamCommunicator> make_nccl_communicator(const DevicePlan& plan, World& world) {
  return std::make_unique<NcclCommunicator>(plan, world);
}

}  // namespace tandem::detail
