// The CPU backend's attention operations: additive attention scores (and their gradients), the
// masked softmax of attention scores (and its gradient) and the axis swap between (batch, time,
// heads, dim) and (batch, heads, time, dim).
#include <algorithm>
#include <cstring>
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/eltwise.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// row(r, math::attention_row(d, mask, r)) for each row r of attention scores (batch, heads, tq,
// tk), in parallel.
template <class Row>
void for_each_attention_row(const AttentionMaskDesc& d, std::int64_t rows, const Tensor* mask,
                            const Row& row) {
  const float* keep = mask ? mask->data() : nullptr;
  cpu::parallel_for(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(d.tk, 1)),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r)
                        row(r, math::attention_row(d, keep, r));
                    });
}

// row(r) for each of `count` rows of `row_values` values each (additive attention's query or
// key rows), in parallel.
template <class Row>
void for_each_additive_row(std::int64_t count, std::int64_t row_values, const Row& row) {
  cpu::parallel_for(count, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, row_values)),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r) row(r);
                    });
}

}  // namespace

void CpuBackend::masked_softmax(const AttentionMaskDesc& d, const Tensor& scores,
                                const Tensor* mask, Tensor& probs) {
  require_device(*this, scores, "masked_softmax");
  require_device(*this, probs, "masked_softmax");
  if (mask) require_device(*this, *mask, "masked_softmax");
  const std::int64_t rows = check_attention_scores(d, scores, mask, probs);
  const float* x = scores.data();
  float* y = probs.data();
  for_each_attention_row(d, rows, mask, [&](std::int64_t r, const math::AttentionRow& a) {
    math::masked_softmax_row(x + r * d.tk, y + r * d.tk, d.tk, a.keep, a.last, d.hidden_rows);
  });
}

void CpuBackend::masked_softmax_backward(const AttentionMaskDesc& d, const Tensor& probs,
                                         const Tensor* mask, const Tensor& d_probs,
                                         Tensor& d_scores) {
  require_device(*this, probs, "masked_softmax_backward");
  require_device(*this, d_probs, "masked_softmax_backward");
  require_device(*this, d_scores, "masked_softmax_backward");
  if (mask) require_device(*this, *mask, "masked_softmax_backward");
  const std::int64_t rows = check_attention_scores(d, probs, mask, d_probs);
  check_attention_scores(d, probs, mask, d_scores);
  const float* y = probs.data();
  const float* g = d_probs.data();
  float* gi = d_scores.data();
  for_each_attention_row(d, rows, mask, [&](std::int64_t r, const math::AttentionRow& a) {
    math::masked_softmax_row_backward(y + r * d.tk, g + r * d.tk, gi + r * d.tk, d.tk, a.keep,
                                      a.last, d.hidden_rows);
  });
}

void CpuBackend::additive_pairs(const AdditiveScoresDesc& d, const Tensor& query, const Tensor& key,
                                const Tensor* factor, Tensor& pairs) {
  require_device(*this, {&query, &key, factor, &pairs}, "additive_pairs");
  check_additive_scores(d, query, key, nullptr, factor, {{&pairs, d.batch * d.tq * d.tk * d.dim}},
                        false);
  const float* s = factor ? factor->data() : nullptr;
  const float* q = query.data();
  const float* k = key.data();
  float* out = pairs.data();
  const std::int64_t row = d.tk * d.dim;
  for_each_additive_row(d.batch * d.tq, row, [&](std::int64_t r) {
    math::additive_arguments_row(q + r * d.dim, k + (r / d.tq) * row, s, d.tk, d.dim,
                                 out + r * row);
  });
  // tanh by oneDNN's vectorised primitive, as the activations' (eltwise.hpp).
  cpu::eltwise_forward(cpu::Eltwise::tanh, out, out, pairs.size());
}

void CpuBackend::additive_scores(const AdditiveScoresDesc& d, const Tensor& pairs,
                                 const Tensor* weights, Tensor& scores) {
  require_device(*this, {&pairs, weights, &scores}, "additive_scores");
  const std::int64_t rows = d.batch * d.tq, row = d.tk * d.dim;
  check_additive_pairs(d, pairs, weights, scores);
  const float* w = weights ? weights->data() : nullptr;
  const float* t = pairs.data();
  float* out = scores.data();
  for_each_additive_row(rows, row, [&](std::int64_t r) {
    math::additive_scores_row(t + r * row, w, d.tk, d.dim, out + r * d.tk);
  });
}

void CpuBackend::additive_scores_backward(const AdditiveScoresDesc& d, const Tensor& query,
                                          const Tensor& key, const Tensor& pairs,
                                          const Tensor* weights, const Tensor* factor,
                                          const Tensor& d_scores, Tensor* d_query, Tensor* d_key,
                                          Tensor* weight_parts, Tensor* factor_parts) {
  require_device(*this,
                 {&query, &key, &pairs, weights, factor, &d_scores, d_query, d_key, weight_parts,
                  factor_parts},
                 "additive_scores_backward");
  check_additive_scores_backward(d, query, key, pairs, weights, factor, d_scores, d_query, d_key,
                                 weight_parts, factor_parts);
  const std::int64_t rows = d.batch * d.tq, row = d.tk * d.dim;
  const float* w = weights ? weights->data() : nullptr;
  const float* s = factor ? factor->data() : nullptr;
  const float* q = query.data();
  const float* k = key.data();
  const float* t = pairs.data();
  const float* g = d_scores.data();
  if (d_query || weight_parts || factor_parts)
    for_each_additive_row(rows, row, [&](std::int64_t r) {
      math::additive_scores_query_row_backward(
          q + r * d.dim, k + (r / d.tq) * row, t + r * row, w, s, g + r * d.tk, d.tk, d.dim,
          d_query ? d_query->data() + r * d.dim : nullptr,
          weight_parts ? weight_parts->data() + r * d.dim : nullptr,
          factor_parts ? factor_parts->data() + r : nullptr);
    });
  if (d_key)
    for_each_additive_row(d.batch * d.tk, row, [&](std::int64_t r) {
      const std::int64_t b = r / d.tk, j = r % d.tk;
      math::additive_scores_key_row_backward(t + (b * d.tq * d.tk + j) * d.dim, row, w, s,
                                             g + b * d.tq * d.tk + j, d.tk, d.tq, d.dim,
                                             d_key->data() + r * d.dim);
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
