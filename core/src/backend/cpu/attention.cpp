// The CPU backend's attention operations: the masked softmax of attention scores and the axis
// swap between (batch, time, heads, dim) and (batch, heads, time, dim).
#include <algorithm>
#include <cstring>
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

void CpuBackend::masked_softmax(const AttentionMaskDesc& d, const Tensor& scores,
                                const Tensor* mask, Tensor& probs) {
  require_device(*this, scores, "masked_softmax");
  require_device(*this, probs, "masked_softmax");
  if (mask) require_device(*this, *mask, "masked_softmax");
  const std::int64_t rows = check_attention_scores(d, scores, mask, probs);
  const float* x = scores.data();
  float* y = probs.data();
  const float* keep = mask ? mask->data() : nullptr;
  cpu::parallel_for(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(d.tk, 1)),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        const std::int64_t i = r % d.tq, b = r / (d.heads * d.tq);
                        math::masked_softmax_row(x + r * d.tk, y + r * d.tk, d.tk,
                                                 keep ? keep + (b * d.tq + i) * d.tk : nullptr,
                                                 d.causal ? i : d.tk - 1, d.keras2_hidden_rows);
                      }
                    });
}

void CpuBackend::swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                                  Tensor& y) {
  require_device(*this, x, "swap_middle_axes");
  require_device(*this, y, "swap_middle_axes");
  check_swap_middle_axes(x, dims, y);
  const std::int64_t d0 = dims[0], d1 = dims[1], d2 = dims[2], d3 = dims[3];
  const float* in = x.data();
  float* out = y.data();
  const auto bytes = static_cast<std::size_t>(d3) * sizeof(float);
  // One output row of d3 values at a time: y[a, c, b, :] = x[a, b, c, :].
  cpu::parallel_for(d0 * d2 * d1, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(d3, 1)),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        const std::int64_t b = r % d1, c = (r / d1) % d2, a = r / (d1 * d2);
                        std::memcpy(out + r * d3, in + ((a * d1 + b) * d2 + c) * d3, bytes);
                      }
                    });
}

}  // namespace tandem::backend
