// Private (parallel): sums gradients across the replicas of a run (docs/design.md contract 1).
//
// Implementations: "threads" for CPU replicas in one process (the sum runs in replica order
// 0, 1, ..., N-1 for every element, so the result never depends on thread timing); "nccl" for
// CUDA replicas (the CUDA module's, built whenever NCCL is found); "none", for a single replica.
//
// Buffers are tensors, so each says where its elements live: a communicator checks that every
// buffer is on the device its participant computes on (host memory for "threads", GPU i's for
// participant i of "nccl") and throws RunError naming the participant otherwise.
//
// Across the processes of an MPI job, "nccl" spans every rank's GPUs in one communicator (its
// unique id is shared through the World), so one all-reduce sums over all of them; CPU plans
// reduce inside the process and the ReplicaModel then reduces across ranks.
//
// Ownership: the ReplicaModel owns its communicator; buffers are borrowed for the call.
// Thread-safety: all_reduce_sum from one thread at a time; all_reduce_on_stream (below) from
// every participant's own thread concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/world.hpp"
#include "tandem/device_plan.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

struct CUstream_st;  // the CUDA runtime's stream (cudaStream_t is CUstream_st*)

namespace tandem {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  /// Participants (replicas).
  virtual int size() const = 0;
  /// buffers[i] is participant i's; all have the same number of elements. Afterwards every
  /// buffer holds the element-wise sum. Throws RunError for a wrong count, size or device.
  virtual void all_reduce_sum(const std::vector<Tensor*>& buffers) = 0;
  /// True when all_reduce_sum already sums over every rank of the World (nothing left to do).
  virtual bool spans_world() const { return false; }
  /// A participant failed during the step and will not take its part in the reductions the
  /// others queued or wait on: stops them (they complete without summing) and makes every later
  /// call throw AbandonedStep (parallel/abandoned_step.hpp); the communicator sums nothing more.
  /// From any thread, also while participants are inside a reduction; idempotent. Nothing to do
  /// where one thread sums after the step ("threads", "none").
  virtual void abort() {}
};

/// A communicator whose participants queue their own sums on their device's streams (NCCL): a
/// CUDA replica sums a bucket of gradients while its backward pass still computes the others.
class StreamCommunicator : public Communicator {
 public:
  /// Queues on `stream` (a stream of participant `participant`'s GPU) the in-place sum of
  /// `slice` (that GPU's memory) over every participant. Every participant must queue the same
  /// reductions (same sizes, same order), each from the thread that drives its device; a
  /// reduction completes only when every participant queued it. Throws RunError when the
  /// participant or the slice's device is wrong or NCCL refuses.
  virtual void all_reduce_on_stream(int participant, Tensor& slice, CUstream_st* stream) = 0;
};

/// Throws RunError naming the participant unless `buffer` is on `device`.
void require_buffer_on(std::size_t participant, const Tensor& buffer, const Device& device);
/// Throws RunError unless there is one buffer per participant, all of participant 0's size, each
/// on device_of(its participant): what every all_reduce_sum checks first.
void require_buffers(const std::vector<Tensor*>& buffers, int participants,
                     const std::function<Device(std::size_t participant)>& device_of);

/// The communicator for a plan: "threads" for CPU plans, make_stream_communicator's for CUDA
/// plans, "none" for one GPU in one process. Throws ConfigError when no backend can serve the
/// plan. `world` (default: this process alone) is the job the communicator may span (NCCL).
std::unique_ptr<Communicator> make_communicator(const DevicePlan& plan,
                                                const std::shared_ptr<World>& world = nullptr);

/// The stream communicator of an all-CUDA plan ("nccl"), spanning `world`; null when there is
/// nothing to sum (one GPU in one process). Throws ConfigError when the plan mixes devices, the
/// CUDA module cannot be loaded, or it was built without NCCL and there is something to sum.
std::unique_ptr<StreamCommunicator> make_stream_communicator(const DevicePlan& plan, World& world);

}  // namespace tandem

TANDEM_INTERNAL_API_END
