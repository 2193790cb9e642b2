#include "nn/gate_masks.hpp"

namespace tandem::nn {

void GateMasks::draw(backend::Backend& ops, RandomStream& random, double rate,
                     std::int64_t first_sample, std::int64_t batch, std::int64_t cells,
                     std::int64_t channels) {
  batch_ = batch;
  cells_ = cells;
  channels_ = channels;
  const std::int64_t width = cells * copies_ * channels;
  ops.fill(ops.place(work_, {batch, width}), 1.0f);
  ops.dropout_forward(random.next_call(rate, first_sample), work_,
                      ops.place(scratch_, {batch, width}), ops.place(mask_, {batch, width}), width);
}

void GateMasks::apply(backend::Backend& ops, const Tensor& x, std::int64_t steps, Tensor& out) {
  const std::int64_t rows = steps * batch_, width = cells_ * copies_ * channels_;
  ops.place(out, {rows, width});
  // One mask: each step's block times the mask, read from x. Four: each cell's channels once per
  // gate, side by side, then masked in place.
  const Tensor& source = copies_ == 1 ? x : out;
  if (copies_ > 1) {
    const Tensor cells = x.reshaped({rows * cells_, channels_});
    for (int g = 0; g < copies_; ++g)
      ops.copy_columns(cells, channels_, 0, out, copies_ * channels_, g * channels_, channels_);
  }
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t at = s * batch_ * width;
    Tensor block = Tensor::view(out, at, {batch_, width});
    ops.multiply(Tensor::view(source, at, {batch_, width}), mask_, block);
  }
}

void GateMasks::apply_backward(backend::Backend& ops, const Tensor& d_out, std::int64_t steps,
                               Tensor& dx) {
  const std::int64_t rows = steps * batch_, width = cells_ * copies_ * channels_;
  Tensor& masked = copies_ == 1 ? ops.place(dx, {rows, width}) : ops.place(scratch_, {rows, width});
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t at = s * batch_ * width;
    Tensor block = Tensor::view(masked, at, {batch_, width});
    ops.multiply(Tensor::view(d_out, at, {batch_, width}), mask_, block);
  }
  if (copies_ == 1) return;
  // The copies' gradients summed, gate by gate in order.
  const Tensor cells = masked.reshaped({rows * cells_, copies_ * channels_});
  ops.place(dx, {rows, cells_ * channels_});
  Tensor dx_cells = dx.reshaped({rows * cells_, channels_});
  ops.copy_columns(cells, copies_ * channels_, 0, dx_cells, channels_, 0, channels_);
  ops.place(work_, {rows * cells_, channels_});
  for (int g = 1; g < copies_; ++g) {
    ops.copy_columns(cells, copies_ * channels_, g * channels_, work_, channels_, 0, channels_);
    ops.add(dx_cells, work_, dx_cells);
  }
}

}  // namespace tandem::nn
