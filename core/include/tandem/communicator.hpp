// Communicator: sums gradients across the replicas of a run (DESIGN.md contract 1).
//
// Implementations: "threads" for CPU replicas in one process (the sum runs in replica order
// 0, 1, ..., N-1 for every element, so the result never depends on thread timing); "nccl" for
// CUDA replicas in one process (built whenever NCCL is found); "none", which refuses more than
// one participant when no backend is built. Called from one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tandem/device_plan.hpp"

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
};

/// The communicator for a plan: "threads" for CPU plans, "nccl" for CUDA plans when built,
/// "none" for a single replica otherwise. Throws ConfigError when no backend can serve the plan.
std::unique_ptr<Communicator> make_communicator(const DevicePlan& plan);

}  // namespace tandem
