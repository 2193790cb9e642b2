// Backend: the operations layers, losses, metrics and optimizers are written against — each one
// once, for every device. A layer holds a Backend and calls it; the CPU backend (backend/cpu,
// oneDNN and OpenMP loops) and the CUDA backend (the CUDA module: cuBLASLt, cuDNN, Tandem's
// kernels) implement it. The element-wise arithmetic both run is backend/kernel_math.hpp's; the
// sliding-window index math is backend/window_math.hpp's.
//
// Arguments are typed descriptors (never JSON) and tensors that know their device: every tensor
// an operation reads or writes must live on the backend's device (device()), or the operation
// throws std::logic_error naming it. Outputs are resized by the caller unless an operation says
// it resizes them. Shapes carry the batch axis.
//
// Ordering: a device backend queues work on its stream and returns; results are ready for the
// next operation of the same backend, and on the host after read_sums() or copy() to the host.
// Determinism: every sum is taken in an order fixed by the shapes alone (never by threads), so
// the same inputs give the same bits run to run (contract 1 depends on it).
//
// Ownership: a Backend is owned by whoever made it (cpu_backend() is a process-wide one; a CUDA
// replica owns its CUDA backend) and must outlive the layers using it; the op objects it makes
// (DenseProducts, Convolution2D, Pooling2D, BatchNorm, Sums) belong to their caller and borrow the
// backend. Thread-safety: one thread at a time per Backend object and per op object; the CPU
// backend keeps no state between calls, so its methods are safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/activation_kind.hpp"
#include "backend/adaptive_pool_math.hpp"
#include "backend/additive_scores_math.hpp"
#include "backend/attention_mask.hpp"
#include "backend/image_geometry.hpp"
#include "backend/kernel_math.hpp"
#include "backend/recurrent_math.hpp"
#include "backend/strided_view_math.hpp"
#include "backend/window_math.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"
#include "util/precision.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::backend {

// ---- Descriptors ------------------------------------------------------------------------------

/// What the GEMM adds to its product before it stores it (fused where the backend can).
enum class GemmEpilogue {
  none,       // C = op(A) op(B)
  bias,       // C = op(A) op(B) + bias (one value per column)
  relu_bias,  // C = relu(op(A) op(B) + bias)  (NaN stays NaN)
};

/// C (m x n) = op(A) (m x k) · op(B) (k x n), row-major, op = transpose when asked. Leading
/// dimensions are the row lengths of the matrices as stored. With batch > 1, A, B and C each hold
/// `batch` matrices one after the other (A's i-th at i·m·k, B's at i·k·n, C's at i·m·n) and every
/// product is taken alike (attention's per-head products); no epilogue then.
struct GemmDesc {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  GemmEpilogue epilogue = GemmEpilogue::none;
  std::int64_t batch = 1;
};

/// A layer's product with its kernel: y (rows x units) = x (rows x in) · kernel (in x units,
/// Keras' layout) with the epilogue; rows = x's size / in, whatever x's shape.
struct DenseProductDesc {
  std::int64_t in = 0, units = 0;
  GemmEpilogue epilogue = GemmEpilogue::none;
};

/// The shape of `batch` inputs of a window geometry: (batch, rows, cols, channels), or (batch,
/// depth, rows, cols, channels) for a volume.
inline Shape window_input_shape(const window::Geometry& g, std::int64_t batch) {
  if (g.volume) return {batch, g.depth.in, g.rows.in, g.cols.in, g.channels};
  return {batch, g.rows.in, g.cols.in, g.channels};
}

/// The shape of `batch` outputs of `channels` channels of a window geometry.
inline Shape window_output_shape(const window::Geometry& g, std::int64_t batch,
                                 std::int64_t channels) {
  if (g.volume) return {batch, g.depth.out, g.rows.out, g.cols.out, channels};
  return {batch, g.rows.out, g.cols.out, channels};
}

/// A convolution, channels_last: input (batch, rows, cols, channels), kernel in Keras' HWIO
/// (kh, kw, channels, filters), output (batch, out_rows, out_cols, filters); a volume's (Conv3D)
/// input (batch, depth, rows, cols, channels), kernel (kd, kh, kw, channels, filters).
///
/// With groups G > 1 (Keras' Conv2D `groups`; DepthwiseConv2D has G = channels) the channels
/// and the filters split into G groups, filter f of group f / (filters / G) seeing only its
/// group's channels; the kernel is then (kh, kw, channels / G, filters), in the same memory
/// order as DepthwiseConv2D's (kh, kw, channels, multiplier) when G = channels.
struct ConvolutionDesc {
  std::string label;            // who, in error messages: "layer 'conv2d' (Conv2D)"
  window::Geometry geometry;    // input rows/cols/channels, taps, strides, dilation, padding
  std::int64_t filters = 0;
  bool use_bias = true;
  std::int64_t groups = 1;  // divides channels and filters
};

enum class PoolKind { max, average };

/// 2-D or 3-D pooling, channels_last: windows without dilation; padded cells never win a maximum
/// and are left out of an average.
struct PoolingDesc {
  std::string label;
  window::Geometry geometry;
  PoolKind kind = PoolKind::max;
};

/// Batch normalization over the last axis (`channels` values per row).
struct BatchNormDesc {
  std::int64_t channels = 0;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool scale = true;   // gamma
  bool center = true;  // beta
  /// The relu of the layer that reads the output, applied here (nn::ReluAbsorber): the forward
  /// writes max(0, normalized) in the same pass, and the backward's dy is the gradient of that
  /// output, masked by output > 0 (as activation_backward's relu) before the batch-norm gradient.
  bool output_relu = false;
};

/// One training forward of a random layer (Dropout, GaussianNoise, ...): the key of the call and
/// the rate; the values of row r are drawn from sample index first_sample + r of the global batch
/// (kernel_math.hpp's dropout_* and normal_noise). `noise`: Keras' noise_shape as axis groups
/// of a sample (its 1-axes grouped: one value shared along them); rank 0 for one value per
/// element.
struct DropoutDesc {
  std::uint64_t stream = 0;  // the layer's random stream
  std::uint64_t call = 0;    // its training forwards before this one
  double rate = 0;
  std::int64_t first_sample = 0;
  AxisGroups noise;
};

/// One parameter tensor of an optimizer step: its value, gradient and state slots (in the
/// optimizer's slot order), all the same size and on the backend's device.
struct UpdateTensors {
  Tensor* value = nullptr;
  const Tensor* grad = nullptr;
  std::vector<Tensor>* slots = nullptr;
};

/// Layer normalization of rows of `cols` values: each row's mean and biased variance.
/// Keras' two root-mean-square forms change what the row is divided by and what the output
/// keeps: LayerNormalization(rms_scaling=True) divides by the same deviation but leaves the mean
/// in (centred_output false); RMSNormalization divides by the root of the mean of squares
/// (centred_variance false, centred_output false).
struct LayerNormDesc {
  std::int64_t cols = 0;
  double epsilon = 1e-3;
  bool centred_variance = true;  // the variance about the row's mean (false: about 0)
  bool centred_output = true;    // y = (x - mean) ... (false: y = x ...)
};

/// Keras' SpectralNormalization of a kernel seen as (rows, cols), its last axis the columns,
/// with its vector u (1, cols): `iterations` power iterations.
struct SpectralNormDesc {
  std::int64_t rows = 0, cols = 0;
  int iterations = 1;
};

/// Where an embedding lookup failed: the first input position (row-major) whose value is not an
/// integer index in [0, vocabulary), and that value.
struct BadIndex {
  std::int64_t position = 0;
  float value = 0;
};

// ---- Stateful operations (made once per layer, for fixed geometry) ---------------------------

/// Each call stands alone: the three may come in any order, with any operands of the geometry
/// (Conv2D calls forward, backward_weights, backward_data; Conv2DTranspose backward_data as its
/// forward, then backward_weights and forward as its backward). An implementation may reuse what
/// a forward computed only for the same x.
class Convolution2D {
 public:
  virtual ~Convolution2D() = default;
  /// y = conv(x, kernel) (+ bias). y is resized.
  virtual void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) = 0;
  /// d_kernel (and d_bias when use_bias) of conv(x, kernel) given dy; set, not accumulated.
  virtual void backward_weights(const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                                Tensor* d_bias) = 0;
  /// dx from dy. dx is resized to x's shape.
  virtual void backward_data(const Tensor& dy, const Tensor& kernel, Tensor& dx) = 0;
  /// The gradients of the last forward, whose input `x` was (unchanged since): d_kernel and
  /// d_bias as backward_weights sets them, and dx as backward_data when `dx` is not null. An
  /// implementation may reuse what that forward prepared from x and prepare dy once for both
  /// (the bf16 CPU backend rounds each once); this default calls the two.
  virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& kernel, Tensor& d_kernel,
                        Tensor* d_bias, Tensor* dx) {
    backward_weights(x, dy, d_kernel, d_bias);
    if (dx) backward_data(dy, kernel, *dx);
  }
};

/// The products of a layer with a kernel (Dense, attention's projections) and their gradients.
/// An op object so that an implementation may prepare an operand once for every product that
/// reads it: the bf16 CPU backend rounds x and the kernel once in the forward and dy once for
/// both gradients. Backend::dense_products' default runs each product as one gemm().
class DenseProducts {
 public:
  virtual ~DenseProducts() = default;
  /// y = x · kernel with the desc's epilogue (bias: `units` values). y is sized by the caller.
  virtual void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) = 0;
  /// The gradients of the last forward, whose x and kernel are unchanged since (the same tensors,
  /// the same values): d_kernel = xᵀ · dy when not null, dx = dy · kernelᵀ when not null; both
  /// set, not accumulated, and sized by the caller. Without a forward before, or with other
  /// tensors than its, x and the kernel are read afresh.
  virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& kernel, Tensor* d_kernel,
                        Tensor* dx) = 0;
};

class Pooling2D {
 public:
  virtual ~Pooling2D() = default;
  /// y = the pooled x; y is resized. Keeps what backward needs (max pooling's argmax).
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  /// dx from dy of the last forward; dx is resized to its input's shape.
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
};

/// The weights of a loss's or metric's rows (loss_sum, metric_sum): `rows`, one per row (Keras'
/// sample_weight), and `positions`, one per position of each row (a masked output's: rows x
/// the desc's positions); either may be null. Borrowed for the call.
struct WeightTensors {
  const Tensor* rows = nullptr;
  const Tensor* positions = nullptr;
};

/// Sums `count` doubles in place over every replica of the batch (synchronized batch
/// normalization; every participant calls it with the same count). Empty: this replica alone.
using SumAcrossReplicas = std::function<void(double* values, std::size_t count)>;

/// Batch normalization's statistics and arithmetic; keeps the last forward's per-channel state.
class BatchNorm {
 public:
  virtual ~BatchNorm() = default;
  /// Training: the mean and biased variance of x (two passes), over every replica of the batch
  /// when `sync` is set (every participant must call, an empty shard too); moves the moving
  /// statistics by `momentum`; y = (x - mean) gamma / sqrt(var + eps) + beta. gamma and beta
  /// may be null (scale / center off). `kept`: null, or one value per row of x (a Keras mask of
  /// the steps, on this backend, borrowed for the call), the statistics then taken over the rows
  /// whose value is non-zero alone (Keras' masked moments; none kept: mean 0 and variance 0)
  /// while every row is normalized with them.
  virtual void forward_training(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                                Tensor& moving_mean, Tensor& moving_variance, Tensor& y,
                                const SumAcrossReplicas& sync, const Tensor* kept) = 0;
  /// Inference: the moving statistics.
  virtual void forward_inference(const Tensor& x, const Tensor* gamma, const Tensor* beta,
                                 const Tensor& moving_mean, const Tensor& moving_variance,
                                 Tensor& y) = 0;
  /// Gradients of the last forward: d_gamma, d_beta (may be null) get this shard's sums; dx (may
  /// be null) goes through the batch statistics when the forward used them (summed across
  /// replicas with `sync`, which every participant then calls; `kept`: the forward's, the
  /// statistics' gradient reaching the kept rows alone). `y`: that forward's output, read only
  /// with output_relu (the relu's mask).
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* gamma,
                        Tensor* d_gamma, Tensor* d_beta, Tensor* dx, const SumAcrossReplicas& sync,
                        const Tensor* kept) = 0;
  /// The rows of this shard the last training forward's statistics read: all of x's, or those
  /// its mask kept (on a device, read back: a synchronization).
  virtual std::int64_t counted_rows() = 0;
};

/// Accumulators in double for one step's loss and metric sums: reset, set by the backend's
/// loss_sum and metric_sum, read once (on a device: the step's one synchronization).
class Sums {
 public:
  virtual ~Sums() = default;
  /// `count` accumulators, all zero.
  virtual void reset(std::size_t count) = 0;
  virtual std::vector<double> read() = 0;
};

// ---- The backend ------------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  /// Memory for tensors on this device (null for the host).
  virtual std::shared_ptr<DeviceMemory> memory() const = 0;
  /// An empty tensor on this device; resize() then allocates there.
  Tensor tensor() const { return Tensor({0}, memory()); }
  Tensor tensor(Shape shape) const { return Tensor(std::move(shape), memory()); }
  /// Resizes `t` to `shape` on this device, moving it here first (contents then unspecified)
  /// when it lives elsewhere: how layers and operations keep their outputs on their device.
  Tensor& place(Tensor& t, const Shape& shape) const {
    if (t.memory() != memory()) t = tensor();
    t.resize(shape);
    return t;
  }

  // Data movement.
  /// dst = src, element for element (equal sizes; each on the host or this device).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;

  // Linear algebra.
  /// C = op(A) op(B) with the epilogue; `bias` (n values) for the bias epilogues. c is resized
  /// by the caller to m x n elements.
  virtual void gemm(const GemmDesc& desc, const Tensor& a, const Tensor& b, const Tensor* bias,
                    Tensor& c) = 0;
  /// out[j] = sum over the rows of x (rows x cols) of x[r, j], rows in ascending order.
  virtual void column_sums(const Tensor& x, std::int64_t cols, Tensor& out) = 0;
  /// out = a * b element-wise (out may be a or b).
  virtual void multiply(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  /// out = a + b element-wise, in float (out may be a or b): merging layers and the gradient
  /// sums where a tensor feeds several layers of a graph.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  /// out = max(0, a + b) element-wise (kernel_math's relu of the float sum; out may be a or b):
  /// an Add whose reader's relu it applies (nn::ReluAbsorber).
  virtual void add_relu(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  /// out = a - b element-wise (out may be a or b).
  virtual void subtract(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  /// out = x * scale + offset element-wise, in float (out may be x).
  virtual void affine(const Tensor& x, float scale, float offset, Tensor& out) = 0;
  /// values *= factor element-wise, in place; returns whether every value was finite before
  /// (dynamic loss scaling unscales a step's gradients and checks them in one pass; a device
  /// backend synchronizes its stream to answer).
  virtual bool scale_checking_finite(Tensor& values, float factor) = 0;
  /// y[r, c] = x[r, c] * scale[c] + shift[c] over rows of `cols` values (shift may be null: 0):
  /// Normalization with its fixed statistics, and its gradient (dy * scale). y may be x.
  virtual void column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift,
                             Tensor& y, std::int64_t cols) = 0;
  /// Normalization's column_affine factors from its statistics, feature by feature
  /// (kernel_math.hpp's normalization_factors): all four tensors the same size.
  virtual void normalization_factors(const Tensor& mean, const Tensor& variance, bool invert,
                                     Tensor& scale, Tensor& shift) = 0;
  /// One input of an element-wise maximum (or minimum) of several: input 0 sets out = x and
  /// winner = 0; input `index` > 0 replaces the elements it beats strictly (x > out, or x < out),
  /// recording `index` in winner (so a tie goes to the earliest input). All the same size.
  virtual void extreme_update(bool maximum, const Tensor& x, int index, Tensor& out,
                              Tensor& winner) = 0;
  /// dx = dy where winner == index, else 0: the gradient of the maximum (minimum) for input
  /// `index`.
  virtual void route_gradient(const Tensor& winner, int index, const Tensor& dy, Tensor& dx) = 0;
  /// Copies a block of columns between two row-major matrices with the same number of rows:
  /// dst[r, dst_offset + j] = src[r, src_offset + j] for j < width, where src has `src_cols`
  /// columns and dst `dst_cols` (Concatenate along its axis, and back for its gradient).
  virtual void copy_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset,
                            Tensor& dst, std::int64_t dst_cols, std::int64_t dst_offset,
                            std::int64_t width) = 0;

  // Activations (rows of `cols` values; softmax is per row).
  /// out = f(in); out may be in.
  virtual void activation_forward(ActivationKind kind, const Tensor& in, Tensor& out,
                                  std::int64_t cols) = 0;
  /// grad_in = grad_out * f'(in), given in (pre-activation) and out = f(in). grad_in may be
  /// grad_out.
  virtual void activation_backward(ActivationKind kind, const Tensor& in, const Tensor& out,
                                   const Tensor& grad_out, Tensor& grad_in, std::int64_t cols) = 0;

  /// Keras' ReLU (with max_value, negative_slope, threshold), LeakyReLU and ELU (alpha) layers:
  /// y = f(x), and dx = dy * f'(x) (dx may be dy).
  virtual void shaped_activation_forward(const ShapedActivation& a, const Tensor& x,
                                         Tensor& y) = 0;
  virtual void shaped_activation_backward(const ShapedActivation& a, const Tensor& x,
                                          const Tensor& dy, Tensor& dx) = 0;
  /// Keras' PReLU over samples of desc's shape (kernel_math's prelu_*): y = x where x > 0, else
  /// alpha·x, alpha broadcast along the shared axes. Backward: dx = dy · slope, and d_alpha
  /// (desc.groups values) the sum over the batch of dy·min(x, 0), in double; each may be null.
  virtual void prelu_forward(const PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                             Tensor& y) = 0;
  virtual void prelu_backward(const PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                              const Tensor& dy, Tensor* dx, Tensor* d_alpha) = 0;
  /// Keras' UnitNormalization (and Dot's normalize) over samples of desc's shape (kernel_math's
  /// unit_normalize_*): each group of a sample (the grouped axes, Keras' `axis`) times
  /// rsqrt(max(Σ x², desc.square_floor)). y and dx may not be x.
  virtual void unit_normalize(const UnitNormDesc& desc, const Tensor& x, Tensor& y) = 0;
  /// Its gradient: dx = (dy − y·(y·dy))·rsqrt(Σ x²) per group (dy·rsqrt(floor) where Σ x² is
  /// at most the floor).
  virtual void unit_normalize_backward(const UnitNormDesc& desc, const Tensor& x, const Tensor& dy,
                                       Tensor& dx) = 0;
  /// Keras' weight penalty (kernel_math's penalty_*): sums[slot] = Σ l1·|w| + l2·w², and
  /// grad += its gradient.
  virtual void penalty_sum(const Tensor& w, float l1, float l2, Sums& sums,
                           std::size_t slot) = 0;
  virtual void add_penalty_gradient(const Tensor& w, float l1, float l2, Tensor& grad) = 0;
  /// Keras' weight constraint on w in place (kernel_math's constraint_*): each group's factor
  /// from its norm, then every value.
  virtual void apply_constraint(const ConstraintDesc& desc, Tensor& w) = 0;
  /// Softmax of attention scores with a mask (AttentionMaskDesc); mask may be null. probs may be
  /// scores.
  virtual void masked_softmax(const AttentionMaskDesc& desc, const Tensor& scores,
                              const Tensor* mask, Tensor& probs) = 0;
  /// Its gradient: d_scores = probs · (d_probs − Σ d_probs · probs) per row, the sum in double,
  /// and 0 across a row whose keys the mask and desc hide every one of (HiddenRows: their
  /// probabilities do not depend on the scores). d_scores may be d_probs.
  virtual void masked_softmax_backward(const AttentionMaskDesc& desc, const Tensor& probs,
                                       const Tensor* mask, const Tensor& d_probs,
                                       Tensor& d_scores) = 0;
  /// Keras' additive attention (additive_scores_math.hpp), in two steps. First the pairs' tanh
  /// values: pairs (batch, tq, tk, dim) = tanh(s·(query_i + key_j)) of query (batch, tq, dim) and
  /// key (batch, tk, dim), `factor` (one value) where desc has one, else null.
  virtual void additive_pairs(const AdditiveScoresDesc& desc, const Tensor& query,
                              const Tensor& key, const Tensor* factor, Tensor& pairs) = 0;
  /// Then the scores (batch, tq, tk) = Σ_d w[d]·pairs, `weights` (dim values) where desc has
  /// them, else null.
  virtual void additive_scores(const AdditiveScoresDesc& desc, const Tensor& pairs,
                               const Tensor* weights, Tensor& scores) = 0;
  /// Their gradients from d_scores, given the forward's pairs: d_query and d_key (overwritten;
  /// either may be null), and each query row's share of the weights' and the factor's
  /// gradients, weight_parts (batch·tq rows of dim) and factor_parts (batch·tq values) (null when
  /// not wanted), which the caller sums over the rows (column_sums).
  virtual void additive_scores_backward(const AdditiveScoresDesc& desc, const Tensor& query,
                                        const Tensor& key, const Tensor& pairs,
                                        const Tensor* weights, const Tensor* factor,
                                        const Tensor& d_scores, Tensor* d_query, Tensor* d_key,
                                        Tensor* weight_parts, Tensor* factor_parts) = 0;
  /// y[a, c, b, d] = x[a, b, c, d] for x of dimensions dims (d0, d1, d2, d3): swaps the middle two
  /// axes, as attention moves between (batch, time, heads, dim) and (batch, heads, time, dim).
  virtual void swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                                Tensor& y) = 0;

  /// mask = 1/(1-rate) or 0 per element (rows of `cols`), y = x * mask.
  virtual void dropout_forward(const DropoutDesc& desc, const Tensor& x, Tensor& y, Tensor& mask,
                               std::int64_t cols) = 0;
  /// noise = a standard normal value per element (rows of `cols`; desc's rate unused), keyed as
  /// dropout's mask; counts as one of the stream's calls, as dropout_forward does.
  virtual void normal_noise(const DropoutDesc& desc, Tensor& noise, std::int64_t cols) = 0;
  /// noise = a uniform value in [0, 1) per element (rows of `cols`), keyed and counted as
  /// normal_noise.
  virtual void uniform_noise(const DropoutDesc& desc, Tensor& noise, std::int64_t cols) = 0;

  /// Layer normalization: y = (x - mean) / sqrt(var + eps) * gamma + beta per row (gamma and
  /// beta, `cols` values, may be null), in the root-mean-square forms the desc names (there beta
  /// must be null); `stats` (resized here to 2 x rows) keeps each row's mean (0 without
  /// centred_variance) and 1 / sqrt(var + eps) for the backward.
  virtual void layer_norm_forward(const LayerNormDesc& desc, const Tensor& x, const Tensor* gamma,
                                  const Tensor* beta, Tensor& y, Tensor& stats) = 0;
  /// The forward's gradients: dx (may be null), d_gamma and d_beta (may be null; the sums over
  /// this shard's rows, in row order).
  virtual void layer_norm_backward(const LayerNormDesc& desc, const Tensor& x, const Tensor& dy,
                                   const Tensor* gamma, const Tensor& stats, Tensor* dx,
                                   Tensor* d_gamma, Tensor* d_beta) = 0;

  // Sequence masks: which steps of a sequence are padding, as Keras' masks say (nn/masking.hpp).
  /// mask[r] = 1 where any of x's row r (`features` values) differs from `value`, else 0:
  /// Embedding's mask_zero (features 1, value 0) and Masking's mask_value. mask holds x's rows.
  virtual void sequence_mask(const Tensor& x, float value, std::int64_t features, Tensor& mask) = 0;
  /// out[r, :] = a[r, :] where mask[r] != 0, else b[r, :] (zeros when b is null), over rows of
  /// `cols` values; out may be a or b.
  virtual void select_rows(const Tensor& mask, const Tensor& a, const Tensor* b, Tensor& out,
                           std::int64_t cols) = 0;
  /// y[b, c] = the mean of x[b, t, c] over the steps t mask[b, t] keeps (x: samples of `steps`
  /// rows of `channels`; recurrent_math.hpp's masked_step_mean), and its gradient dx.
  virtual void masked_average_steps(const Tensor& x, const Tensor& mask, Tensor& y,
                                    std::int64_t steps, std::int64_t channels) = 0;
  virtual void masked_average_steps_backward(const Tensor& dy, const Tensor& mask, Tensor& dx,
                                             std::int64_t steps, std::int64_t channels) = 0;

  // Recurrent cells, one time step over the batch's rows (nn/recurrent.cpp; the arithmetic is
  // backend/recurrent_math.hpp's, which says what `pre` keeps). Widths per row, in units of
  // desc.units: LSTM xw, rec, pre and d_pre 4; GRU xw, rec, d_xw and d_rec 3, pre 4; every other
  // tensor 1. All hold the same number of rows (recurrent_rows checks).
  /// LSTM: pre = xw + rec, c = f·c_prev + i·g, h = o·activation(c).
  virtual void lstm_step_forward(const RecurrentCellDesc& desc, const Tensor& xw, const Tensor& rec,
                                 const Tensor& c_prev, Tensor& pre, Tensor& c, Tensor& h) = 0;
  /// Its gradients: dh = dL/dh of the step; dc holds dL/dc from the next step on entry and
  /// dL/dc_prev on return; d_pre = dL/dpre (both products' gradient).
  virtual void lstm_step_backward(const RecurrentCellDesc& desc, const Tensor& pre,
                                  const Tensor& c_prev, const Tensor& c, const Tensor& dh,
                                  Tensor& dc, Tensor& d_pre) = 0;
  /// GRU (reset_after): h = z·h_prev + (1 − z)·hh.
  virtual void gru_step_forward(const RecurrentCellDesc& desc, const Tensor& xw, const Tensor& rec,
                                const Tensor& h_prev, Tensor& pre, Tensor& h) = 0;
  /// Its gradients given dh: d_xw, d_rec, and dh_prev = dh·z (the part of dL/dh_prev that does
  /// not pass the recurrent kernel).
  virtual void gru_step_backward(const RecurrentCellDesc& desc, const Tensor& pre,
                                 const Tensor& h_prev, const Tensor& dh, Tensor& d_xw,
                                 Tensor& d_rec, Tensor& dh_prev) = 0;

  // Spatial operations.
  /// dst (math::view_size(view) values) = the values of src the view picks, in the view's
  /// order (backend/strided_view_math.hpp).
  virtual void gather_view(const StridedView& view, const Tensor& src, Tensor& dst) = 0;
  /// dst[view_source(view, k)] = src[k] for each of the view's values; dst's other values are
  /// left as they are. The view must not pick a position twice (gather_view's gradient, into a
  /// zeroed dst).
  virtual void scatter_view(const StridedView& view, const Tensor& src, Tensor& dst) = 0;
  /// Copies an ImageBlock from src to dst (the cells of dst outside the block are left as they
  /// are).
  virtual void copy_image_block(const ImageBlock& block, const Tensor& src, Tensor& dst) = 0;
  /// y (batch, rows x row_factor, cols x col_factor, channels) = each input cell repeated over
  /// its factor block.
  virtual void upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor& y) = 0;
  /// dx = the sum of dy over each cell's block (in row-major order within the block).
  virtual void upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor& dx) = 0;
  /// y = x with each sample flipped as its two `draws` say (FlipDesc); y must not be x. Also the
  /// gradient: a flip is its own inverse.
  virtual void flip_images(const FlipDesc& desc, const Tensor& draws, const Tensor& x,
                           Tensor& y) = 0;
  /// y (batch, out_rows, out_cols, channels) = each sample of x transformed as WarpDesc says,
  /// with kDraws `draws` per sample (math::warp_value); y must not be x.
  virtual void warp_images(const WarpDesc& desc, const Tensor& draws, const Tensor& x,
                           Tensor& y) = 0;
  /// dx (overwritten) = the gradient of warp_images: each dy value spread back over the input
  /// pixels it was interpolated from, by the same weights.
  virtual void warp_images_backward(const WarpDesc& desc, const Tensor& draws, const Tensor& dy,
                                    Tensor& dx) = 0;
  /// y = each sample of x adjusted as AdjustDesc says (one draw per sample); means (batch,
  /// channels) receives each sample's channel means (contrast; zeros for brightness).
  virtual void adjust_images(const AdjustDesc& desc, const Tensor& draws, const Tensor& x,
                             Tensor& means, Tensor& y) = 0;
  /// dx = the gradient of adjust_images through its clip and, for contrast, the means.
  virtual void adjust_images_backward(const AdjustDesc& desc, const Tensor& draws,
                                      const Tensor& x, const Tensor& means, const Tensor& dy,
                                      Tensor& dx) = 0;
  /// A layer's products with its kernel. This default runs them as gemm() calls.
  virtual std::unique_ptr<DenseProducts> dense_products(const DenseProductDesc& desc);
  virtual std::unique_ptr<Convolution2D> convolution(const ConvolutionDesc& desc) = 0;
  virtual std::unique_ptr<Pooling2D> pooling(const PoolingDesc& desc) = 0;
  virtual std::unique_ptr<BatchNorm> batch_norm(const BatchNormDesc& desc) = 0;
  /// y[b, c] = the mean over the sample's `cells` of x[b, cell, c] (cells in order).
  virtual void global_average_pool_forward(const Tensor& x, Tensor& y, std::int64_t cells,
                                           std::int64_t channels) = 0;
  virtual void global_average_pool_backward(const Tensor& dy, Tensor& dx, std::int64_t cells,
                                            std::int64_t channels) = 0;
  /// SpectralNormalization's training update, as Keras computes it: `iterations` times v =
  /// normalize(u Wᵀ), u = normalize(v W) (normalize: x · min(rsqrt(Σ x²), 1e7), Keras'
  /// ops.normalize), then σ = v W uᵀ, kernel /= σ and u = the last u — unless the kernel is all
  /// zeros (both kept, as Keras' cond). Sums in double; σ rounded to float before the division.
  virtual void spectral_normalize(const SpectralNormDesc& desc, Tensor& kernel, Tensor& u) = 0;
  /// y = x pooled as `desc` says (backend/adaptive_pool_math.hpp), each value
  /// adaptive_pool_value's; with desc.max, arg (y's shape) the flat input cell of each maximum.
  virtual void adaptive_pool_forward(const AdaptivePoolDesc& desc, const Tensor& x, Tensor& y,
                                     Tensor& arg) = 0;
  /// dx = adaptive_pool_input_gradient of every input value (arg: the forward's, for max).
  virtual void adaptive_pool_backward(const AdaptivePoolDesc& desc, const Tensor& dy,
                                      const Tensor& arg, Tensor& dx) = 0;

  // Embedding (x holds float indices).
  /// y[i, :] = table[x[i], :]; returns the first bad index instead (y unspecified then).
  virtual std::optional<BadIndex> embedding_gather(const Tensor& table, const Tensor& x,
                                                   Tensor& y, std::int64_t dim) = 0;
  /// grad[v, :] = the sum of dy[i, :] over the positions i with x[i] == v, in ascending i;
  /// zero for rows nobody looked up.
  virtual void embedding_gradient(const Tensor& x, const Tensor& dy, Tensor& grad,
                                  std::int64_t dim) = 0;

  // Keras' numeric preprocessing into categories (nn/discretization.cpp,
  // nn/category_encoding.cpp; x holds floats).
  /// y[i] = the number of `boundaries` (ascending, n_boundaries of them) at most x[i]: the bin of
  /// x[i], as NumPy's digitize gives it (kernel_math.hpp's bin_of), as a float.
  virtual void discretize(const Tensor& x, const Tensor& boundaries, Tensor& y) = 0;
  /// y[i] = what x[i] looks up in the table of `keys` (ascending, distinct) and their `values`
  /// (kernel_math.hpp's looked_up: its key truncated toward zero). With desc.refuse_missing,
  /// returns the first x found in no row instead (y unspecified then).
  virtual std::optional<BadIndex> lookup(const math::LookupDesc& desc, const Tensor& x,
                                         const Tensor& keys, const Tensor& values, Tensor& y) = 0;
  /// Encodes category indices, x seen as [outer, n, inner] and y as [outer, inner, depth]:
  /// y[o, j, d] = the number of k with x[o, k, j] == d when `count`, else 1 when there is one
  /// (multi-hot; one-hot is the case n = 1), 0 otherwise. Returns the first index that is no
  /// integer in [0, depth) instead (y unspecified then).
  virtual std::optional<BadIndex> encode_categories(const Tensor& x, Tensor& y, std::int64_t n,
                                                    std::int64_t inner, std::int64_t depth,
                                                    bool count) = 0;

  // Losses and metrics: per-step sums in double, kept where the backend computes them.
  virtual std::unique_ptr<Sums> sums() = 0;
  /// Sets sums[slot] to the sum over the rows of the loss of each row (cols = values per row,
  /// classes for the categorical losses), weighted by `weights` (kernel_math.hpp's RowWeights:
  /// one per row, Keras' sample_weight; one per position, a masked output's); with grad, sets it
  /// (resized to pred's shape) to grad_scale * d(sum)/d(pred). Sparse labels that are not class
  /// indices throw DataError.
  virtual void loss_sum(const LossDesc& desc, const Tensor& pred, const Tensor& target,
                        const WeightTensors& weights, std::int64_t cols, float grad_scale,
                        Tensor* grad, Sums& sums, std::size_t slot) = 0;
  /// Sets sums[slot] to the sum over the rows of the metric of each row, weighted by `weights`
  /// as loss_sum's.
  virtual void metric_sum(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                          const WeightTensors& weights, std::int64_t cols, Sums& sums,
                          std::size_t slot) = 0;
  /// Sets sums[first_slot + b] for every bin b < histogram_bins(desc) to the sum of the rows'
  /// contributions to it (kernel_math.hpp's histogram_row: AUC's buckets, MeanIoU's confusion
  /// matrix), each bin added in row order, then element order (so the same on every backend).
  virtual void metric_histogram(const MetricDesc& desc, const Tensor& pred, const Tensor& target,
                                const WeightTensors& weights, std::int64_t cols, Sums& sums,
                                std::size_t first_slot) = 0;

  /// One optimizer step over `params` (in parameter order): global and per-tensor gradient
  /// clipping, decoupled weight decay, then the update (kernel_math.hpp's update_element).
  /// `step` counts from 1.
  virtual void optimizer_update(const OptimizerDesc& desc, std::int64_t step, double lr,
                                const std::vector<UpdateTensors>& params) = 0;
};

/// The process-wide CPU backend. Thread-safe (its methods keep no state between calls).
Backend& cpu_backend();

/// The process-wide CPU backend whose matrix products and convolutions run in `precision`
/// (util/precision.hpp): bf16 rounds their operands to bfloat16 and sums in float32 (it needs
/// AVX-512 BF16: see cpu_precision_unavailable); fp32 and tf32 are cpu_backend() (a CPU has no
/// TF32). Throws std::invalid_argument for fp16, which no CPU backend computes.
Backend& cpu_backend(Precision precision);

/// Why the CPU backend cannot compute in `precision` (a sentence naming what is missing), or ""
/// when it can.
std::string cpu_precision_unavailable(Precision precision);

/// The FLOP rate of the CPU backend's bfloat16 products over its float32 ones on this machine,
/// timed once per process (backend/cpu/bf16_rate.hpp), or nullopt when it is not timed (no
/// AVX-512 BF16, or bfloat16 on AMX tiles). Any thread.
std::optional<double> cpu_bf16_product_rate();

/// What a run computing in `precision` on this machine's CPU should be warned of, as a sentence,
/// or "": bf16 where its products run slower than float32 (cpu_bf16_product_rate() < 1).
std::string cpu_precision_warning(Precision precision);

/// Throws DataError naming the first of the host tensor `target`'s values that is not a class
/// index in [0, classes) nor the class `loss` ignores (sparse categorical cross-entropy's labels;
/// a device backend's loss gives such a row NaN instead, so device replicas check the host rows
/// first).
void check_sparse_labels(const Tensor& target, std::int64_t classes, const LossDesc& loss);

/// Throws std::logic_error unless the three sizes of an element-wise operation agree.
void check_same_sizes(std::int64_t a, std::int64_t b, std::int64_t out,
                              const char* operation);
/// Throws std::logic_error unless copy_columns' block fits both matrices; returns the rows.
std::int64_t check_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset,
                           const Tensor& dst, std::int64_t dst_cols, std::int64_t dst_offset,
                           std::int64_t width);
/// Throws std::logic_error unless x and y are whole rows of `cols` values and scale (and shift)
/// hold one value per column.
void check_column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift,
                         const Tensor& y, std::int64_t cols);
/// Throws std::logic_error unless a, b and c hold desc.batch products of desc's shapes, without
/// an epilogue (gemm with batch > 1).
void check_batched_gemm(const GemmDesc& desc, const Tensor& a, const Tensor& b, const Tensor& c);
/// Throws std::logic_error unless scores (and probs, and the mask when given) are laid out as
/// masked_softmax's desc says; returns the rows of scores (batch x heads x tq).
std::int64_t check_attention_scores(const AttentionMaskDesc& desc, const Tensor& scores,
                                    const Tensor* mask, const Tensor& probs);
/// Throws std::logic_error unless the tensors given hold additive attention's shapes for desc
/// (the factor present exactly where desc says, and with `weights_used` the weights too; the
/// other tensors' sizes where given).
void check_additive_scores(const AdditiveScoresDesc& desc, const Tensor& query, const Tensor& key,
                           const Tensor* weights, const Tensor* factor,
                           std::initializer_list<std::pair<const Tensor*, std::int64_t>> others,
                           bool weights_used);
/// check_additive_scores for additive_scores_backward's tensors (those given).
void check_additive_scores_backward(const AdditiveScoresDesc& desc, const Tensor& query,
                                    const Tensor& key, const Tensor& pairs, const Tensor* weights,
                                    const Tensor* factor, const Tensor& d_scores,
                                    const Tensor* d_query, const Tensor* d_key,
                                    const Tensor* weight_parts, const Tensor* factor_parts);
/// Throws std::logic_error unless pairs, weights and scores hold additive_scores' shapes.
void check_additive_pairs(const AdditiveScoresDesc& desc, const Tensor& pairs,
                          const Tensor* weights, const Tensor& scores);
/// Throws std::logic_error unless x holds dims' values, y as many, and y is not x.
void check_swap_middle_axes(const Tensor& x, const std::array<std::int64_t, 4>& dims,
                            const Tensor& y);
/// Throws std::logic_error (naming `op`) unless the view's axes are at most kMaxRank and
/// positive, every position it picks lies inside `whole`, `part` holds as many values as the
/// view, and the two are apart.
void check_strided_view(const char* op, const StridedView& view, const Tensor& whole,
                        const Tensor& part);
/// Throws std::logic_error unless the block lies inside both images and the tensors hold them.
void check_image_block(const ImageBlock& block, const Tensor& src, const Tensor& dst);
/// Throws std::logic_error unless x and y hold the input and output images of desc.
void check_upsample(const UpsampleDesc& desc, const Tensor& x, const Tensor& y);
/// Throws std::logic_error unless x and y are desc's images (apart) and draws has two per sample.
void check_flip(const FlipDesc& desc, const Tensor& draws, const Tensor& x, const Tensor& y);
/// Throws std::logic_error unless x and y hold desc's input and output images (apart), the
/// source region lies inside the input or holds all of it, and draws has kDraws per sample.
void check_warp(const WarpDesc& desc, const Tensor& draws, const Tensor& x, const Tensor& y);
/// Throws std::logic_error unless x, y (and dx) hold desc's images, means (batch, channels)
/// values and draws one per sample.
void check_adjust(const AdjustDesc& desc, const Tensor& draws, const Tensor& x,
                  const Tensor& means, const Tensor& y);
/// The samples of x for prelu; throws std::logic_error unless x is whole samples of desc, alpha
/// holds desc.groups values and the other tensors (may be null) as many as x.
std::int64_t prelu_rows(const PreluDesc& desc, const Tensor& x, const Tensor& alpha,
                        const Tensor* same_as_x, const Tensor* also_same_as_x);
/// The samples of unit_normalize; throws std::logic_error unless x is whole samples of desc, the
/// other tensors (same_as_x may be null) as many values, and none of them x's memory but x.
std::int64_t unit_norm_samples(const AxisGroups& desc, const Tensor& x, const Tensor* same_as_x,
                               const Tensor& out);
/// Throws std::logic_error unless x holds mask's rows of `features` values (sequence_mask).
void check_sequence_mask(const Tensor& x, std::int64_t features, const Tensor& mask);
/// The rows of select_rows; throws std::logic_error unless a, b (when given) and out hold
/// mask's rows of `cols` values.
std::int64_t select_rows_count(const Tensor& mask, const Tensor& a, const Tensor* b,
                               const Tensor& out, std::int64_t cols);
/// The samples of masked_average_steps: throws std::logic_error unless x holds them (steps ×
/// channels each), mask steps values each and y channels.
std::int64_t masked_average_samples(const Tensor& x, const Tensor& mask, const Tensor& y,
                                    std::int64_t steps, std::int64_t channels);
/// The rows of a recurrent step: throws std::logic_error unless every tensor holds rows of its
/// width (in units of desc.units), all as many rows as the first.
std::int64_t recurrent_rows(const RecurrentCellDesc& desc,
                            std::initializer_list<std::pair<const Tensor*, int>> tensors,
                            const char* operation);
/// The rows of x for layer normalization; throws std::logic_error unless x is whole rows.
std::int64_t layer_norm_rows(const LayerNormDesc& desc, const Tensor& x);
/// Throws std::logic_error naming `operation` unless kernel holds desc's rows x cols and u cols
/// values.
void check_spectral_norm(const SpectralNormDesc& desc, const Tensor& kernel, const Tensor& u,
                         const char* operation);
/// Checks that `in` holds desc's input samples and `out` its pooled ones (logic_error naming
/// `operation` otherwise).
void adaptive_pool_values(const AdaptivePoolDesc& desc, const Tensor& in, const Tensor& out,
                          const char* operation);
/// Throws std::logic_error when `t` is not on `backend`'s device, naming the operation.
void require_device(const Backend& backend, const Tensor& t, const char* operation);
/// The same for each of `tensors` (a null entry is skipped: an optional operand).
void require_device(const Backend& backend, std::initializer_list<const Tensor*> tensors,
                    const char* operation);
/// The weights of loss_sum and metric_sum as their kernels read them; throws std::logic_error
/// unless each given one is on `backend`'s device, with one value per row (`rows`) or per
/// position of each row (`rows` x `positions`, at least 1).
math::RowWeights row_weights(const Backend& backend, const WeightTensors& weights,
                             std::int64_t rows, std::int64_t positions, const char* operation);

}  // namespace tandem::backend

TANDEM_INTERNAL_API_END
