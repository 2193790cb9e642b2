// Communicator: sums gradients across the replicas of a run (docs/design.md contract 1).
//
// Implementations: "threads" for CPU replicas in one process (the sum runs in replica order
// 0, 1, ..., N-1 for every element, so the result never depends on thread timing); "nccl" for
// CUDA replicas in one process (built whenever NCCL is found); "none", which refuses more than
// one participant when no backend is built. Called from one thread at a time.
//
// Across the processes of an MPI job, "nccl" spans every rank's GPUs in one communicator (its
// unique id is shared through the World), so one all-reduce sums over all of them; CPU plans
// reduce inside the process and the ReplicaModel then reduces across ranks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tandem/device_plan.hpp"
#include "tandem/world.hpp"

namespace tandem {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  /// Participants (replicas).
  virtual int size() const = 0;
  /// buffers[i] belongs to participant i and holds `count` floats (host memory for "threads",
  /// device memory of replica i for "nccl"). Afterwards every buffer holds the element-wise sum.
  virtual void all_reduce_sum(const std::vector<float*>& buffers, std::size_t count) = 0;
  /// True when all_reduce_sum already sums over every rank of the World (nothing left to do).
  virtual bool spans_world() const { return false; }
};

/// The communicator for a plan: "threads" for CPU plans, "nccl" for CUDA plans when built,
/// "none" for a single replica otherwise. Throws ConfigError when no backend can serve the plan.
/// `world` (default: this process alone) is the job the communicator may span (NCCL).
std::unique_ptr<Communicator> make_communicator(const DevicePlan& plan,
                                                const std::shared_ptr<World>& world = nullptr);

}  // namespace tandem
