#include "cuda/replica/batch_staging.hpp"

#include "cuda/replica/host_copies.hpp"

namespace tandem::cuda {

namespace {

bool same_rows(const Tensor& a, const Tensor& b) {
  return a.data() == b.data() && a.shape() == b.shape();
}

}  // namespace

BatchStaging::BatchStaging(backend::Backend& backend, int device)
    : backend_(backend), copy_stream_(device) {}

BatchStaging::~BatchStaging() {
  cudaStreamSynchronize(copy_stream_.get());
}

bool BatchStaging::holds(const Slot& slot, const Tensor& x, const Tensor& y, bool with_y) const {
  return slot.reusable && same_rows(slot.host_x, x) && (!with_y || same_rows(slot.host_y, y));
}

void BatchStaging::place(const Tensor& x, const Tensor& y, bool with_y, cudaStream_t step) {
  Slot& other = slots_[1 - current_];
  if (staged_ && holds(other, x, y, with_y)) {
    check(cudaStreamWaitEvent(step, staged_ready_.get(), 0), "cudaStreamWaitEvent");
    current_ = 1 - current_;
    staged_ = false;
  } else if (!holds(slots_[current_], x, y, with_y)) {
    Slot& slot = slots_[current_];
    backend_.place(slot.x, x.shape());
    copy_to_device(slot.x.data(), x.data(), x.size(), step);
    if (with_y) {
      backend_.place(slot.y, y.shape());
      copy_to_device(slot.y.data(), y.data(), y.size(), step);
    }
  }
  // Used now: the promise was until this step.
  Slot& used = slots_[current_];
  used.reusable = false;
  used.host_x = Tensor(), used.host_y = Tensor();
}

void BatchStaging::stage_next(const Tensor& x, const Tensor& y, const detail::NextRows* next,
                              cudaStream_t step) {
  if (!next) return;
  if (same_rows(next->x, x) && same_rows(next->y, y)) {
    Slot& current = slots_[current_];
    current.host_x = x, current.host_y = y;
    current.reusable = true;
    return;
  }
  if (next->x.size() == 0) return;
  Slot& slot = slots_[1 - current_];
  const bool grows = slot.x.size() < next->x.size() || slot.y.size() < next->y.size();
  if (grows) {
    // The allocator orders reuse by the step's stream alone: a block that goes back to it must
    // not be written by a copy any more, and a block it hands out here must not be in use by the
    // step just queued. Only when a slot grows: the first steps of a batch size.
    check(cudaStreamSynchronize(copy_stream_.get()), "a staged copy");
    check(cudaStreamSynchronize(step), "the training step");
  }
  backend_.place(slot.x, next->x.shape());
  backend_.place(slot.y, next->y.shape());
  copy_to_device(slot.x.data(), next->x.data(), next->x.size(), copy_stream_.get());
  copy_to_device(slot.y.data(), next->y.data(), next->y.size(), copy_stream_.get());
  check(cudaEventRecord(staged_ready_.get(), copy_stream_.get()), "cudaEventRecord");
  slot.host_x = next->x, slot.host_y = next->y;
  slot.reusable = true;
  staged_ = true;
}

}  // namespace tandem::cuda
