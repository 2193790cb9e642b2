// Private (CUDA module): the kernels of the device layers in cuda/replica/layers/ (Conv2D's im2col
// and col2im, pooling, global average pooling, batch normalization, embedding), as launchers
// with plain parameters so that the layers' C++20 code never includes CUDA device code and the
// .cu files never include Tandem's C++20 headers (nvcc builds them as C++17).
//
// Every launcher queues work on `stream` and returns at once (except where it says it waits);
// pointers are device memory of the current device. Determinism: one thread per output element,
// every sum in an order fixed by the shapes alone, no floating-point atomics: the same inputs
// give the same bits run to run. Ownership: none (borrowed pointers). Thread-safety: any thread,
// ordered by the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/activation_kind.hpp"
#include "backend/adaptive_pool_math.hpp"
#include "backend/additive_scores_math.hpp"
#include "backend/attention_mask.hpp"
#include "backend/axis_groups.hpp"
#include "backend/image_geometry.hpp"
#include "backend/recurrent_math.hpp"
#include "backend/strided_view_math.hpp"
#include "backend/window_math.hpp"

namespace tandem::cuda {

// ---- Conv2D
// --------------------------------------------------------------------------------------

/// cols = the im2col matrix of `samples` NHWC inputs x: (samples * out_rows * out_cols) rows of
/// patch_size(g) columns, row-major, zeros where a tap reads padding.
void im2col(const float* x, float* cols, std::int64_t samples, const backend::window::Geometry& g,
            cudaStream_t stream);
/// dx = col2im(dcols) for `samples` inputs, as a gather (backend::window::col2im_element).
void col2im(const float* dcols, float* dx, std::int64_t samples, const backend::window::Geometry& g,
            cudaStream_t stream);
/// acc[i] += x[i].
void add_in_place(float* acc, const float* x, std::int64_t n, cudaStream_t stream);

// ---- Grouped Conv2D (groups > 1, DepthwiseConv2D), computed directly ----------------------------
// backend::window::grouped_conv_*: one thread per output or input element; the kernel and bias
// gradients one block per value, its threads' partial sums over rows in a fixed stride order
// reduced in a fixed tree, so the same bits every run.

/// y = the grouped convolution of `samples` inputs (+ bias[f] when bias is not null).
void grouped_conv_forward(const float* x, const float* kernel, const float* bias, float* y,
                          std::int64_t samples, const backend::window::Geometry& g,
                          std::int64_t filters, std::int64_t groups, cudaStream_t stream);
/// dx from dy.
void grouped_conv_backward_data(const float* dy, const float* kernel, float* dx,
                                std::int64_t samples, const backend::window::Geometry& g,
                                std::int64_t filters, std::int64_t groups, cudaStream_t stream);
/// d_kernel (and d_bias, the column sums of dy, when not null), set.
void grouped_conv_backward_weights(const float* x, const float* dy, float* d_kernel, float* d_bias,
                                   std::int64_t samples, const backend::window::Geometry& g,
                                   std::int64_t filters, std::int64_t groups, cudaStream_t stream);

// ---- MaxPooling2D, AveragePooling2D ----------------------------------------------------------

/// y = the window maxima of `samples` NHWC inputs, argmax = each one's input cell (or -1).
void max_pool_forward(const float* x, float* y, std::int32_t* argmax, std::int64_t samples,
                      const backend::window::Geometry& g, cudaStream_t stream);
void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, std::int64_t samples,
                       const backend::window::Geometry& g, cudaStream_t stream);
void avg_pool_forward(const float* x, float* y, std::int64_t samples,
                      const backend::window::Geometry& g, cudaStream_t stream);
void avg_pool_backward(const float* dy, float* dx, std::int64_t samples,
                       const backend::window::Geometry& g, cudaStream_t stream);

// ---- GlobalAveragePooling2D ------------------------------------------------------------------

/// y[b, c] = (sum over the sample's cells, in order, of x[b, cell, c]) * (1 / cells).
void global_average_pool_forward(const float* x, float* y, std::int64_t batch, std::int64_t cells,
                                 std::int64_t channels, cudaStream_t stream);
/// dx[b, cell, c] = dy[b, c] * (1 / cells).
void global_average_pool_backward(const float* dy, float* dx, std::int64_t batch,
                                  std::int64_t cells, std::int64_t channels, cudaStream_t stream);

// ---- SpectralNormalization -------------------------------------------------------------------

/// Floats of 8-byte aligned device scratch spectral_normalize needs.
std::int64_t spectral_norm_scratch_floats(std::int64_t rows, std::int64_t cols);
/// backend::Backend::spectral_normalize of w (rows x cols) and u (cols), on the device.
void spectral_normalize(std::int64_t rows, std::int64_t cols, int iterations, float* w, float* u,
                        float* scratch, cudaStream_t stream);

// ---- Adaptive pooling ------------------------------------------------------------------------

/// One thread per output value: adaptive_pool_value (arg: the maxima's input cells; may be
/// null for the average).
void adaptive_pool_forward(const backend::AdaptivePoolDesc& desc, const float* x, float* y,
                           float* arg, cudaStream_t stream);
/// One thread per input value: adaptive_pool_input_gradient.
void adaptive_pool_backward(const backend::AdaptivePoolDesc& desc, const float* dy,
                            const float* arg, float* dx, cudaStream_t stream);

// ---- BatchNormalization ----------------------------------------------------------------------
// The CPU layer's arithmetic, mirrored: the rows are split into blocks of
// batch_norm_block_rows(width) rows, each block summed row by row in double, the blocks' partial
// sums then added in block order (nn/batch_normalization.cpp's row_sums), every double and float
// operation rounded on its own (no fused multiply-add, as the host's x86-64 build): the sums, the
// statistics and the outputs equal the host layer's bit for bit.

/// Rows per reduction block for partial sums `width` values wide (the CPU's split).
std::int64_t batch_norm_block_rows(std::int64_t width);
/// Doubles of scratch (`partial`) the statistics and the gradient sums need for `rows` rows.
std::int64_t batch_norm_scratch_doubles(std::int64_t rows, std::int64_t channels);

/// Per-channel state of one forward, in device memory: `channels` values each (sums: 2 x).
struct BatchNormState {
  double* mean = nullptr;    // the batch mean (training)
  double* sums = nullptr;    // gradient sums: of dy, then of dy * x-hat
  float* shift = nullptr;    // the mean the forward subtracted
  float* inv_std = nullptr;  // 1 / sqrt(variance + epsilon)
  float* a = nullptr;        // gamma * inv_std (inv_std without gamma)
  float* b = nullptr;        // beta (0 without beta)
  float* k1 = nullptr;       // the backward's mean(dy) (batch statistics)
  float* k2 = nullptr;       // the backward's mean(dy * x-hat) (batch statistics)
  unsigned long long* kept = nullptr;  // the rows a mask kept in the last training forward
};

/// Training statistics: mean and biased variance of x (rows x channels) in one pass (the sums of
/// d = x - x[row 0] and of d², as the CPU's); fills mean, shift, inv_std, a, b and moves
/// moving_mean / moving_variance by Keras 3's formula (momentum). rows > 0. gamma / beta may be
/// null (scale / center off). `kept`: null, or one value per row (a Keras mask): the statistics
/// of the rows whose value is non-zero (counted into state.kept; none: mean 0, variance 0).
void batch_norm_training_statistics(const float* x, const float* kept, std::int64_t rows,
                                    std::int64_t channels, const float* gamma, const float* beta,
                                    float* moving_mean, float* moving_variance, double momentum,
                                    double epsilon, const BatchNormState& state, double* partial,
                                    cudaStream_t stream);
/// Inference statistics: shift = moving_mean, inv_std from moving_variance; a and b.
void batch_norm_inference_statistics(std::int64_t channels, const float* gamma, const float* beta,
                                     const float* moving_mean, const float* moving_variance,
                                     double epsilon, const BatchNormState& state,
                                     cudaStream_t stream);
/// y = (x - shift) * a + b per channel; with `relu`, max(0, that) (the absorbed relu).
void batch_norm_apply(const float* x, float* y, std::int64_t rows, std::int64_t channels, bool relu,
                      const BatchNormState& state, cudaStream_t stream);
/// The gradient sums of g and g * x-hat (x-hat = (x - shift) * inv_std) into state.sums, where g
/// is dy or, given the forward's relu output y (non-null), dy masked by y > 0; gamma_grad /
/// beta_grad (each may be null) get them; with batch_stats, k1 and k2 their means (`masked`: the
/// sums over every row divided by the forward's state.kept, the rows its statistics read).
void batch_norm_gradient_sums(const float* x, const float* y, const float* dy, std::int64_t rows,
                              std::int64_t channels, bool batch_stats, bool masked,
                              float* gamma_grad, float* beta_grad, const BatchNormState& state,
                              double* partial, cudaStream_t stream);
/// dx: with batch_stats, a * (g - k1 - x-hat * k2) (the gradient through the batch mean and
/// variance; needs batch_norm_gradient_sums first) — a * g on the rows the forward's `kept` (may
/// be null) left out —; else a * g (g as above).
void batch_norm_input_gradient(const float* x, const float* y, const float* dy, const float* kept,
                               float* dx, std::int64_t rows, std::int64_t channels,
                               bool batch_stats, const BatchNormState& state, cudaStream_t stream);

// ---- Merging layers and scaling (backend/kernel_math.hpp's arithmetic) ------------------------

/// out = a - b.
void subtract(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);
/// out = x * scale + offset.
void affine(const float* x, float* out, std::int64_t n, float scale, float offset,
            cudaStream_t stream);
/// x[i] *= factor in place; sets *nonfinite (device memory) to 1 when some x[i] was Inf or NaN
/// before (and leaves it as it was otherwise).
void scale_checking_finite(float* x, std::int64_t n, float factor, float* nonfinite,
                           cudaStream_t stream);
/// y[i] = x[i] * scale[i % cols] (+ shift[i % cols]).
void column_affine(const float* x, const float* scale, const float* shift, float* y,
                   std::int64_t n, std::int64_t cols, cudaStream_t stream);
/// Normalization's factors, feature by feature (kernel_math.hpp's normalization_factors).
void normalization_factors(const float* mean, const float* variance, bool invert, float* scale,
                           float* shift, std::int64_t n, cudaStream_t stream);
/// Input `index` of an element-wise maximum (minimum): Backend::extreme_update.
void extreme_update(bool maximum, const float* x, int index, float* out, float* winner,
                    std::int64_t n, cudaStream_t stream);
/// dx = dy where winner == index, else 0.
void route_gradient(const float* winner, int index, const float* dy, float* dx, std::int64_t n,
                    cudaStream_t stream);

/// Backend::shaped_activation_forward / _backward (kernel_math's shaped_activation_*).
void shaped_activation_forward(const backend::ShapedActivation& a, const float* x, float* y,
                               std::int64_t n, cudaStream_t stream);
void shaped_activation_backward(const backend::ShapedActivation& a, const float* x,
                                const float* dy, float* dx, std::int64_t n, cudaStream_t stream);

/// Backend::unit_normalize / _backward over `samples` samples (kernel_math's
/// unit_normalize_group*, a thread per sample's group).
void unit_normalize(const backend::UnitNormDesc& d, const float* x, float* y, std::int64_t samples,
                    cudaStream_t stream);
void unit_normalize_backward(const backend::UnitNormDesc& d, const float* x, const float* dy,
                             float* dx, std::int64_t samples, cudaStream_t stream);
/// Backend::prelu_forward / _backward over `rows` samples (kernel_math's prelu_*); dx may be
/// null; d_alpha (may be null): one thread per alpha, in kernel_math's order.
void prelu_forward(const backend::PreluDesc& d, const float* x, const float* alpha, float* y,
                   std::int64_t n, cudaStream_t stream);
void prelu_backward(const backend::PreluDesc& d, const float* x, const float* alpha,
                    const float* dy, float* dx, float* d_alpha, std::int64_t rows,
                    cudaStream_t stream);

// ---- Recurrent cells -----------------------------------------------------------------------

/// Backend::lstm_step_forward / _backward and gru_step_forward / _backward over `rows` rows
/// (recurrent_math.hpp's per-unit functions, one thread per unit of a row).
void lstm_step_forward(const backend::RecurrentCellDesc& d, const float* xw, const float* rec,
                       const float* c_prev, float* pre, float* c, float* h, std::int64_t rows,
                       cudaStream_t stream);
void lstm_step_backward(const backend::RecurrentCellDesc& d, const float* pre, const float* c_prev,
                        const float* c, const float* dh, float* dc, float* d_pre, std::int64_t rows,
                        cudaStream_t stream);
void gru_step_forward(const backend::RecurrentCellDesc& d, const float* xw, const float* rec,
                      const float* h_prev, float* pre, float* h, std::int64_t rows,
                      cudaStream_t stream);
void gru_step_backward(const backend::RecurrentCellDesc& d, const float* pre, const float* h_prev,
                       const float* dh, float* d_xw, float* d_rec, float* dh_prev,
                       std::int64_t rows, cudaStream_t stream);

/// Backend::sequence_mask over `rows` rows of `features` values, and select_rows over `rows`
/// rows of `cols` (b null: zeros).
void sequence_mask(const float* x, float value, std::int64_t features, float* mask,
                   std::int64_t rows, cudaStream_t stream);
void select_rows(const float* mask, const float* a, const float* b, float* out, std::int64_t rows,
                 std::int64_t cols, cudaStream_t stream);
/// Backend::masked_average_steps / _backward over `samples` (a thread per output value).
void masked_average_steps(const float* x, const float* mask, float* y, std::int64_t samples,
                          std::int64_t steps, std::int64_t channels, cudaStream_t stream);
void masked_average_steps_backward(const float* dy, const float* mask, float* dx,
                                   std::int64_t samples, std::int64_t steps, std::int64_t channels,
                                   cudaStream_t stream);

/// Weight penalties: out[i] = penalty_value(w[i]) (summed by the caller); grad += the gradient.
void penalty_values(const float* w, float l1, float l2, float* out, std::int64_t n,
                    cudaStream_t stream);
void add_penalty_gradient(const float* w, float l1, float l2, float* grad, std::int64_t n,
                          cudaStream_t stream);

/// Backend::apply_constraint: `scales` (c.axes.groups floats of scratch) first, then w in place.
void apply_constraint(const backend::ConstraintDesc& c, float* w, float* scales,
                      cudaStream_t stream);

// ---- Attention -------------------------------------------------------------------------------

/// Backend::masked_softmax over `rows` rows of desc.tk scores (batch, heads, tq, tk); one thread
/// per row, kernel_math's masked_softmax_row. mask (batch, tq, tk) may be null.
void masked_softmax(const backend::AttentionMaskDesc& desc, const float* scores, const float* mask,
                    float* probs, std::int64_t rows, cudaStream_t stream);
/// Backend::masked_softmax_backward over the same rows: kernel_math's masked_softmax_row_backward.
void masked_softmax_backward(const backend::AttentionMaskDesc& desc, const float* probs,
                             const float* mask, const float* d_probs, float* d_scores,
                             std::int64_t rows, cudaStream_t stream);
/// Backend::additive_pairs (a thread per value, tanh_f of additive_argument), additive_scores (a
/// thread per query row: additive_scores_row) and additive_scores_backward (the query rows' pass:
/// dq, w_parts, s_parts, each may be null; the key rows': dk, may be null). w and s are device
/// pointers (null where desc has none).
void additive_pairs(const backend::AdditiveScoresDesc& desc, const float* query, const float* key,
                    const float* s, float* pairs, cudaStream_t stream);
void additive_scores(const backend::AdditiveScoresDesc& desc, const float* pairs, const float* w,
                     float* scores, cudaStream_t stream);
void additive_scores_backward(const backend::AdditiveScoresDesc& desc, const float* query,
                              const float* key, const float* pairs, const float* w, const float* s,
                              const float* d_scores, float* dq, float* dk, float* w_parts,
                              float* s_parts, cudaStream_t stream);
/// y[a, c, b, d] = x[a, b, c, d] for x of dimensions (d0, d1, d2, d3).
void swap_middle_axes(const float* x, float* y, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                      std::int64_t d3, cudaStream_t stream);

// ---- Indexing (strided views) ---------------------------------------------------------------

/// Backend::gather_view and scatter_view: one thread per value of the view.
void gather_view(const backend::StridedView& view, const float* src, float* dst,
                 cudaStream_t stream);
void scatter_view(const backend::StridedView& view, const float* src, float* dst,
                  cudaStream_t stream);

// ---- ZeroPadding2D, Cropping2D, UpSampling2D ----------------------------------------------------

/// Backend::copy_image_block: one thread per copied value.
void copy_image_block(const backend::ImageBlock& block, const float* src, float* dst,
                      cudaStream_t stream);
/// Backend::upsample_forward (one thread per output value) and upsample_backward (one thread
/// per input value, summing its block in row-major order as the CPU).
void upsample_forward(const backend::UpsampleDesc& desc, const float* x, float* y,
                      cudaStream_t stream);
void upsample_backward(const backend::UpsampleDesc& desc, const float* dy, float* dx,
                       cudaStream_t stream);
/// Backend::flip_images: one thread per output value (kernel_math's flip_source).
void flip_images(const backend::FlipDesc& desc, const float* draws, const float* x, float* y,
                 cudaStream_t stream);
/// Backend::warp_images (one thread per output value) and warp_images_backward (one thread per
/// sample and channel, in the CPU's order: the same bits, no atomics).
void warp_images(const backend::WarpDesc& desc, const float* draws, const float* x, float* y,
                 cudaStream_t stream);
void warp_images_backward(const backend::WarpDesc& desc, const float* draws, const float* dy,
                          float* dx, cudaStream_t stream);
/// Backend::adjust_images and adjust_images_backward: one thread per sample and channel.
void adjust_images(const backend::AdjustDesc& desc, const float* draws, const float* x,
                   float* means, float* y, cudaStream_t stream);
void adjust_images_backward(const backend::AdjustDesc& desc, const float* draws, const float* x,
                            const float* means, const float* dy, float* dx, cudaStream_t stream);

// ---- LayerNormalization ------------------------------------------------------------------------

/// Which of the layer normalization forms a launch computes (backend::LayerNormDesc's fields).
struct LayerNormForm {
  std::int64_t cols;
  double epsilon;
  bool centred_variance, centred_output;
};

/// One thread per row: the row's mean and 1/sqrt(var + eps) into mean[r], inv_std[r], then y
/// (kernel_math's layer_norm_row_stats and layer_norm_row). gamma / beta may be null.
void layer_norm_forward(LayerNormForm form, const float* x, const float* gamma, const float* beta,
                        float* y, float* mean, float* inv_std, std::int64_t rows,
                        cudaStream_t stream);
/// dx (may be null; one thread per row) and d_gamma / d_beta (each may be null; one thread per
/// column summing its rows in order).
void layer_norm_backward(LayerNormForm form, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* inv_std, float* dx, float* d_gamma,
                         float* d_beta, std::int64_t rows, cudaStream_t stream);

// ---- Discretization and CategoryEncoding ---------------------------------------------------

/// y[i] = the bin of x[i] among nb ascending boundaries (device), as a float.
void discretize(const float* x, const float* boundaries, std::int64_t nb, float* y, std::int64_t n,
                cudaStream_t stream);
/// y[i] = what x[i] looks up among nk ascending keys and their values (kernel_math.hpp's
/// looked_up); a key found nowhere lowers *first_missing to i (atomicMin) when it is not null.
void lookup(const backend::math::LookupDesc& desc, const float* x, const float* keys,
            const float* values, std::int64_t nk, float* y, std::int64_t n,
            unsigned long long* first_missing, cudaStream_t stream);
/// y[o, j, d] over indices seen as [outer, n, inner] (valid, below depth): the count of k with
/// indices[o, k, j] == d (`count`), else 1 when there is one.
void encode_categories(const std::int32_t* indices, float* y, std::int64_t outer, std::int64_t n,
                       std::int64_t inner, std::int64_t depth, bool count, cudaStream_t stream);

// ---- Embedding -----------------------------------------------------------------------------

/// Converts n index-valued floats to int32 indices (0 where invalid) and writes to *first_bad
/// (device) the lowest position holding a value that is not an integer in [0, vocab), or n when
/// all are valid (an integer minimum: the same whatever the thread order).
void embedding_indices(const float* x, std::int32_t* indices, std::int64_t n, std::int64_t vocab,
                       unsigned long long* first_bad, cudaStream_t stream);
/// y[i, :] = table[indices[i], :].
void embedding_gather(const float* table, const std::int32_t* indices, float* y, std::int64_t n,
                      std::int64_t dim, cudaStream_t stream);
/// Bytes of scratch embedding_gradient needs for n indices below vocab.
std::size_t embedding_gradient_scratch_bytes(std::int64_t n, std::int64_t vocab);
/// grad[v, :] = the sum of dy[i, :] over the positions i with indices[i] == v, in ascending i
/// (the CPU's order, so the same bits), 0 for rows nobody looked up: a stable radix sort of
/// (index, position) pairs, the start of each row's run, then one thread per (row, column)
/// walking its run. `work` holds 3n int32 and `starts` vocab + 1 int32 (device); n < 2^31.
void embedding_gradient(const std::int32_t* indices, const float* dy, float* grad, std::int64_t n,
                        std::int64_t vocab, std::int64_t dim, std::int32_t* work,
                        std::int32_t* starts, void* scratch, std::size_t scratch_bytes,
                        cudaStream_t stream);

}  // namespace tandem::cuda
