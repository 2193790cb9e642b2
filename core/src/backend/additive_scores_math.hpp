// Private: the arithmetic of Keras' additive (Bahdanau-style) attention scores, written once as
// inline functions that nvcc compiles for the device and g++ for the host: the CPU backend's
// loops (backend/cpu/attention.cpp) and the CUDA kernels (cuda/ops/attention_kernels.cu) call
// these very functions, so the two agree but for tanh (as kernel_math.hpp says).
//
// For a query row q (dim values) and a key row k:
//   t[d]        = tanh(s · (q[d] + k[d]))      (the pair's values, kept for the backward)
//   score(q, k) = Σ_d w[d] · t[d]
// with w the per-feature weights (AdditiveAttention's `scale` of shape (dim,); absent: every 1)
// and s one factor (Attention's `scale` in score_mode "concat"; absent: 1). Attention's
// concat_score_weight multiplies the scores afterwards (the layer's, not these functions').
// The pairs' values are laid out (batch, tq, tk, dim). Every sum adds its terms in ascending
// index order, in double, so results are the same bits run to run. Ownership: none (pure
// functions on borrowed pointers). Thread-safety: pure, any thread.
//
// Header rules: as kernel_math.hpp's.
#pragma once

#include <cstdint>

#include "backend/kernel_math.hpp"

namespace tandem::backend {

/// The shapes of an additive score computation: query (batch, tq, dim), key (batch, tk, dim),
/// the pairs' values (batch, tq, tk, dim), scores (batch, tq, tk); whether the per-feature
/// weights and the factor are given.
struct AdditiveScoresDesc {
  std::int64_t batch = 0, tq = 0, tk = 0, dim = 0;
  bool has_weights = false;  // w (dim values); otherwise every w[d] is 1
  bool has_factor = false;   // s (one value); otherwise 1
};

namespace math {

/// w[d], or 1 without weights.
TANDEM_HD inline float additive_weight(const float* w, std::int64_t d) {
  return w ? w[d] : 1.0f;
}

/// s · (q + k), or q + k without a factor: what the pair's tanh is taken of.
TANDEM_HD inline float additive_argument(float q, float k, const float* s) {
  const float z = fadd(q, k);
  return s ? fmul(*s, z) : z;
}

/// The arguments of one query row q against tk key rows (keys, tk x dim), into `pairs` (tk x
/// dim): the values tanh is then taken of.
TANDEM_HD inline void additive_arguments_row(const float* q, const float* keys, const float* s,
                                             std::int64_t tk, std::int64_t dim, float* pairs) {
  for (std::int64_t j = 0; j < tk; ++j)
    for (std::int64_t d = 0; d < dim; ++d)
      pairs[j * dim + d] = additive_argument(q[d], keys[j * dim + d], s);
}

/// The scores of one query row from its pairs' tanh values (tk x dim): out[j] = Σ_d w[d]·t[j, d].
TANDEM_HD inline void additive_scores_row(const float* pairs, const float* w, std::int64_t tk,
                                          std::int64_t dim, float* out) {
  for (std::int64_t j = 0; j < tk; ++j) {
    double sum = 0;
    for (std::int64_t d = 0; d < dim; ++d)
      sum = dadd(sum, f2d(fmul(additive_weight(w, d), pairs[j * dim + d])));
    out[j] = d2f(sum);
  }
}

/// The gradients reached through one query row q, given its pairs' tanh values t (tk x dim) and
/// the gradients g (tk values) of its scores:
///   dq[d]      = s · Σ_j g[j] · w[d] · (1 − t²)
///   w_part[d]  = Σ_j g[j] · t                              (this row's share of dw; may be null)
///   *s_part    = Σ_j Σ_d g[j] · w[d] · (1 − t²) · (q[d] + k_j[d])   (its share of ds; may be
///                null)
/// dq may be null (no input gradient asked).
TANDEM_HD inline void additive_scores_query_row_backward(const float* q, const float* keys,
                                                         const float* pairs, const float* w,
                                                         const float* s, const float* g,
                                                         std::int64_t tk, std::int64_t dim,
                                                         float* dq, float* w_part, float* s_part) {
  double s_sum = 0;
  for (std::int64_t d = 0; d < dim; ++d) {
    double q_sum = 0, w_sum = 0;
    for (std::int64_t j = 0; j < tk; ++j) {
      const float t = pairs[j * dim + d];
      const float u = fmul(fmul(g[j], additive_weight(w, d)), fsub(1.0f, fmul(t, t)));
      q_sum = dadd(q_sum, f2d(u));
      w_sum = dadd(w_sum, f2d(fmul(g[j], t)));
      if (s_part) s_sum = dadd(s_sum, f2d(fmul(u, fadd(q[d], keys[j * dim + d]))));
    }
    if (dq) dq[d] = s ? fmul(*s, d2f(q_sum)) : d2f(q_sum);
    if (w_part) w_part[d] = d2f(w_sum);
  }
  if (s_part) *s_part = d2f(s_sum);
}

/// The gradient reaching one key row from the tq query rows, given its pairs' tanh values
/// (pairs[i · pair_stride + d] for query i) and their scores' gradients g[i · g_stride]:
///   dk[d] = s · Σ_i g[i] · w[d] · (1 − t²)
TANDEM_HD inline void additive_scores_key_row_backward(const float* pairs, std::int64_t pair_stride,
                                                       const float* w, const float* s,
                                                       const float* g, std::int64_t g_stride,
                                                       std::int64_t tq, std::int64_t dim,
                                                       float* dk) {
  for (std::int64_t d = 0; d < dim; ++d) {
    double sum = 0;
    for (std::int64_t i = 0; i < tq; ++i) {
      const float t = pairs[i * pair_stride + d];
      sum = dadd(sum,
                 f2d(fmul(fmul(g[i * g_stride], additive_weight(w, d)), fsub(1.0f, fmul(t, t)))));
    }
    dk[d] = s ? fmul(*s, d2f(sum)) : d2f(sum);
  }
}

}  // namespace math

}  // namespace tandem::backend
