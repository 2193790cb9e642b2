// Private (CUDA module): a CUDA replica's batches on its GPU, with the next one copied while the
// current step computes.
//
// Two device input slots. The step in flight reads one; the next batch, when the caller names it
// (NextRows), is copied into the other on a copy stream while the step computes, and the next
// step starts from it without a copy of its own. A step whose rows are those the caller promised
// unchanged (NextRows naming the current rows) reuses the device copy.
//
// Ownership: owns the slots' device tensors, the copy stream and its event; holds the host rows
// it was promised (shared storage) until the step that uses them. Borrows the backend (for its
// allocator). Thread-safety: one thread at a time (the replica's worker thread).
#pragma once

#include <cuda_runtime_api.h>

#include "backend/ops.hpp"
#include "cuda/ops/cuda_handles.hpp"
#include "parallel/replica.hpp"

namespace tandem::cuda {

class BatchStaging {
 public:
  BatchStaging(backend::Backend& backend, int device);
  BatchStaging(const BatchStaging&) = delete;
  BatchStaging& operator=(const BatchStaging&) = delete;
  /// Waits for a staged copy still in flight (no copy may outlive the slots).
  ~BatchStaging();

  /// Makes x() (and with `with_y`, y()) hold the rows `x`/`y` (host tensors) for a step queued
  /// on `step`: the other slot when they were staged there, the current one when it holds them
  /// and they were promised unchanged, a copy on `step` otherwise.
  void place(const Tensor& x, const Tensor& y, bool with_y, cudaStream_t step);
  /// After the step on x()/y() is queued on `step`: `next`'s rows to the device. The rows of this
  /// step again: the current slot keeps them. Others: copied into the other slot on the copy
  /// stream, overlapping the step (that slot's last reader, the step before, has finished: the
  /// caller synchronized with it). Null `next`: nothing is known of the next batch.
  void stage_next(const Tensor& x, const Tensor& y, const detail::NextRows* next,
                  cudaStream_t step);

  /// The current slot's rows on the device (what the step reads).
  const Tensor& x() const { return slots_[current_].x; }
  const Tensor& y() const { return slots_[current_].y; }

 private:
  // A device copy of a batch's rows: x, and y when the step has a loss.
  struct Slot {
    Tensor x, y;            // on the device
    Tensor host_x, host_y;  // the host rows it holds (kept alive while held), when reusable
    bool reusable = false;  // the caller promised host_x/host_y unchanged (NextRows)
  };

  bool holds(const Slot& slot, const Tensor& x, const Tensor& y, bool with_y) const;

  backend::Backend& backend_;
  CudaStream copy_stream_;
  CudaEvent staged_ready_;  // the last staged copy is done
  Slot slots_[2];
  int current_ = 0;      // the slot of the last step
  bool staged_ = false;  // the other slot holds staged rows (staged_ready_ marks the copy)
};

}  // namespace tandem::cuda
