// Private (parallel): the order in which a pipeline's stages run their micro-batches, and the
// stage worker threads that follow it (docs/pipeline.md). Shared by the CPU pipeline replica
// (pipeline_replica.cpp) and the CUDA module's (cuda/replica/cuda_pipeline_replica.cpp): what a
// stage does with a micro-batch is theirs, when it may do it is this.
//
// Stage s runs its operations in stage_operations() order; a forward of micro-batch m waits for
// stage s - 1's forward of m, a backward for stage s + 1's backward of m. Both schedules run
// every stage's backwards in micro-batch order (0, 1, ..., M - 1), so gradients summed as they
// come are summed in the same order whatever the schedule.
//
// Ownership: owns its worker threads (joined by the destructor). Thread-safety: run() from one
// thread at a time; the operation it is given is called on the workers, stage s's always on
// worker s, one operation at a time per stage, stages concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel/pipeline_layout.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

/// One operation of a stage: the forward or the backward of one micro-batch.
struct StageOperation {
  bool forward = true;
  int microbatch = 0;
};

/// What stage s of S does, in order, for M micro-batches under `schedule`.
std::vector<StageOperation> stage_operations(PipelineSchedule schedule, int s, int S, int M);

/// A replica's shard cut into micro-batches, as ReplicaModel::split cuts a batch into shards:
/// micro-batch m is rows [starts[m], starts[m] + rows[m]).
struct MicroBatches {
  std::vector<std::int64_t> starts, rows;
};
MicroBatches microbatches_of(std::int64_t rows, int microbatches);

/// Micro-batches in flight at once, each needing its own activations: M for GPipe, min(M, S)
/// for 1F1B (stage 0 starts micro-batch m + S only after its backward of m, m's last step).
int pipeline_slots(PipelineSchedule schedule, int stages, int microbatches);

class PipelineScheduler {
 public:
  /// Starts one worker per stage; each first calls start_worker(s) on its own thread (the
  /// stage's compute threads, its GPU). Borrows nothing.
  PipelineScheduler(PipelineSchedule schedule, int stages, int microbatches,
                    std::function<void(int stage)> start_worker);
  ~PipelineScheduler();
  PipelineScheduler(const PipelineScheduler&) = delete;
  PipelineScheduler& operator=(const PipelineScheduler&) = delete;

  using Operation = std::function<void(int stage, const StageOperation& op)>;
  /// Runs every stage's operations through `operation` in the schedule's order and waits for
  /// them; returns each stage's seconds inside `operation`. The first exception any operation
  /// throws stops every stage at its next wait and is rethrown here.
  std::vector<double> run(const Operation& operation);

 private:
  bool ready(int s, const StageOperation& op) const;  // with mutex_ held
  void worker_loop(int s, const std::function<void(int)>& start_worker);

  PipelineSchedule schedule_;
  int stages_, microbatches_;
  // The schedule's state, guarded by mutex_; changed_ wakes everyone on every change.
  std::mutex mutex_;
  std::condition_variable changed_;
  const Operation* operation_ = nullptr;                         // the current run()'s
  std::vector<std::vector<bool>> forward_done_, backward_done_;  // [stage][micro-batch]
  std::vector<double> seconds_;                                  // per stage, this run()'s
  std::exception_ptr error_;
  int pending_ = 0;  // stages still running this run()
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // last: started once everything above exists
};

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
