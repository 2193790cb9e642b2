// Attention probabilities under a mask: which keys a query may see, and what a query that may see
// none of them gets — the three answers of the Keras versions Tandem reads (docs/config.md,
// MultiHeadAttention). The arithmetic is backend/kernel_math.hpp's masked_softmax_row, written once
// for the host and the device.
//
// Header rules: no includes beyond the standard library's; compiles with nvcc -std=c++17.
#pragma once

#include <cstdint>

namespace tandem::backend {

/// What a row of attention probabilities holds when its mask hides every key.
enum class HiddenRows {
  /// All zeros, and no gradient: Keras 3's masked softmax (a layer with dropout, whose
  /// probabilities it returns or drops out: where(mask, x, -1e9), softmax, where(mask, p, 0)).
  zeros,
  /// 1 / tk each, and no gradient to the scores: Keras 3's fused dot-product attention (a layer
  /// without dropout; the TensorFlow and JAX backends), which replaces every hidden score by
  /// the same large negative number.
  uniform,
  /// The softmax of every score less 1e9 in float (near uniform), with its gradient: Keras 2's
  /// additive mask, (1 - mask) · -1e9, which it does not apply again after the softmax.
  keras2_additive,
};

/// Attention probabilities: softmax over rows of `tk` scores laid out (batch, heads, tq, tk),
/// leaving out the keys a mask hides (mask[b, i, j] == 0, mask (batch, tq, tk)) and, causal, the
/// keys after the query (j > i); a hidden key gets probability 0, a row with every key hidden
/// what `hidden_rows` says.
struct AttentionMaskDesc {
  std::int64_t heads = 1, tq = 0, tk = 0;
  bool causal = false;
  HiddenRows hidden_rows = HiddenRows::zeros;
};

}  // namespace tandem::backend
