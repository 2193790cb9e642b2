// The argument checks every backend shares (backend/ops.hpp): each throws std::logic_error
// naming the operation and the sizes that do not fit — a caller's bug, never a user's input.
#include <stdexcept>
#include <string>

#include "backend/ops.hpp"

namespace tandem::backend {

void check_same_sizes(std::int64_t a, std::int64_t b, std::int64_t out,
                              const char* operation) {
  if (a != b || a != out)
    throw std::logic_error(std::string("backend operation ") + operation + ": sizes " +
                           std::to_string(a) + ", " + std::to_string(b) + " and " +
                           std::to_string(out) + " differ");
}

std::int64_t check_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset,
                           const Tensor& dst, std::int64_t dst_cols, std::int64_t dst_offset,
                           std::int64_t width) {
  const std::int64_t rows = src_cols > 0 ? src.size() / src_cols : 0;
  const bool fits = src_cols > 0 && dst_cols > 0 && width >= 0 && src_offset >= 0 &&
                    dst_offset >= 0 && src_offset + width <= src_cols &&
                    dst_offset + width <= dst_cols && rows * src_cols == src.size() &&
                    rows * dst_cols == dst.size();
  if (!fits)
    throw std::logic_error("backend operation copy_columns: columns [" +
                           std::to_string(src_offset) + ", +" + std::to_string(width) + ") of " +
                           shape_to_string(src.shape()) + " (" + std::to_string(src_cols) +
                           " per row) into [" + std::to_string(dst_offset) + ", +" +
                           std::to_string(width) + ") of " + shape_to_string(dst.shape()) + " (" +
                           std::to_string(dst_cols) + " per row) do not fit");
  return rows;
}

void require_device(const Backend& backend, const Tensor& t, const char* operation) {
  if (!(t.device() == backend.device()))
    throw std::logic_error(std::string("backend operation ") + operation + ": a tensor in " +
                           t.device().name() + " memory given to the " + backend.device().name() +
                           " backend");
}

void require_device(const Backend& backend, std::initializer_list<const Tensor*> tensors,
                    const char* operation) {
  for (const Tensor* t : tensors)
    if (t) require_device(backend, *t, operation);
}

namespace {

const float* weights_of(const Backend& backend, const Tensor* weights, std::int64_t count,
                        const char* what, const char* operation) {
  if (!weights) return nullptr;
  require_device(backend, *weights, operation);
  if (weights->size() != count)
    throw std::logic_error(std::string("backend operation ") + operation + ": " +
                           std::to_string(weights->size()) + " weights for " +
                           std::to_string(count) + " " + what);
  return weights->data();
}

}  // namespace

math::RowWeights row_weights(const Backend& backend, const WeightTensors& weights,
                             std::int64_t rows, std::int64_t positions, const char* operation) {
  return {weights_of(backend, weights.rows, rows, "rows", operation),
          weights_of(backend, weights.positions, rows * math::weighed_positions(positions),
                     "positions", operation)};
}

void check_column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift,
                         const Tensor& y, std::int64_t cols) {
  if (cols <= 0 || x.size() % cols != 0 || y.size() != x.size() || scale.size() != cols ||
      (shift && shift->size() != cols))
    throw std::logic_error("backend operation column_affine: " + std::to_string(x.size()) +
                           " values are not rows of " + std::to_string(cols) + " matching " +
                           std::to_string(scale.size()) + " scales" +
                           (shift ? " and " + std::to_string(shift->size()) + " shifts" : ""));
}

void check_batched_gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, const Tensor& c) {
  if (d.batch < 0 || d.epilogue != GemmEpilogue::none || a.size() != d.batch * d.m * d.k ||
      b.size() != d.batch * d.k * d.n || c.size() != d.batch * d.m * d.n)
    throw std::logic_error("backend operation gemm: a batch of " + std::to_string(d.batch) +
                           " products " + std::to_string(d.m) + "x" + std::to_string(d.k) +
                           " by " + std::to_string(d.k) + "x" + std::to_string(d.n) +
                           " does not fit tensors of " + std::to_string(a.size()) + ", " +
                           std::to_string(b.size()) + " and " + std::to_string(c.size()) +
                           " values (or has an epilogue)");
}

std::int64_t check_attention_scores(const AttentionMaskDesc& d, const Tensor& scores,
                                    const Tensor* mask, const Tensor& probs) {
  const std::int64_t per_sample = d.heads * d.tq * d.tk;
  const std::int64_t batch = per_sample > 0 ? scores.size() / per_sample : 0;
  if (per_sample <= 0 || probs.size() != scores.size() || batch * per_sample != scores.size() ||
      (mask && mask->size() != batch * d.tq * d.tk))
    throw std::logic_error("backend operation masked_softmax: scores of " +
                           std::to_string(scores.size()) + " values are not (batch, " +
                           std::to_string(d.heads) + ", " + std::to_string(d.tq) + ", " +
                           std::to_string(d.tk) + ")" +
                           (mask ? " with a mask of " + std::to_string(mask->size()) : ""));
  return batch * d.heads * d.tq;
}

void check_additive_scores(const AdditiveScoresDesc& d, const Tensor& query, const Tensor& key,
                           const Tensor* weights, const Tensor* factor,
                           std::initializer_list<std::pair<const Tensor*, std::int64_t>> others,
                           bool weights_used) {
  bool fits = d.batch >= 0 && d.tq >= 0 && d.tk >= 0 && d.dim > 0 &&
              query.size() == d.batch * d.tq * d.dim && key.size() == d.batch * d.tk * d.dim &&
              (factor != nullptr) == d.has_factor && (!factor || factor->size() == 1) &&
              (!weights_used || (weights != nullptr) == d.has_weights) &&
              (!weights || weights->size() == d.dim);
  for (const auto& [t, size] : others) fits = fits && (!t || t->size() == size);
  if (!fits)
    throw std::logic_error(
        "backend operation additive_scores: query of " + std::to_string(query.size()) +
        " values and key of " + std::to_string(key.size()) + " are not (" +
        std::to_string(d.batch) + ", " + std::to_string(d.tq) + " and " + std::to_string(d.tk) +
        ", " + std::to_string(d.dim) + "), or the weights, factor or outputs do not fit");
}

void check_additive_scores_backward(const AdditiveScoresDesc& d, const Tensor& query,
                                    const Tensor& key, const Tensor& pairs, const Tensor* weights,
                                    const Tensor* factor, const Tensor& d_scores,
                                    const Tensor* d_query, const Tensor* d_key,
                                    const Tensor* weight_parts, const Tensor* factor_parts) {
  const std::int64_t rows = d.batch * d.tq;
  check_additive_scores(d, query, key, weights, factor,
                        {{&pairs, rows * d.tk * d.dim},
                         {&d_scores, rows * d.tk},
                         {d_query, rows * d.dim},
                         {d_key, d.batch * d.tk * d.dim},
                         {weight_parts, rows * d.dim},
                         {factor_parts, rows}},
                        true);
}

void check_additive_pairs(const AdditiveScoresDesc& d, const Tensor& pairs, const Tensor* weights,
                          const Tensor& scores) {
  if (d.batch < 0 || d.tq < 0 || d.tk < 0 || d.dim <= 0 ||
      pairs.size() != d.batch * d.tq * d.tk * d.dim || scores.size() != d.batch * d.tq * d.tk ||
      (weights != nullptr) != d.has_weights || (weights && weights->size() != d.dim))
    throw std::logic_error("backend operation additive_scores: pairs of " +
                           std::to_string(pairs.size()) + " values and scores of " +
                           std::to_string(scores.size()) + " are not (" + std::to_string(d.batch) +
                           ", " + std::to_string(d.tq) + ", " + std::to_string(d.tk) + ", " +
                           std::to_string(d.dim) + "), or the weights do not fit");
}

std::int64_t unit_norm_samples(const AxisGroups& d, const Tensor& x, const Tensor* same_as_x,
                               const Tensor& out) {
  const std::int64_t samples = d.size > 0 ? x.size() / d.size : 0;
  if (d.size <= 0 || samples * d.size != x.size() || out.size() != x.size() ||
      (same_as_x && same_as_x->size() != x.size()) || (out.size() > 0 && out.data() == x.data()))
    throw std::logic_error("backend operation unit_normalize: " + std::to_string(x.size()) +
                           " values are not whole samples of " + std::to_string(d.size) +
                           ", or the output is the input or of another size");
  return samples;
}

void check_swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                            const Tensor& y) {
  const auto [d0, d1, d2, d3] = dims;
  if (x.size() != d0 * d1 * d2 * d3 || y.size() != x.size() || x.data() == y.data())
    throw std::logic_error("backend operation swap_middle_axes: dimensions (" +
                           std::to_string(d0) + ", " + std::to_string(d1) + ", " +
                           std::to_string(d2) + ", " + std::to_string(d3) + ") do not fit " +
                           std::to_string(x.size()) + " values into " + std::to_string(y.size()) +
                           " (in place is not supported)");
}

void check_strided_view(const char* op, const StridedView& v, const Tensor& whole,
                        const Tensor& part) {
  const auto fail = [&](const std::string& why) {
    throw std::logic_error(std::string("backend operation ") + op + ": " + why);
  };
  if (v.rank < 0 || v.rank > StridedView::kMaxRank)
    fail("a view of " + std::to_string(v.rank) + " axes (at most " +
         std::to_string(StridedView::kMaxRank) + ")");
  std::int64_t lowest = v.offset, highest = v.offset;
  for (int a = 0; a < v.rank; ++a) {
    if (v.dims[a] <= 0) fail("axis " + std::to_string(a) + " of the view has no values");
    const std::int64_t reach = (v.dims[a] - 1) * v.strides[a];
    (reach < 0 ? lowest : highest) += reach;
  }
  if (lowest < 0 || highest >= whole.size())
    fail("the view picks positions " + std::to_string(lowest) + " to " + std::to_string(highest) +
         " of a tensor of " + std::to_string(whole.size()) + " values");
  if (part.size() != math::view_size(v))
    fail("the view holds " + std::to_string(math::view_size(v)) + " values, its tensor " +
         std::to_string(part.size()));
  if (whole.data() == part.data()) fail("in place is not supported");
}

void check_image_block(const ImageBlock& b, const Tensor& src, const Tensor& dst) {
  const bool inside = b.rows >= 0 && b.cols >= 0 && b.src_row >= 0 && b.src_col >= 0 &&
                      b.dst_row >= 0 && b.dst_col >= 0 && b.src_row + b.rows <= b.src_rows &&
                      b.src_col + b.cols <= b.src_cols && b.dst_row + b.rows <= b.dst_rows &&
                      b.dst_col + b.cols <= b.dst_cols &&
                      src.size() == b.batch * b.src_rows * b.src_cols * b.channels &&
                      dst.size() == b.batch * b.dst_rows * b.dst_cols * b.channels;
  if (!inside)
    throw std::logic_error("backend operation copy_image_block: a block of " +
                           std::to_string(b.rows) + "x" + std::to_string(b.cols) + " from (" +
                           std::to_string(b.src_row) + ", " + std::to_string(b.src_col) +
                           ") of " + std::to_string(b.src_rows) + "x" +
                           std::to_string(b.src_cols) + " images to (" +
                           std::to_string(b.dst_row) + ", " + std::to_string(b.dst_col) +
                           ") of " + std::to_string(b.dst_rows) + "x" +
                           std::to_string(b.dst_cols) + " does not fit (tensors of " +
                           std::to_string(src.size()) + " and " + std::to_string(dst.size()) +
                           " values)");
}

void check_upsample(const UpsampleDesc& d, const Tensor& x, const Tensor& y) {
  const std::int64_t in = d.batch * d.rows * d.cols * d.channels;
  if (d.row_factor < 1 || d.col_factor < 1 || x.size() != in ||
      y.size() != in * d.row_factor * d.col_factor)
    throw std::logic_error("backend operation upsample: " + std::to_string(x.size()) + " and " +
                           std::to_string(y.size()) + " values are not images of " +
                           std::to_string(d.rows) + "x" + std::to_string(d.cols) + "x" +
                           std::to_string(d.channels) + " upsampled by " +
                           std::to_string(d.row_factor) + "x" + std::to_string(d.col_factor));
}

void check_flip(const FlipDesc& d, const Tensor& draws, const Tensor& x, const Tensor& y) {
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  if (x.size() != n || y.size() != n || draws.size() != 2 * d.batch ||
      (n > 0 && x.data() == y.data()))
    throw std::logic_error("backend operation flip_images: " + std::to_string(x.size()) + " and " +
                           std::to_string(y.size()) + " values (apart) with " +
                           std::to_string(draws.size()) + " draws are not " +
                           std::to_string(d.batch) + " images of " + std::to_string(d.rows) +
                           "x" + std::to_string(d.cols) + "x" + std::to_string(d.channels));
}

void check_warp(const WarpDesc& d, const Tensor& draws, const Tensor& x, const Tensor& y) {
  const std::int64_t in = d.batch * d.rows * d.cols * d.channels;
  const std::int64_t out = d.batch * d.out_rows * d.out_cols * d.channels;
  // The source region lies inside the image, or holds all of it (a padded resize).
  const bool inside = d.src_row >= 0 && d.src_col >= 0 && d.src_row + d.src_rows <= d.rows &&
                      d.src_col + d.src_cols <= d.cols;
  const bool around = d.src_row <= 0 && d.src_col <= 0 && d.src_row + d.src_rows >= d.rows &&
                      d.src_col + d.src_cols >= d.cols;
  const bool region = d.src_rows > 0 && d.src_cols > 0 && (inside || around);
  if (x.size() != in || y.size() != out || draws.size() != WarpDesc::kDraws * d.batch || !region ||
      (out > 0 && x.data() == y.data()))
    throw std::logic_error("backend operation warp_images: " + std::to_string(x.size()) + " and " +
                           std::to_string(y.size()) + " values (apart) with " +
                           std::to_string(draws.size()) + " draws are not " +
                           std::to_string(d.batch) + " images of " + std::to_string(d.rows) + "x" +
                           std::to_string(d.cols) + " to " + std::to_string(d.out_rows) + "x" +
                           std::to_string(d.out_cols) + "x" + std::to_string(d.channels) +
                           (region ? "" : " (the source region lies outside)"));
}

void check_adjust(const AdjustDesc& d, const Tensor& draws, const Tensor& x, const Tensor& means,
                  const Tensor& y) {
  const std::int64_t n = d.batch * d.rows * d.cols * d.channels;
  if (x.size() != n || y.size() != n || means.size() != d.batch * d.channels ||
      draws.size() != d.batch)
    throw std::logic_error("backend operation adjust_images: " + std::to_string(x.size()) + ", " +
                           std::to_string(y.size()) + " values, " + std::to_string(means.size()) +
                           " means and " + std::to_string(draws.size()) + " draws are not " +
                           std::to_string(d.batch) + " images of " + std::to_string(d.rows) + "x" +
                           std::to_string(d.cols) + "x" + std::to_string(d.channels));
}

std::int64_t prelu_rows(const PreluDesc& d, const Tensor& x, const Tensor& alpha,
                        const Tensor* same_as_x, const Tensor* also_same_as_x) {
  const std::int64_t rows = d.size > 0 ? x.size() / d.size : 0;
  const bool ok = d.size > 0 && rows * d.size == x.size() && alpha.size() == d.groups &&
                  (!same_as_x || same_as_x->size() == x.size()) &&
                  (!also_same_as_x || also_same_as_x->size() == x.size());
  if (!ok)
    throw std::logic_error("backend operation prelu: " + std::to_string(x.size()) +
                           " values are not samples of " + std::to_string(d.size) +
                           " with " + std::to_string(d.groups) + " alphas (alpha holds " +
                           std::to_string(alpha.size()) + ")");
  return rows;
}

std::int64_t layer_norm_rows(const LayerNormDesc& d, const Tensor& x) {
  const std::int64_t rows = d.cols > 0 ? x.size() / d.cols : 0;
  if (d.cols <= 0 || rows * d.cols != x.size())
    throw std::logic_error("backend operation layer_norm: " + std::to_string(x.size()) +
                           " values are not rows of " + std::to_string(d.cols));
  if (d.centred_output && !d.centred_variance)
    throw std::logic_error(
        "backend operation layer_norm: an output centred on a mean the "
        "variance does not use");
  return rows;
}

void check_spectral_norm(const SpectralNormDesc& desc, const Tensor& kernel, const Tensor& u,
                         const char* operation) {
  if (desc.rows < 1 || desc.cols < 1 || desc.iterations < 1 ||
      kernel.size() != desc.rows * desc.cols || u.size() != desc.cols)
    throw std::logic_error(std::string("backend operation ") + operation + ": a kernel of " +
                           std::to_string(kernel.size()) + " values and a u of " +
                           std::to_string(u.size()) + " are not " + std::to_string(desc.rows) +
                           " x " + std::to_string(desc.cols) + " and " + std::to_string(desc.cols));
}

void adaptive_pool_values(const AdaptivePoolDesc& desc, const Tensor& in, const Tensor& out,
                          const char* operation) {
  const std::int64_t in_values = desc.batch * math::adaptive_in_cells(desc) * desc.channels,
                     out_values = desc.batch * math::adaptive_out_cells(desc) * desc.channels;
  if (in.size() != in_values || out.size() != out_values)
    throw std::logic_error(std::string("backend operation ") + operation + ": " +
                           std::to_string(in.size()) + " and " + std::to_string(out.size()) +
                           " values are not " + std::to_string(in_values) + " inputs and " +
                           std::to_string(out_values) + " pooled values");
  for (int a = 0; a < 3; ++a)
    if (desc.out[a] < 1 || desc.in[a] < 1)
      throw std::logic_error(std::string("backend operation ") + operation +
                             ": an axis of no cells");
}

std::int64_t recurrent_rows(const RecurrentCellDesc& desc,
                            std::initializer_list<std::pair<const Tensor*, int>> tensors,
                            const char* operation) {
  std::int64_t rows = -1;
  for (const auto& [t, width] : tensors) {
    const std::int64_t cols = desc.units * width;
    const std::int64_t n = cols > 0 ? t->size() / cols : -1;
    if (cols <= 0 || n * cols != t->size() || (rows >= 0 && n != rows))
      throw std::logic_error(std::string("backend operation ") + operation + ": " +
                             std::to_string(t->size()) + " values are not " +
                             (rows >= 0 ? std::to_string(rows) + " " : "") + "rows of " +
                             std::to_string(cols));
    rows = n;
  }
  return rows;
}

void check_sequence_mask(const Tensor& x, std::int64_t features, const Tensor& mask) {
  if (features <= 0 || x.size() != mask.size() * features)
    throw std::logic_error("backend operation sequence_mask: " + std::to_string(x.size()) +
                           " values are not " + std::to_string(mask.size()) + " rows of " +
                           std::to_string(features));
}

std::int64_t select_rows_count(const Tensor& mask, const Tensor& a, const Tensor* b,
                               const Tensor& out, std::int64_t cols) {
  const std::int64_t rows = mask.size();
  for (const Tensor* t : {&a, b, &out})
    if (t && (cols <= 0 || t->size() != rows * cols))
      throw std::logic_error("backend operation select_rows: " + std::to_string(t->size()) +
                             " values are not " + std::to_string(rows) + " rows of " +
                             std::to_string(cols));
  return rows;
}

std::int64_t masked_average_samples(const Tensor& x, const Tensor& mask, const Tensor& y,
                                    std::int64_t steps, std::int64_t channels) {
  const std::int64_t samples = steps > 0 ? mask.size() / steps : 0;
  if (steps <= 0 || channels <= 0 || mask.size() != samples * steps ||
      x.size() != samples * steps * channels || y.size() != samples * channels)
    throw std::logic_error("backend operation masked_average_steps: " + std::to_string(x.size()) +
                           " values, a mask of " + std::to_string(mask.size()) + " and " +
                           std::to_string(y.size()) + " outputs are not samples of " +
                           std::to_string(steps) + " steps of " + std::to_string(channels));
  return samples;
}

}  // namespace tandem::backend
