#include "parallel/pipeline_scheduler.hpp"

#include <algorithm>
#include <chrono>

#include "parallel/replica_model.hpp"

namespace tandem::detail {

std::vector<StageOperation> stage_operations(PipelineSchedule schedule, int s, int S, int M) {
  std::vector<StageOperation> ops;
  if (schedule == PipelineSchedule::gpipe) {
    for (int m = 0; m < M; ++m) ops.push_back({true, m});
    for (int m = 0; m < M; ++m) ops.push_back({false, m});
    return ops;
  }
  const int warmup = std::min(S - s - 1, M);
  for (int m = 0; m < warmup; ++m) ops.push_back({true, m});
  for (int m = 0; m + warmup < M; ++m) {
    ops.push_back({true, m + warmup});
    ops.push_back({false, m});
  }
  for (int m = M - warmup; m < M; ++m) ops.push_back({false, m});
  return ops;
}

MicroBatches microbatches_of(std::int64_t rows, int microbatches) {
  MicroBatches cut;
  std::int64_t at = 0;
  for (std::int64_t n : ReplicaModel::split(rows, microbatches)) {
    cut.starts.push_back(at);
    cut.rows.push_back(n);
    at += n;
  }
  return cut;
}

int pipeline_slots(PipelineSchedule schedule, int stages, int microbatches) {
  return schedule == PipelineSchedule::gpipe ? microbatches : std::min(microbatches, stages);
}

PipelineScheduler::PipelineScheduler(PipelineSchedule schedule, int stages, int microbatches,
                                     std::function<void(int stage)> start_worker)
    : schedule_(schedule), stages_(stages), microbatches_(microbatches) {
  seconds_.assign(static_cast<std::size_t>(stages), 0.0);
  for (int s = 0; s < stages; ++s)
    workers_.emplace_back([this, s, start_worker] { worker_loop(s, start_worker); });
}

PipelineScheduler::~PipelineScheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& w : workers_) w.join();
}

std::vector<double> PipelineScheduler::run(const Operation& operation) {
  std::unique_lock lock(mutex_);
  const auto S = static_cast<std::size_t>(stages_);
  forward_done_.assign(S, std::vector<bool>(static_cast<std::size_t>(microbatches_), false));
  backward_done_ = forward_done_;
  error_ = nullptr;
  operation_ = &operation;
  pending_ = stages_;
  ++generation_;
  changed_.notify_all();
  changed_.wait(lock, [this] { return pending_ == 0; });
  operation_ = nullptr;
  if (error_) std::rethrow_exception(error_);
  return seconds_;
}

bool PipelineScheduler::ready(int s, const StageOperation& op) const {
  const auto m = static_cast<std::size_t>(op.microbatch);
  if (op.forward) return s == 0 || forward_done_[static_cast<std::size_t>(s - 1)][m];
  return s + 1 == stages_ || backward_done_[static_cast<std::size_t>(s + 1)][m];
}

void PipelineScheduler::worker_loop(int s, const std::function<void(int)>& start_worker) {
  start_worker(s);
  const std::vector<StageOperation> ops = stage_operations(schedule_, s, stages_, microbatches_);
  std::uint64_t seen = 0;
  for (;;) {
    const Operation* operation = nullptr;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      operation = operation_;
    }
    double busy = 0;
    for (const StageOperation& op : ops) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return error_ || ready(s, op); });
        if (error_) break;
      }
      const auto t0 = std::chrono::steady_clock::now();
      try {
        (*operation)(s, op);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        changed_.notify_all();
        break;
      }
      busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard lock(mutex_);
      auto& done = op.forward ? forward_done_ : backward_done_;
      done[static_cast<std::size_t>(s)][static_cast<std::size_t>(op.microbatch)] = true;
      changed_.notify_all();
    }
    std::lock_guard lock(mutex_);
    seconds_[static_cast<std::size_t>(s)] = busy;
    --pending_;
    changed_.notify_all();
  }
}

}  // namespace tandem::detail
