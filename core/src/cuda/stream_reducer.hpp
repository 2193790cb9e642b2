// Private (CUDA module): the part of a gradient communicator a CUDA replica drives itself — an
// in-place sum of a slice of its device gradients across every participant, queued on a stream
// of the replica's, so the reduction of one layer's gradients overlaps the backward pass of the
// layers before it. The "nccl" Communicator implements it (nccl_communicator.cpp).
//
// Every participant must queue the same reductions (same sizes, same order), each from the
// thread that drives its device; a reduction completes only when every participant queued it.
// Thread-safety: one thread per participant, concurrently.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

class StreamReducer {
 public:
  virtual ~StreamReducer() = default;
  /// Queues on `stream` the sum of `count` floats at `data` (participant's device memory) over
  /// every participant, written back in place. Throws RunError when NCCL refuses.
  virtual void all_reduce_on_stream(int participant, float* data, std::size_t count,
                                    cudaStream_t stream) = 0;
};

}  // namespace tandem::cuda
