// Private (CUDA module): a CUDA replica's training steps captured as CUDA graphs and replayed.
//
// A step is captured the second time a step of its key comes (the first sized every buffer) and
// replayed after: one launch instead of dozens for launch-bound models. Never when
// TANDEM_CUDA_GRAPHS=0, once a step needed the host (CudaBackend::captured_safely), or after a
// capture failed (with a warning: graphs are a speed-up, never a reason for a run to fail). A
// graph holds the addresses of the buffers it was captured with, so any new allocation since
// (a buffer grew, e.g. for a larger validation batch) drops every graph.
//
// Ownership: owns the instantiated graphs (RAII). Borrows the backend and the allocator (the
// replica's, which outlive it). Thread-safety: one thread at a time (the replica's worker thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "nn/loss.hpp"
#include "nn/metric.hpp"

namespace tandem::cuda {

/// What a captured training step depends on besides the buffers' contents.
struct StepKey {
  std::int64_t rows;
  std::int64_t sample_offset;
  float loss_scale;
  const Loss* loss;
  std::vector<const Metric*> metrics;
  const float* x;  // the input slot's buffers
  const float* y;
  bool operator<(const StepKey& o) const {
    return std::tie(rows, sample_offset, loss_scale, loss, metrics, x, y) <
           std::tie(o.rows, o.sample_offset, o.loss_scale, o.loss, o.metrics, o.x, o.y);
  }
};

class StepGraphs {
 public:
  /// Graphs of the steps queued on `stream` of GPU `device`; off from the start when
  /// TANDEM_CUDA_GRAPHS=0.
  StepGraphs(CudaBackend& backend, DeviceAllocator& allocator, cudaStream_t stream, int device);
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  /// Queues the step `key` on the stream: replayed, captured while `enqueue` queues it, or queued
  /// by `enqueue` directly (see above). `on_failed_capture` runs when a capture failed, before
  /// the step is queued again directly (undo what the failed enqueue left behind).
  void run(const StepKey& key, const std::function<void()>& enqueue,
           const std::function<void()>& on_failed_capture);

 private:
  struct ExecDeleter {
    void operator()(CUgraphExec_st* exec) const { cudaGraphExecDestroy(exec); }
  };
  using GraphExec = std::unique_ptr<CUgraphExec_st, ExecDeleter>;

  /// The step captured into a graph, or null (with the reason in `failure`).
  GraphExec capture(const std::function<void()>& enqueue, std::string& failure);
  void clear();

  static constexpr std::size_t kMaxGraphs = 8;  // captured steps kept (shapes x input slots)

  CudaBackend& backend_;
  DeviceAllocator& allocator_;
  cudaStream_t stream_;
  int device_;
  bool on_ = true;
  std::map<StepKey, GraphExec> graphs_;
  std::set<StepKey> seen_;
  std::int64_t allocations_at_capture_ = 0;  // the allocator's count when graphs were captured
};

}  // namespace tandem::cuda
