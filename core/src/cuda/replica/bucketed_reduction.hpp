// Private (CUDA module): a CUDA replica's gradient sum across GPUs during its backward pass.
//
// The trainable gradients (device_parameters.hpp) are summed in buckets of whole layers from the
// last layer back (gradient_buckets.hpp): when a bucket's layers have run their backward, its
// all-reduce is queued on a reduce stream behind an event, overlapping the backward of the
// layers before it; join() makes the step's stream wait for every bucket queued. Inside a CUDA
// graph capture the same calls join the reductions into the graph.
//
// Ownership: owns its reduce stream and events; borrows the communicator (the plan's, which
// outlives the replica) and the gradients tensor (the replica's DeviceParameters). Thread-safety:
// one thread at a time (the replica's worker thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/ops/cuda_handles.hpp"
#include "cuda/replica/device_parameters.hpp"
#include "parallel/communicator.hpp"

namespace tandem::cuda {

class BucketedReduction {
 public:
  /// Sums `gradients` (laid out as `layout` of `device_model`) as participant `participant` of
  /// `communicator` on GPU `device`; with a null communicator every call does nothing.
  BucketedReduction(StreamCommunicator* communicator, int participant, int device,
                    Model& device_model, const ParameterLayout& layout, Tensor& gradients);
  BucketedReduction(const BucketedReduction&) = delete;
  BucketedReduction& operator=(const BucketedReduction&) = delete;

  /// True when there is something to sum (the replica's train() then sums its gradients).
  bool active() const { return communicator_ != nullptr; }
  /// Layer `layer`'s backward has been queued on `step`: queues the all-reduce of the bucket it
  /// closes, if any, behind it.
  void after_backward_of(std::size_t layer, cudaStream_t step);
  /// `step` waits for every reduction queued since the last join.
  void join(cudaStream_t step);
  /// Forgets reductions queued into a capture that failed (nothing of them will run).
  void abandon() { queued_ = false; }

 private:
  StreamCommunicator* communicator_;  // null: nothing to sum
  int participant_;
  Tensor& gradients_;
  CudaStream reduce_stream_;
  CudaEvent grads_ready_, reduced_;  // a bucket's gradients exist; the reductions ended
  std::vector<std::pair<std::int64_t, std::int64_t>> bucket_of_layer_;  // [begin, end) per layer
  bool queued_ = false;  // since the last join()
};

}  // namespace tandem::cuda
