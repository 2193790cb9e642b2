#include "cuda/replica/step_graphs.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

#include "cuda/ops/cuda_check.hpp"
#include "util/environment_settings.hpp"

namespace tandem::cuda {

StepGraphs::StepGraphs(CudaBackend& backend, DeviceAllocator& allocator, cudaStream_t stream,
                       int device)
    : backend_(backend), allocator_(allocator), stream_(stream), device_(device) {
  on_ = cuda_graphs_setting();
  allocations_at_capture_ = allocator_.stats().allocations;
}

void StepGraphs::run(const StepKey& key, const std::function<void()>& enqueue,
                     const std::function<void()>& on_failed_capture) {
  if (!on_) {
    enqueue();
    return;
  }
  if (allocator_.stats().allocations != allocations_at_capture_) clear();
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    check(cudaGraphLaunch(it->second.get(), stream_), "cudaGraphLaunch (the training step)");
    return;
  }
  if (!seen_.count(key)) {
    seen_.insert(key);
    backend_.reset_capture_check();
    enqueue();
    // A step that needed the host (an Embedding's index check) cannot be replayed.
    if (!backend_.captured_safely()) {
      spdlog::debug("cuda:{}: this model's step synchronizes with the host; no CUDA graphs",
                    device_);
      on_ = false;
    }
    // This first, uncaptured run allocates the buffers of its shape: graphs captured before it
    // may use memory it moved, so they go; the count it leaves is the baseline of the next
    // capture (the next run of this shape), which it would otherwise clear again.
    if (allocator_.stats().allocations != allocations_at_capture_) graphs_.clear();
    allocations_at_capture_ = allocator_.stats().allocations;
    return;
  }
  if (graphs_.size() >= kMaxGraphs) clear();  // e.g. a changing last batch
  std::string failure;
  const std::int64_t before = allocator_.stats().allocations;
  GraphExec exec = capture(enqueue, failure);
  if (!exec) {
    on_failed_capture();
    on_ = false;
    spdlog::warn(
        "cuda:{}: the training step could not be captured in a CUDA graph ({}); it runs without "
        "one (slower for small batches)",
        device_, failure);
    enqueue();
    return;
  }
  // A capture that allocated may have moved buffers that graphs captured before it use.
  if (allocator_.stats().allocations != before) graphs_.clear();
  check(cudaGraphLaunch(exec.get(), stream_), "cudaGraphLaunch (the training step)");
  graphs_.emplace(key, std::move(exec));
  allocations_at_capture_ = allocator_.stats().allocations;
}

StepGraphs::GraphExec StepGraphs::capture(const std::function<void()>& enqueue,
                                          std::string& failure) {
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  try {
    enqueue();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (failure.empty() && ended != cudaSuccess) failure = cudaGetErrorString(ended);
  cudaGraphExec_t made = nullptr;
  if (failure.empty()) {
    const cudaError_t instantiated = cudaGraphInstantiate(&made, graph, 0);
    if (instantiated != cudaSuccess) failure = cudaGetErrorString(instantiated);
  }
  GraphExec exec(made);
  if (graph) cudaGraphDestroy(graph);
  if (!failure.empty()) {
    cudaGetLastError();  // the capture's error is not the step's
    return nullptr;
  }
  return exec;
}

void StepGraphs::clear() {
  graphs_.clear();
  seen_.clear();
  allocations_at_capture_ = allocator_.stats().allocations;
}

}  // namespace tandem::cuda
