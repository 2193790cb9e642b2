// The CUDA backend's operations for the merging layers (Subtract, Average, Maximum, Minimum),
// attention (masked softmax, axis swap), layer normalization and image blocks (padding,
// cropping, upsampling): argument checks shared with
// the CPU backend (backend/op_checks.cpp), then the kernels of cuda/ops/layer_kernels.hpp.
#include <stdexcept>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

void CudaBackend::subtract(const Tensor& a, const Tensor& b, Tensor& out) {
  require(a, "subtract");
  require(b, "subtract");
  require(out, "subtract");
  backend::check_same_sizes(a.size(), b.size(), out.size(), "subtract");
  cuda::subtract(a.data(), b.data(), out.data(), out.size(), stream_);
}

void CudaBackend::affine(const Tensor& x, float scale, float offset, Tensor& out) {
  require(x, "affine");
  require(out, "affine");
  backend::check_same_sizes(x.size(), out.size(), out.size(), "affine");
  cuda::affine(x.data(), out.data(), out.size(), scale, offset, stream_);
}

bool CudaBackend::scale_checking_finite(Tensor& values, float factor) {
  require(values, "scale_checking_finite");
  float* flag = scratch(finite_flag_, 1);
  check(cudaMemsetAsync(flag, 0, sizeof(float), stream_), "cudaMemsetAsync");
  cuda::scale_checking_finite(values.data(), values.size(), factor, flag, stream_);
  float nonfinite = 0;
  check(cudaMemcpyAsync(&nonfinite, flag, sizeof nonfinite, cudaMemcpyDeviceToHost, stream_),
        "copy of the gradients' finiteness to the host");
  check(cudaStreamSynchronize(stream_), "the gradients' finiteness check");
  return nonfinite == 0.0f;
}

void CudaBackend::column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift,
                                Tensor& y, std::int64_t cols) {
  require(x, "column_affine");
  require(scale, "column_affine");
  require(y, "column_affine");
  if (shift) require(*shift, "column_affine");
  backend::check_column_affine(x, scale, shift, y, cols);
  cuda::column_affine(x.data(), scale.data(), shift ? shift->data() : nullptr, y.data(),
                      y.size(), cols, stream_);
}

void CudaBackend::normalization_factors(const Tensor& mean, const Tensor& variance, bool invert,
                                        Tensor& scale, Tensor& shift) {
  backend::require_device(*this, {&mean, &variance, &scale, &shift}, "normalization_factors");
  backend::check_same_sizes(mean.size(), variance.size(), scale.size(), "normalization_factors");
  backend::check_same_sizes(mean.size(), variance.size(), shift.size(), "normalization_factors");
  cuda::normalization_factors(mean.data(), variance.data(), invert, scale.data(), shift.data(),
                              mean.size(), stream_);
}

void CudaBackend::extreme_update(bool maximum, const Tensor& x, int index, Tensor& out,
                                 Tensor& winner) {
  require(x, "extreme_update");
  require(out, "extreme_update");
  require(winner, "extreme_update");
  backend::check_same_sizes(x.size(), out.size(), winner.size(), "extreme_update");
  cuda::extreme_update(maximum, x.data(), index, out.data(), winner.data(), out.size(), stream_);
}

void CudaBackend::route_gradient(const Tensor& winner, int index, const Tensor& dy, Tensor& dx) {
  require(winner, "route_gradient");
  require(dy, "route_gradient");
  require(dx, "route_gradient");
  backend::check_same_sizes(winner.size(), dy.size(), dx.size(), "route_gradient");
  cuda::route_gradient(winner.data(), index, dy.data(), dx.data(), dx.size(), stream_);
}

void CudaBackend::shaped_activation_forward(const backend::ShapedActivation& a, const Tensor& x,
                                            Tensor& y) {
  require(x, "shaped_activation_forward");
  require(y, "shaped_activation_forward");
  backend::check_same_sizes(x.size(), y.size(), y.size(), "shaped_activation_forward");
  cuda::shaped_activation_forward(a, x.data(), y.data(), y.size(), stream_);
}

void CudaBackend::shaped_activation_backward(const backend::ShapedActivation& a,
                                             const Tensor& x, const Tensor& dy, Tensor& dx) {
  require(x, "shaped_activation_backward");
  require(dy, "shaped_activation_backward");
  require(dx, "shaped_activation_backward");
  backend::check_same_sizes(x.size(), dy.size(), dx.size(), "shaped_activation_backward");
  cuda::shaped_activation_backward(a, x.data(), dy.data(), dx.data(), dx.size(), stream_);
}

void CudaBackend::unit_normalize(const backend::UnitNormDesc& d, const Tensor& x, Tensor& y) {
  backend::require_device(*this, {&x, &y}, "unit_normalize");
  const std::int64_t samples = backend::unit_norm_samples(d, x, nullptr, y);
  cuda::unit_normalize(d, x.data(), y.data(), samples, stream_);
}

void CudaBackend::unit_normalize_backward(const backend::UnitNormDesc& d, const Tensor& x,
                                          const Tensor& dy, Tensor& dx) {
  backend::require_device(*this, {&x, &dy, &dx}, "unit_normalize_backward");
  const std::int64_t samples = backend::unit_norm_samples(d, x, &dy, dx);
  cuda::unit_normalize_backward(d, x.data(), dy.data(), dx.data(), samples, stream_);
}

void CudaBackend::prelu_forward(const backend::PreluDesc& d, const Tensor& x, const Tensor& alpha,
                                Tensor& y) {
  require(x, "prelu_forward");
  require(alpha, "prelu_forward");
  require(y, "prelu_forward");
  backend::prelu_rows(d, x, alpha, &y, nullptr);
  cuda::prelu_forward(d, x.data(), alpha.data(), y.data(), y.size(), stream_);
}

void CudaBackend::prelu_backward(const backend::PreluDesc& d, const Tensor& x,
                                 const Tensor& alpha, const Tensor& dy, Tensor* dx,
                                 Tensor* d_alpha) {
  require(x, "prelu_backward");
  require(alpha, "prelu_backward");
  require(dy, "prelu_backward");
  if (d_alpha) require(*d_alpha, "prelu_backward");
  if (dx) require(*dx, "prelu_backward");
  const std::int64_t rows = backend::prelu_rows(d, x, alpha, &dy, dx);
  if (d_alpha && d_alpha->size() != d.groups)
    throw std::logic_error("prelu_backward: d_alpha's size");
  cuda::prelu_backward(d, x.data(), alpha.data(), dy.data(), dx ? dx->data() : nullptr,
                       d_alpha ? d_alpha->data() : nullptr, rows, stream_);
}

void CudaBackend::add_penalty_gradient(const Tensor& w, float l1, float l2, Tensor& grad) {
  require(w, "add_penalty_gradient");
  require(grad, "add_penalty_gradient");
  backend::check_same_sizes(w.size(), grad.size(), grad.size(), "add_penalty_gradient");
  cuda::add_penalty_gradient(w.data(), l1, l2, grad.data(), grad.size(), stream_);
}

void CudaBackend::apply_constraint(const backend::ConstraintDesc& c, Tensor& w) {
  require(w, "apply_constraint");
  if (w.size() != c.axes.size)
    throw std::logic_error("apply_constraint: " + std::to_string(w.size()) + " values for " +
                           std::to_string(c.axes.size));
  cuda::apply_constraint(c, w.data(), scratch(constraint_scales_, c.axes.groups), stream_);
}

void CudaBackend::masked_softmax(const backend::AttentionMaskDesc& d, const Tensor& scores,
                                 const Tensor* mask, Tensor& probs) {
  require(scores, "masked_softmax");
  require(probs, "masked_softmax");
  if (mask) require(*mask, "masked_softmax");
  const std::int64_t rows = backend::check_attention_scores(d, scores, mask, probs);
  cuda::masked_softmax(d, scores.data(), mask ? mask->data() : nullptr, probs.data(), rows,
                       stream_);
}

void CudaBackend::masked_softmax_backward(const backend::AttentionMaskDesc& d, const Tensor& probs,
                                          const Tensor* mask, const Tensor& d_probs,
                                          Tensor& d_scores) {
  require(probs, "masked_softmax_backward");
  require(d_probs, "masked_softmax_backward");
  require(d_scores, "masked_softmax_backward");
  if (mask) require(*mask, "masked_softmax_backward");
  const std::int64_t rows = backend::check_attention_scores(d, probs, mask, d_probs);
  backend::check_attention_scores(d, probs, mask, d_scores);
  cuda::masked_softmax_backward(d, probs.data(), mask ? mask->data() : nullptr, d_probs.data(),
                                d_scores.data(), rows, stream_);
}

void CudaBackend::additive_pairs(const backend::AdditiveScoresDesc& d, const Tensor& query,
                                 const Tensor& key, const Tensor* factor, Tensor& pairs) {
  backend::require_device(*this, {&query, &key, factor, &pairs}, "additive_pairs");
  backend::check_additive_scores(d, query, key, nullptr, factor,
                                 {{&pairs, d.batch * d.tq * d.tk * d.dim}}, false);
  cuda::additive_pairs(d, query.data(), key.data(), factor ? factor->data() : nullptr, pairs.data(),
                       stream_);
}

void CudaBackend::additive_scores(const backend::AdditiveScoresDesc& d, const Tensor& pairs,
                                  const Tensor* weights, Tensor& scores) {
  backend::require_device(*this, {&pairs, weights, &scores}, "additive_scores");
  backend::check_additive_pairs(d, pairs, weights, scores);
  cuda::additive_scores(d, pairs.data(), weights ? weights->data() : nullptr, scores.data(),
                        stream_);
}

void CudaBackend::additive_scores_backward(const backend::AdditiveScoresDesc& d,
                                           const Tensor& query, const Tensor& key,
                                           const Tensor& pairs, const Tensor* weights,
                                           const Tensor* factor, const Tensor& d_scores,
                                           Tensor* d_query, Tensor* d_key, Tensor* weight_parts,
                                           Tensor* factor_parts) {
  backend::require_device(*this,
                          {&query, &key, &pairs, weights, factor, &d_scores, d_query, d_key,
                           weight_parts, factor_parts},
                          "additive_scores_backward");
  backend::check_additive_scores_backward(d, query, key, pairs, weights, factor, d_scores, d_query,
                                          d_key, weight_parts, factor_parts);
  const auto data = [](Tensor* t) { return t ? t->data() : nullptr; };
  cuda::additive_scores_backward(d, query.data(), key.data(), pairs.data(),
                                 weights ? weights->data() : nullptr,
                                 factor ? factor->data() : nullptr, d_scores.data(), data(d_query),
                                 data(d_key), data(weight_parts), data(factor_parts), stream_);
}

void CudaBackend::swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                                   Tensor& y) {
  require(x, "swap_middle_axes");
  require(y, "swap_middle_axes");
  backend::check_swap_middle_axes(x, dims, y);
  cuda::swap_middle_axes(x.data(), y.data(), dims[0], dims[1], dims[2], dims[3], stream_);
}

void CudaBackend::gather_view(const backend::StridedView& view, const Tensor& src, Tensor& dst) {
  require(src, "gather_view");
  require(dst, "gather_view");
  backend::check_strided_view("gather_view", view, src, dst);
  cuda::gather_view(view, src.data(), dst.data(), stream_);
}

void CudaBackend::scatter_view(const backend::StridedView& view, const Tensor& src, Tensor& dst) {
  require(src, "scatter_view");
  require(dst, "scatter_view");
  backend::check_strided_view("scatter_view", view, dst, src);
  cuda::scatter_view(view, src.data(), dst.data(), stream_);
}

void CudaBackend::copy_image_block(const backend::ImageBlock& block, const Tensor& src,
                                   Tensor& dst) {
  require(src, "copy_image_block");
  require(dst, "copy_image_block");
  backend::check_image_block(block, src, dst);
  cuda::copy_image_block(block, src.data(), dst.data(), stream_);
}

void CudaBackend::flip_images(const backend::FlipDesc& desc, const Tensor& draws, const Tensor& x,
                              Tensor& y) {
  require(draws, "flip_images");
  require(x, "flip_images");
  require(y, "flip_images");
  backend::check_flip(desc, draws, x, y);
  cuda::flip_images(desc, draws.data(), x.data(), y.data(), stream_);
}

void CudaBackend::warp_images(const backend::WarpDesc& desc, const Tensor& draws, const Tensor& x,
                              Tensor& y) {
  require(draws, "warp_images");
  require(x, "warp_images");
  require(y, "warp_images");
  backend::check_warp(desc, draws, x, y);
  cuda::warp_images(desc, draws.data(), x.data(), y.data(), stream_);
}

void CudaBackend::warp_images_backward(const backend::WarpDesc& desc, const Tensor& draws,
                                       const Tensor& dy, Tensor& dx) {
  require(draws, "warp_images_backward");
  require(dy, "warp_images_backward");
  require(dx, "warp_images_backward");
  backend::check_warp(desc, draws, dx, dy);
  cuda::warp_images_backward(desc, draws.data(), dy.data(), dx.data(), stream_);
}

void CudaBackend::adjust_images(const backend::AdjustDesc& desc, const Tensor& draws,
                                const Tensor& x, Tensor& means, Tensor& y) {
  require(draws, "adjust_images");
  require(x, "adjust_images");
  require(means, "adjust_images");
  require(y, "adjust_images");
  backend::check_adjust(desc, draws, x, means, y);
  cuda::adjust_images(desc, draws.data(), x.data(), means.data(), y.data(), stream_);
}

void CudaBackend::adjust_images_backward(const backend::AdjustDesc& desc, const Tensor& draws,
                                         const Tensor& x, const Tensor& means, const Tensor& dy,
                                         Tensor& dx) {
  require(draws, "adjust_images_backward");
  require(x, "adjust_images_backward");
  require(dy, "adjust_images_backward");
  require(dx, "adjust_images_backward");
  backend::check_adjust(desc, draws, x, means, dy);
  backend::check_adjust(desc, draws, x, means, dx);
  cuda::adjust_images_backward(desc, draws.data(), x.data(), means.data(), dy.data(), dx.data(),
                               stream_);
}

void CudaBackend::upsample_forward(const backend::UpsampleDesc& desc, const Tensor& x,
                                   Tensor& y) {
  require(x, "upsample_forward");
  require(y, "upsample_forward");
  backend::check_upsample(desc, x, y);
  cuda::upsample_forward(desc, x.data(), y.data(), stream_);
}

void CudaBackend::upsample_backward(const backend::UpsampleDesc& desc, const Tensor& dy,
                                    Tensor& dx) {
  require(dy, "upsample_backward");
  require(dx, "upsample_backward");
  backend::check_upsample(desc, dx, dy);
  cuda::upsample_backward(desc, dy.data(), dx.data(), stream_);
}

void CudaBackend::sequence_mask(const Tensor& x, float value, std::int64_t features, Tensor& mask) {
  backend::require_device(*this, {&x, &mask}, "sequence_mask");
  backend::check_sequence_mask(x, features, mask);
  cuda::sequence_mask(x.data(), value, features, mask.data(), mask.size(), stream_);
}

void CudaBackend::select_rows(const Tensor& mask, const Tensor& a, const Tensor* b, Tensor& out,
                              std::int64_t cols) {
  backend::require_device(*this, {&mask, &a, b, &out}, "select_rows");
  const std::int64_t rows = backend::select_rows_count(mask, a, b, out, cols);
  cuda::select_rows(mask.data(), a.data(), b ? b->data() : nullptr, out.data(), rows, cols,
                    stream_);
}

void CudaBackend::masked_average_steps(const Tensor& x, const Tensor& mask, Tensor& y,
                                       std::int64_t steps, std::int64_t channels) {
  backend::require_device(*this, {&x, &mask, &y}, "masked_average_steps");
  const std::int64_t samples = backend::masked_average_samples(x, mask, y, steps, channels);
  cuda::masked_average_steps(x.data(), mask.data(), y.data(), samples, steps, channels, stream_);
}

void CudaBackend::masked_average_steps_backward(const Tensor& dy, const Tensor& mask, Tensor& dx,
                                                std::int64_t steps, std::int64_t channels) {
  backend::require_device(*this, {&dy, &mask, &dx}, "masked_average_steps_backward");
  const std::int64_t samples = backend::masked_average_samples(dx, mask, dy, steps, channels);
  cuda::masked_average_steps_backward(dy.data(), mask.data(), dx.data(), samples, steps, channels,
                                      stream_);
}

void CudaBackend::lstm_step_forward(const backend::RecurrentCellDesc& d, const Tensor& xw,
                                    const Tensor& rec, const Tensor& c_prev, Tensor& pre, Tensor& c,
                                    Tensor& h) {
  backend::require_device(*this, {&xw, &rec, &c_prev, &pre, &c, &h}, "lstm_step_forward");
  const std::int64_t rows = backend::recurrent_rows(
      d, {{&xw, 4}, {&rec, 4}, {&pre, 4}, {&c_prev, 1}, {&c, 1}, {&h, 1}}, "lstm_step_forward");
  cuda::lstm_step_forward(d, xw.data(), rec.data(), c_prev.data(), pre.data(), c.data(), h.data(),
                          rows, stream_);
}

void CudaBackend::lstm_step_backward(const backend::RecurrentCellDesc& d, const Tensor& pre,
                                     const Tensor& c_prev, const Tensor& c, const Tensor& dh,
                                     Tensor& dc, Tensor& d_pre) {
  backend::require_device(*this, {&pre, &c_prev, &c, &dh, &dc, &d_pre}, "lstm_step_backward");
  const std::int64_t rows = backend::recurrent_rows(
      d, {{&pre, 4}, {&d_pre, 4}, {&c_prev, 1}, {&c, 1}, {&dh, 1}, {&dc, 1}}, "lstm_step_backward");
  cuda::lstm_step_backward(d, pre.data(), c_prev.data(), c.data(), dh.data(), dc.data(),
                           d_pre.data(), rows, stream_);
}

void CudaBackend::gru_step_forward(const backend::RecurrentCellDesc& d, const Tensor& xw,
                                   const Tensor& rec, const Tensor& h_prev, Tensor& pre,
                                   Tensor& h) {
  backend::require_device(*this, {&xw, &rec, &h_prev, &pre, &h}, "gru_step_forward");
  const std::int64_t rows = backend::recurrent_rows(
      d, {{&xw, 3}, {&rec, 3}, {&pre, 4}, {&h_prev, 1}, {&h, 1}}, "gru_step_forward");
  cuda::gru_step_forward(d, xw.data(), rec.data(), h_prev.data(), pre.data(), h.data(), rows,
                         stream_);
}

void CudaBackend::gru_step_backward(const backend::RecurrentCellDesc& d, const Tensor& pre,
                                    const Tensor& h_prev, const Tensor& dh, Tensor& d_xw,
                                    Tensor& d_rec, Tensor& dh_prev) {
  backend::require_device(*this, {&pre, &h_prev, &dh, &d_xw, &d_rec, &dh_prev},
                          "gru_step_backward");
  const std::int64_t rows = backend::recurrent_rows(
      d, {{&pre, 4}, {&d_xw, 3}, {&d_rec, 3}, {&h_prev, 1}, {&dh, 1}, {&dh_prev, 1}},
      "gru_step_backward");
  cuda::gru_step_backward(d, pre.data(), h_prev.data(), dh.data(), d_xw.data(), d_rec.data(),
                          dh_prev.data(), rows, stream_);
}

namespace {

cuda::LayerNormForm layer_norm_form(const backend::LayerNormDesc& d) {
  return {d.cols, d.epsilon, d.centred_variance, d.centred_output};
}

}  // namespace

void CudaBackend::layer_norm_forward(const backend::LayerNormDesc& d, const Tensor& x,
                                     const Tensor* gamma, const Tensor* beta, Tensor& y,
                                     Tensor& stats) {
  require(x, "layer_norm_forward");
  require(y, "layer_norm_forward");
  const std::int64_t rows = backend::layer_norm_rows(d, x);
  place(stats, {2 * rows});
  cuda::layer_norm_forward(layer_norm_form(d), x.data(), gamma ? gamma->data() : nullptr,
                           beta ? beta->data() : nullptr, y.data(), stats.data(),
                           stats.data() + rows, rows, stream_);
}

void CudaBackend::layer_norm_backward(const backend::LayerNormDesc& d, const Tensor& x,
                                      const Tensor& dy, const Tensor* gamma, const Tensor& stats,
                                      Tensor* dx, Tensor* d_gamma, Tensor* d_beta) {
  require(x, "layer_norm_backward");
  require(dy, "layer_norm_backward");
  require(stats, "layer_norm_backward");
  if (dx) require(*dx, "layer_norm_backward");
  const std::int64_t rows = backend::layer_norm_rows(d, x);
  cuda::layer_norm_backward(layer_norm_form(d), x.data(), dy.data(),
                            gamma ? gamma->data() : nullptr, stats.data(), stats.data() + rows,
                            dx ? dx->data() : nullptr, d_gamma ? d_gamma->data() : nullptr,
                            d_beta ? d_beta->data() : nullptr, rows, stream_);
}

}  // namespace tandem::cuda
