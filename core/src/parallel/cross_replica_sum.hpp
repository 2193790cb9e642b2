// CrossReplicaSum: a small element-wise sum over every replica of a run, in the middle of a
// forward or backward pass (synchronized BatchNormalization's statistics, docs/design.md
// contract 1).
//
// Each replica's layer calls sum() with its own values; the call returns when every replica of
// every rank has contributed, with the total (replicas added in order inside a process, then
// processes in rank order: the same bits everywhere). Replicas call it from their worker threads;
// the last to arrive does the cross-process part, so MPI is entered by one thread at a time.
// Every replica must make the same calls in the same order (also with an empty shard).
//
// A replica that fails before its call never makes it: abandon() releases the others, and every
// call throws AbandonedStep (parallel/abandoned_step.hpp) until reset(). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel/world.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class CrossReplicaSum {
 public:
  CrossReplicaSum(int replicas, std::shared_ptr<World> world);
  /// In place: data[0..n) becomes the sum over all replicas and ranks. Throws AbandonedStep
  /// once abandon() was called (also while waiting for the other replicas).
  void sum(int replica, double* data, std::size_t n);
  /// Releases every replica waiting in sum() and refuses every later call until reset(): a
  /// replica failed during the step and will not arrive. From any thread; idempotent.
  void abandon();
  /// Starts over after abandon(), with no replica arrived: while no replica is inside sum().
  void reset();

 private:
  int replicas_;
  std::shared_ptr<World> world_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<const double*> slots_;
  std::vector<double> total_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool abandoned_ = false;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
