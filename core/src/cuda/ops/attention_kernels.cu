// Private (CUDA module): attention's kernels — additive attention's pairs (a thread per value),
// scores and their gradients (one thread per query or key row, additive_scores_math's
// functions), the masked softmax and its gradient (one
// thread per row, kernel_math's masked_softmax_row and masked_softmax_row_backward, as the CPU
// backend) and the axis swap between (batch, time, heads, dim) and (batch, heads, time, dim) (one
// thread per element). Ownership: none. Thread-safety: launchers queue on the given stream, any
// thread.
#include "backend/additive_scores_math.hpp"
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace {

__global__ void masked_softmax_kernel(const float* scores, const float* mask, float* probs,
                                      std::int64_t rows, backend::AttentionMaskDesc d) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const backend::math::AttentionRow a = backend::math::attention_row(d, mask, r);
    backend::math::masked_softmax_row(scores + r * d.tk, probs + r * d.tk, d.tk, a.keep, a.last,
                                      d.hidden_rows);
  }
}

__global__ void masked_softmax_backward_kernel(const float* probs, const float* mask,
                                               const float* d_probs, float* d_scores,
                                               std::int64_t rows, backend::AttentionMaskDesc d) {
  for (std::int64_t r = grid_first(); r < rows; r += grid_step()) {
    const backend::math::AttentionRow a = backend::math::attention_row(d, mask, r);
    backend::math::masked_softmax_row_backward(probs + r * d.tk, d_probs + r * d.tk,
                                               d_scores + r * d.tk, d.tk, a.keep, a.last,
                                               d.hidden_rows);
  }
}

__global__ void additive_pairs_kernel(backend::AdditiveScoresDesc d, const float* query,
                                      const float* key, const float* s, float* pairs) {
  const std::int64_t n = d.batch * d.tq * d.tk * d.dim;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    const std::int64_t f = e % d.dim, j = (e / d.dim) % d.tk,
                       r = e / (d.dim * d.tk);  // r: b·tq + i
    const float q = query[r * d.dim + f], k = key[((r / d.tq) * d.tk + j) * d.dim + f];
    pairs[e] = backend::math::tanh_f(backend::math::additive_argument(q, k, s));
  }
}

__global__ void additive_scores_kernel(backend::AdditiveScoresDesc d, const float* pairs,
                                       const float* w, float* scores) {
  for (std::int64_t r = grid_first(); r < d.batch * d.tq; r += grid_step())
    backend::math::additive_scores_row(pairs + r * d.tk * d.dim, w, d.tk, d.dim, scores + r * d.tk);
}

__global__ void additive_query_rows_kernel(backend::AdditiveScoresDesc d, const float* query,
                                           const float* key, const float* pairs, const float* w,
                                           const float* s, const float* g, float* dq,
                                           float* w_parts, float* s_parts) {
  for (std::int64_t r = grid_first(); r < d.batch * d.tq; r += grid_step())
    backend::math::additive_scores_query_row_backward(
        query + r * d.dim, key + (r / d.tq) * d.tk * d.dim, pairs + r * d.tk * d.dim, w, s,
        g + r * d.tk, d.tk, d.dim, dq ? dq + r * d.dim : nullptr,
        w_parts ? w_parts + r * d.dim : nullptr, s_parts ? s_parts + r : nullptr);
}

__global__ void additive_key_rows_kernel(backend::AdditiveScoresDesc d, const float* pairs,
                                         const float* w, const float* s, const float* g,
                                         float* dk) {
  for (std::int64_t r = grid_first(); r < d.batch * d.tk; r += grid_step()) {
    const std::int64_t b = r / d.tk, j = r % d.tk;
    backend::math::additive_scores_key_row_backward(pairs + (b * d.tq * d.tk + j) * d.dim,
                                                    d.tk * d.dim, w, s, g + b * d.tq * d.tk + j,
                                                    d.tk, d.tq, d.dim, dk + r * d.dim);
  }
}

__global__ void swap_kernel(const float* x, float* y, std::int64_t d0, std::int64_t d1,
                            std::int64_t d2, std::int64_t d3) {
  const std::int64_t n = d0 * d1 * d2 * d3;
  for (std::int64_t e = grid_first(); e < n; e += grid_step()) {
    // e indexes y (d0, d2, d1, d3).
    const std::int64_t d = e % d3, b = (e / d3) % d1, c = (e / (d3 * d1)) % d2,
                       a = e / (d3 * d1 * d2);
    y[e] = x[((a * d1 + b) * d2 + c) * d3 + d];
  }
}

}  // namespace

void masked_softmax(const backend::AttentionMaskDesc& desc, const float* scores, const float* mask,
                    float* probs, std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  masked_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(scores, mask, probs, rows, desc);
  check_launch("masked_softmax");
}

void masked_softmax_backward(const backend::AttentionMaskDesc& desc, const float* probs,
                             const float* mask, const float* d_probs, float* d_scores,
                             std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  masked_softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(probs, mask, d_probs,
                                                                            d_scores, rows, desc);
  check_launch("masked_softmax_backward");
}

void additive_pairs(const backend::AdditiveScoresDesc& desc, const float* query, const float* key,
                    const float* s, float* pairs, cudaStream_t stream) {
  const std::int64_t n = desc.batch * desc.tq * desc.tk * desc.dim;
  if (n <= 0) return;
  additive_pairs_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, query, key, s, pairs);
  check_launch("additive_pairs");
}

void additive_scores(const backend::AdditiveScoresDesc& desc, const float* pairs, const float* w,
                     float* scores, cudaStream_t stream) {
  const std::int64_t rows = desc.batch * desc.tq;
  if (rows <= 0 || desc.tk <= 0) return;
  additive_scores_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(desc, pairs, w, scores);
  check_launch("additive_scores");
}

void additive_scores_backward(const backend::AdditiveScoresDesc& desc, const float* query,
                              const float* key, const float* pairs, const float* w, const float* s,
                              const float* d_scores, float* dq, float* dk, float* w_parts,
                              float* s_parts, cudaStream_t stream) {
  const std::int64_t query_rows = desc.batch * desc.tq, key_rows = desc.batch * desc.tk;
  if (query_rows > 0 && (dq || w_parts || s_parts)) {
    additive_query_rows_kernel<<<blocks_for(query_rows), kThreads, 0, stream>>>(
        desc, query, key, pairs, w, s, d_scores, dq, w_parts, s_parts);
    check_launch("additive_scores_backward (query rows)");
  }
  if (key_rows > 0 && dk) {
    additive_key_rows_kernel<<<blocks_for(key_rows), kThreads, 0, stream>>>(desc, pairs, w, s,
                                                                            d_scores, dk);
    check_launch("additive_scores_backward (key rows)");
  }
}

void swap_middle_axes(const float* x, float* y, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                      std::int64_t d3, cudaStream_t stream) {
  const std::int64_t n = d0 * d1 * d2 * d3;
  if (n <= 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, d0, d1, d2, d3);
  check_launch("swap_middle_axes");
}

}  // namespace tandem::cuda
