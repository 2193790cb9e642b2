// Private (nn): the dropout masks of what enters a convolutional LSTM's convolutions (its input,
// and h_prev for the recurrent one): per sample, cell and channel, the same at every step — Keras
// 3's ConvLSTMCell draws one mask for all four gates, Keras 2's one per gate (its dp_mask[0..3]
// and rec_dp_mask[0..3]). With four, the masked value is four copies side by side in the
// channels (cell by cell: the gate i copy, f, c, o), which a convolution of 4 groups over the
// layer's own kernel (k..., channels, 4 · filters: group g's filters are gate g's) turns into the
// four gates. The masks come from the layer's random stream (a hash of the call, the global
// sample and the element), so a replica holding some of the batch's samples draws what the whole
// batch would for them.
// A plain value owned by its layer; one thread at a time; tensors on the layer's backend.
#pragma once

#include "backend/ops.hpp"
#include "nn/random_stream.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::nn {

class GateMasks {
 public:
  /// 1 (Keras 3) or 4 (Keras 2: one per gate).
  explicit GateMasks(int copies = 1) : copies_(copies) {}
  int copies() const { return copies_; }
  void set_copies(int copies) { copies_ = copies; }

  /// Draws this forward's masks (0 or 1 / (1 - rate)) for `batch` samples of `cells` cells of
  /// `channels`, the batch's rows starting at global sample `first_sample`.
  void draw(backend::Backend& ops, RandomStream& random, double rate, std::int64_t first_sample,
            std::int64_t batch, std::int64_t cells, std::int64_t channels);
  /// out (steps · batch, cells · copies · channels) = each of x's `steps` blocks of rows (batch,
  /// cells · channels), copied `copies` times per cell, times the masks.
  void apply(backend::Backend& ops, const Tensor& x, std::int64_t steps, Tensor& out);
  /// dx (steps · batch, cells · channels) = the sum over the copies of d_out times the masks:
  /// apply's gradient.
  void apply_backward(backend::Backend& ops, const Tensor& d_out, std::int64_t steps, Tensor& dx);

 private:
  int copies_;
  std::int64_t batch_ = 0, cells_ = 0, channels_ = 0;
  Tensor mask_;            // (batch, cells · copies · channels)
  Tensor work_, scratch_;  // the draw's ones, then one copy's part of a gradient; masked values
};

}  // namespace tandem::nn

TANDEM_INTERNAL_API_END
