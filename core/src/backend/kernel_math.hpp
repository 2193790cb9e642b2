// Private: the per-element and per-row arithmetic of every backend (activation derivatives, the
// forwards of the plain activations, softmax rows, losses, metrics, optimizer updates, dropout
// masks, embedding index checks), written once as inline functions that nvcc compiles for the
// device and g++ for the host. The CPU backend's loops (backend/cpu/) and the CUDA backend's
// kernels (cuda/ops/*.cu) both call these very functions, so the two agree by construction.
//
// Every float and double +, -, *, / and sqrt goes through the helpers below, which on the device
// round each operation on its own (never contracted into a fused multiply-add) and, for floats,
// flush subnormal inputs and results to zero as the CPU backend does (it runs with FTZ/DAZ set,
// backend/cpu/parallel.cpp). What still differs between the backends is the transcendental
// functions: CUDA's exp, log, log1p, expm1, tanh, erf are within 1-4 ulp of glibc's, not equal to
// them; and the CPU computes the forwards of tanh, sigmoid, gelu, elu, softplus, swish and
// exponential, and the default LSTM cell's gates, with oneDNN's approximations (see
// activation_value; tests/core/backend/kernel_math_test.cpp checks both against the exact
// functions).
//
// Header rules: only <cmath>/<cstdint> (and the ActivationKind enum); no std containers, no
// exceptions; compiles with nvcc -std=c++17 and g++ -std=c++20.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/activation_kind.hpp"
#include "backend/attention_mask.hpp"
#include "backend/axis_groups.hpp"
#include "backend/image_geometry.hpp"

#ifdef __CUDACC__
#define TANDEM_HD __host__ __device__
#define TANDEM_HD_INLINED __host__ __device__ __forceinline__
#else
#define TANDEM_HD
// A row function the CPU backend's AVX-512 copies (avx512_copy.hpp) must inline: called out of
// line, it would run its baseline code.
#define TANDEM_HD_INLINED [[gnu::always_inline]] inline
#endif

namespace tandem::backend {

/// A loss as the backends compute it (Loss::desc()).
struct LossDesc {
  enum class Kind {
    mse,
    mae,
    bce,
    cce,
    scce,
    huber,
    hinge,
    squared_hinge,
    kl_divergence,
    log_cosh,
    poisson,
    cosine_similarity
  };
  Kind kind = Kind::mse;
  bool from_logits = false;
  float label_smoothing = 0;  // bce and cce only (the CPU keeps it as a float too)
  float delta = 1;            // huber only
  // The model follows Keras 2's definitions (nn/keras_generation.hpp): bce from probabilities
  // takes log(q + ε) where Keras 3 takes log(q); cosine_similarity floors a norm at 1e-6 (tf's
  // l2_normalize) where Keras 3 floors it at ε.
  bool keras2 = false;
  // scce only (Keras' ignore_class): a label equal to ignore_class is no class of the loss's — its
  // position's loss and gradient are 0, and the objective leaves it out of the mean
  // (nn/objective.hpp); any value, a class index or not (-1, 255).
  bool ignores_class = false;
  float ignore_class = 0;
  // Positions per row: a row of an output with several axes per sample (a sequence's steps, an
  // image's pixels) holds `positions` groups of the last axis' values. The losses of the last
  // axis (cce, scce, kl_divergence, cosine_similarity: on_last_axis) take each group's loss and
  // the row's is their mean, as Keras reduces every axis but the batch; sparse targets hold one
  // class index per position. The element-wise losses average all of a row's values alike.
  std::int64_t positions = 1;
};

/// A metric as the backends compute it (Metric::desc()).
struct MetricDesc {
  enum class Kind {
    binary_accuracy,
    categorical_accuracy,
    sparse_categorical_accuracy,
    mean_squared_error,
    mean_absolute_error,
    top_k_categorical_accuracy,         // the one-hot target's class among the k largest
    sparse_top_k_categorical_accuracy,  // the label's class among the k largest
    true_positives,                     // per element: pred > threshold and target != 0
    predicted_positives,                // per element: pred > threshold
    actual_positives,                   // per element: target != 0
    samples,                            // 1 per row: weighted, the rows' weight sum
    // Histograms (metric_histogram), summed over the epoch before a metric's value is read:
    auc_buckets,      // per element: its label's weight in its threshold bucket (AUC)
    confusion_matrix  // per row: 1 in cell true class x predicted class (MeanIoU)
  };
  Kind kind = Kind::binary_accuracy;
  float threshold = 0.5f;    // binary_accuracy and the positives: pred > threshold means 1
  int k = 5;                 // the top-k accuracies
  int bins = 0;              // auc_buckets: thresholds; confusion_matrix: classes
  bool from_logits = false;  // auc_buckets: a sigmoid first
  bool sparse_true = true;   // confusion_matrix: the target is a class index, else its argmax
  bool sparse_pred = false;  // confusion_matrix: the output is a class index, else its argmax
  int ignore_class = -1;     // confusion_matrix: rows of this true class count nowhere
  // Positions per row, as LossDesc::positions: the accuracies of the last axis (on_last_axis)
  // and the confusion matrix take each position's value; the row's is their mean (the
  // accuracies) or every position's cell (the confusion matrix, as Keras' MeanIoU flattens).
  std::int64_t positions = 1;
};

/// An optimizer's hyperparameters (Optimizer::desc()). The learning rate is not here: it changes at
/// run time and is passed per step. AdamW is kind adam (the CPU's AdamW is Adam with a default
/// weight decay of 0.004).
struct OptimizerDesc {
  enum class Kind { sgd, adam, rmsprop, adagrad, adadelta, adamax, nadam, lion };
  Kind kind = Kind::sgd;
  bool adamw = false;  // only for the name in messages: the update is Adam's
  double weight_decay = 0;
  double clipnorm = 0, clipvalue = 0, global_clipnorm = 0;  // 0: off
  double momentum = 0;                                      // sgd, rmsprop
  bool nesterov = false;                                    // sgd
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;      // adam, adamax, nadam, lion (betas)
  bool amsgrad = false;                                     // adam
  double rho = 0.9;                                         // rmsprop, adadelta
  bool centered = false;                                    // rmsprop
  double initial_accumulator_value = 0.1;                   // adagrad
  // nadam: the momentum schedule u_t = beta_1 (1 - 0.5 * 0.96^(e t)); e is 1 in Keras 3 (and
  // tf.keras' new optimizers), the `decay` (0.004 by default) of Keras 2's legacy Nadam.
  double nadam_schedule_decay = 1.0;
  // Keras' use_ema: a moving average of each trainable weight, the slot after the rule's
  // ("average"), updated after every step: average = m average + (1 - m) w, w the updated weight
  // (before its constraint). Every ema_overwrite_frequency steps (0: never, Keras' None) the
  // weight takes the average. Keras 3 starts the average at the first step's weight (m is 0 at
  // step 1); tf.keras 2.11+ (ema_keras2) at the weight before the first step.
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::int64_t ema_overwrite_frequency = 0;
  bool ema_keras2 = false;
  // Keras 3's gradient_accumulation_steps N: each call adds its gradient to the optimizer's
  // accumulator slot ("gradient_accumulator", after the average); every Nth call updates the
  // weights with (g + accumulated) / N, clipped, then empties the accumulator. The update's
  // step count (Adam's bias correction, the average's first step) counts updates; a schedule's
  // learning rate follows the calls, as Keras' does. 1: off.
  std::int64_t gradient_accumulation_steps = 1;
};

namespace math {

// ---------------------------------------------------------------------------------------------
// Arithmetic: one IEEE operation each, round to nearest; floats flush subnormals on the device
// (FTZ/DAZ as the CPU backend). On the host these are the plain operators (g++ does not contract
// them without -ffp-contract=fast, and x86-64 without -march has no FMA anyway).

TANDEM_HD inline float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("add.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a + b;
#endif
}
TANDEM_HD inline float fsub(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sub.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a - b;
#endif
}
TANDEM_HD inline float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a * b;
#endif
}
TANDEM_HD inline float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("div.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a / b;
#endif
}
TANDEM_HD inline float fsqrt(float a) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sqrt.rn.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
#else
  return std::sqrt(a);
#endif
}
TANDEM_HD inline double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
TANDEM_HD inline double dsub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
TANDEM_HD inline double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
TANDEM_HD inline double ddiv(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
TANDEM_HD inline double dsqrt(double a) {
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
/// float -> double (a subnormal float reads as zero, as under DAZ).
TANDEM_HD inline double f2d(float a) {
#ifdef __CUDA_ARCH__
  double r;
  asm("cvt.ftz.f64.f32 %0, %1;" : "=d"(r) : "f"(a));
  return r;
#else
  return static_cast<double>(a);
#endif
}
/// double -> float, round to nearest (a subnormal result becomes zero, as under FTZ).
TANDEM_HD inline float d2f(double a) {
#ifdef __CUDA_ARCH__
  float r;
  asm("cvt.rn.ftz.f32.f64 %0, %1;" : "=f"(r) : "d"(a));
  return r;
#else
  return static_cast<float>(a);
#endif
}
TANDEM_HD inline float i2f(std::int64_t a) {
  return static_cast<float>(a);
}
TANDEM_HD inline double i2d(std::int64_t a) {
  return static_cast<double>(a);
}
TANDEM_HD inline float fabs_(float a) {
#ifdef __CUDA_ARCH__
  return fabsf(a);
#else
  return std::fabs(a);
#endif
}
/// std::max(a, b) exactly: (a < b) ? b : a (a NaN `a` stays, a NaN `b` is dropped).
TANDEM_HD inline float std_max(float a, float b) {
  return (a < b) ? b : a;
}
/// std::clamp(v, lo, hi) exactly (a NaN passes through).
TANDEM_HD inline float std_clamp(float v, float lo, float hi) {
  return (v < lo) ? lo : (hi < v) ? hi : v;
}
TANDEM_HD inline double std_clamp(double v, double lo, double hi) {
  return (v < lo) ? lo : (hi < v) ? hi : v;
}
TANDEM_HD inline float quiet_nan() {
#ifdef __CUDA_ARCH__
  return __int_as_float(0x7fc00000);
#else
  return std::nanf("");
#endif
}

// Transcendentals: glibc's on the host (what the CPU backend calls), CUDA's on the device.
#ifdef __CUDA_ARCH__
#define TANDEM_MATH(type, name, device_fn, host_fn) \
  TANDEM_HD inline type name(type x) {              \
    return device_fn(x);                            \
  }
#else
#define TANDEM_MATH(type, name, device_fn, host_fn) \
  TANDEM_HD inline type name(type x) {              \
    return host_fn(x);                              \
  }
#endif
TANDEM_MATH(float, exp_f, expf, std::exp)
TANDEM_MATH(float, expm1_f, expm1f, std::expm1)
TANDEM_MATH(float, log_f, logf, std::log)
TANDEM_MATH(float, log1p_f, log1pf, std::log1p)
TANDEM_MATH(float, tanh_f, tanhf, std::tanh)
TANDEM_MATH(float, erf_f, erff, std::erf)
TANDEM_MATH(float, erfc_f, erfcf, std::erfc)
TANDEM_MATH(float, floor_f, floorf, std::floor)
TANDEM_MATH(float, ceil_f, ceilf, std::ceil)
TANDEM_MATH(float, round_f, roundf, std::round)
TANDEM_MATH(double, exp_d, ::exp, std::exp)
TANDEM_MATH(double, log_d, ::log, std::log)
TANDEM_MATH(double, cos_d, ::cos, std::cos)
TANDEM_MATH(double, sin_d, ::sin, std::sin)
TANDEM_MATH(double, floor_d, ::floor, std::floor)
#undef TANDEM_MATH

// ---------------------------------------------------------------------------------------------
// Activations (nn/activation_fn.cpp). Element-wise kinds: value(x) and derivative(x, y) with
// y = value(x); softmax is per row.

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kSeluScaleAlpha = kSeluScale * kSeluAlpha;
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

/// activation_fn.cpp's sigmoid(): stable for large |x|.
TANDEM_HD inline float sigmoid(float x) {
  if (x >= 0) return fdiv(1.0f, fadd(1.0f, exp_f(-x)));
  const float z = exp_f(x);
  return fdiv(z, fadd(1.0f, z));
}

/// A stable log(1 + e^x).
TANDEM_HD inline float softplus(float x) {
  return fadd(std_max(x, 0.0f), log1p_f(exp_f(-fabs_(x))));
}

constexpr float kLeakyReluSlope = 0.2f;  // Keras 3's activations.leaky_relu default

/// relu6(x + 3) / 6, Keras 3's (and PyTorch's) hard sigmoid.
TANDEM_HD inline float hard_sigmoid(float x) {
  return fdiv(std_clamp(fadd(x, 3.0f), 0.0f, 6.0f), 6.0f);
}

/// clip(0.2 x + 0.5, 0, 1), Keras 2's hard sigmoid (ONNX's HardSigmoid with its defaults).
TANDEM_HD inline float hard_sigmoid_keras2(float x) {
  return std_clamp(fadd(fmul(0.2f, x), 0.5f), 0.0f, 1.0f);
}

/// f(x) for every kind but softmax (softmax_row). linear, relu, selu, softsign: the CPU's own
/// expressions, bit for bit. tanh, sigmoid, gelu, elu, softplus, swish and exponential: the CPU
/// computes them with oneDNN's approximations, which cannot be repeated here; these are the
/// functions they approximate, each to a few ulp: tanh, the CPU's stable sigmoid, x/2 erfc(-x/√2)
/// (= x/2 (1 + erf(x/√2)) without its cancellation for x < 0), expm1 (elu's alpha is 1), a stable
/// log(1 + e^x), x sigmoid(x), e^x. oneDNN's own error is larger in places (measured: gelu 2e-3
/// relative near x = -4, elu 1e-2 relative near 0 where it computes e^x - 1, softplus returns 0
/// for x near -15 and 7.6e-6 for x near -87), so agreement with the CPU is to its error.
TANDEM_HD inline float activation_value(ActivationKind kind, float x) {
  switch (kind) {
    case ActivationKind::relu:  // std::max(x, 0.0f): a NaN input stays NaN
      return std_max(x, 0.0f);
    case ActivationKind::tanh:
      return tanh_f(x);
    case ActivationKind::sigmoid:
      return sigmoid(x);
    case ActivationKind::gelu:
      return fmul(fmul(0.5f, x), erfc_f(fmul(-x, kInvSqrt2)));
    case ActivationKind::elu:
      return x > 0 ? x : expm1_f(x);
    case ActivationKind::selu:
      return fmul(kSeluScale, x > 0 ? x : fmul(kSeluAlpha, expm1_f(x)));
    case ActivationKind::softplus:
      return softplus(x);
    case ActivationKind::softsign:
      return fdiv(x, fadd(1.0f, fabs_(x)));
    case ActivationKind::swish:
      return fmul(x, sigmoid(x));
    case ActivationKind::exponential:
      return exp_f(x);
    case ActivationKind::leaky_relu:
      return x > 0 ? x : fmul(kLeakyReluSlope, x);
    case ActivationKind::hard_sigmoid:
      return hard_sigmoid(x);
    case ActivationKind::hard_sigmoid_keras2:
      return hard_sigmoid_keras2(x);
    case ActivationKind::hard_swish:
      return fmul(x, hard_sigmoid(x));
    case ActivationKind::mish:
      return fmul(x, tanh_f(softplus(x)));
    case ActivationKind::linear:
    case ActivationKind::softmax:      // (per row: softmax_row)
    case ActivationKind::log_softmax:  // (per row: log_softmax_row)
      break;
  }
  return x;
}

/// Keras 3's ReLU layer (ReLU.static_call) with its parameters: the positive part is x where
/// x > threshold (relu(x) for threshold 0), clipped to [0, max_value] when capped; minus
/// negative_slope * relu(threshold - x). ELU: x for x > 0, else alpha (e^x - 1).
TANDEM_HD inline float shaped_activation_value(const ShapedActivation& a, float x) {
  if (a.elu) return x > 0 ? x : fmul(a.alpha, expm1_f(x));
  float positive = a.threshold != 0 ? (x > a.threshold ? x : 0.0f) : std_max(x, 0.0f);
  if (a.capped) positive = std_clamp(positive, 0.0f, a.max_value);
  if (a.negative_slope == 0) return positive;
  return fsub(positive, fmul(a.negative_slope, std_max(fsub(a.threshold, x), 0.0f)));
}

/// d shaped_activation_value / dx (0 at the kinks' far side, as the pieces say).
TANDEM_HD inline float shaped_activation_derivative(const ShapedActivation& a, float x) {
  if (a.elu) return x > 0 ? 1.0f : fmul(a.alpha, exp_f(x));
  float slope = (a.threshold != 0 ? x > a.threshold : x > 0) ? 1.0f : 0.0f;
  if (a.capped) {
    const float positive = a.threshold != 0 ? (x > a.threshold ? x : 0.0f) : std_max(x, 0.0f);
    if (!(positive > 0 && positive < a.max_value)) slope = 0.0f;
  }
  if (a.negative_slope != 0 && x < a.threshold) slope = fadd(slope, a.negative_slope);
  return slope;
}

/// f'(x) given x and y = f(x), as activation_backward's lambdas (every kind but softmax).
TANDEM_HD inline float activation_derivative(ActivationKind kind, float x, float y) {
  switch (kind) {
    case ActivationKind::relu:
      return x > 0 ? 1.0f : 0.0f;
    case ActivationKind::tanh:
      return fsub(1.0f, fmul(y, y));
    case ActivationKind::sigmoid:
      return fmul(y, fsub(1.0f, y));
    case ActivationKind::gelu:
      return fadd(fmul(0.5f, fadd(1.0f, erf_f(fmul(x, kInvSqrt2)))),
                  fmul(fmul(x, kInvSqrt2Pi), exp_f(fmul(fmul(-0.5f, x), x))));
    case ActivationKind::elu:
      return x > 0 ? 1.0f : fadd(y, 1.0f);
    case ActivationKind::selu:
      return x > 0 ? kSeluScale : fadd(y, kSeluScaleAlpha);
    case ActivationKind::softplus:
      return sigmoid(x);
    case ActivationKind::softsign: {
      const float d = fadd(1.0f, fabs_(x));
      return fdiv(1.0f, fmul(d, d));
    }
    case ActivationKind::swish: {
      const float s = sigmoid(x);
      return fmul(s, fadd(1.0f, fmul(x, fsub(1.0f, s))));
    }
    case ActivationKind::exponential:
      return y;
    case ActivationKind::leaky_relu:
      return x > 0 ? 1.0f : kLeakyReluSlope;
    case ActivationKind::hard_sigmoid:
      return x > -3.0f && x < 3.0f ? fdiv(1.0f, 6.0f) : 0.0f;
    case ActivationKind::hard_sigmoid_keras2:
      return x > -2.5f && x < 2.5f ? 0.2f : 0.0f;
    case ActivationKind::hard_swish:  // hard_sigmoid(x) + x hard_sigmoid'(x)
      return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : fdiv(fadd(fmul(2.0f, x), 3.0f), 6.0f);
    case ActivationKind::mish: {  // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
      const float t = tanh_f(softplus(x));
      return fadd(t, fmul(fmul(x, sigmoid(x)), fsub(1.0f, fmul(t, t))));
    }
    case ActivationKind::linear:
    case ActivationKind::softmax:
    case ActivationKind::log_softmax:
      break;
  }
  return 1.0f;
}

/// grad_in = grad_out * f'(x) (the CPU's chain()).
TANDEM_HD inline float activation_grad(ActivationKind kind, float x, float y, float grad_out) {
  return fmul(grad_out, activation_derivative(kind, x, y));
}

/// One row of softmax: y = e^(x - max) / sum, the sum in double (y may be x).
TANDEM_HD inline void softmax_row(const float* x, float* y, std::int64_t cols) {
  if (cols <= 0) return;
  float mx = x[0];
  for (std::int64_t c = 1; c < cols; ++c) mx = std_max(mx, x[c]);
  double sum = 0;
  for (std::int64_t c = 0; c < cols; ++c) {
    y[c] = exp_f(fsub(x[c], mx));
    sum = dadd(sum, f2d(y[c]));
  }
  const float inv = d2f(ddiv(1.0, sum));
  for (std::int64_t c = 0; c < cols; ++c) y[c] = fmul(y[c], inv);
}

/// One row of softmax's backward: gi = y (g - sum(g y)), the sum in double (gi may be g).
TANDEM_HD inline void softmax_row_backward(const float* y, const float* g, float* gi,
                                           std::int64_t cols) {
  double dot = 0;
  for (std::int64_t c = 0; c < cols; ++c) dot = dadd(dot, f2d(fmul(g[c], y[c])));
  const float d = d2f(dot);
  for (std::int64_t c = 0; c < cols; ++c) gi[c] = fmul(y[c], fsub(g[c], d));
}

/// Whether x replaces the running maximum (minimum) m of Maximum (Minimum): strictly beyond it,
/// or NaN (a NaN input wins, as std::fmax would not: it propagates like Keras' maximum).
TANDEM_HD inline bool extreme_beats(bool maximum, float x, float m) {
  return (maximum ? x > m : x < m) || (x != x && m == m);
}

/// Whether key c of a row of attention scores is kept: c <= last (the causal limit) and not
/// hidden by the row's mask (keep may be null: every key).
TANDEM_HD inline bool attention_key_kept(const float* keep, std::int64_t c, std::int64_t last) {
  return c <= last && (keep == nullptr || keep[c] != 0.0f);
}

/// Row r of attention scores laid out (batch, heads, tq, tk) under `d`: its mask row (null when
/// `mask` is null; mask (batch, tq, tk)) and its last key the causal limit leaves.
struct AttentionRow {
  const float* keep;
  std::int64_t last;
};
TANDEM_HD inline AttentionRow attention_row(const AttentionMaskDesc& d, const float* mask,
                                            std::int64_t r) {
  const std::int64_t i = r % d.tq, b = r / (d.heads * d.tq);
  return {mask ? mask + (b * d.tq + i) * d.tk : nullptr, d.causal ? i : d.tk - 1};
}

/// Whether a row of attention scores keeps any key (attention_key_kept).
TANDEM_HD inline bool attention_row_keeps_any(const float* keep, std::int64_t cols,
                                              std::int64_t last) {
  for (std::int64_t c = 0; c < cols; ++c)
    if (attention_key_kept(keep, c, last)) return true;
  return false;
}

/// One row of attention probabilities (AttentionMaskDesc): softmax over the kept keys
/// (attention_key_kept), hidden keys 0, and a row with none kept as `hidden_rows` says. The sum
/// in double (y may be x).
TANDEM_HD inline void masked_softmax_row(const float* x, float* y, std::int64_t cols,
                                         const float* keep, std::int64_t last,
                                         HiddenRows hidden_rows) {
  if (cols <= 0) return;
  if (!attention_row_keeps_any(keep, cols, last)) {
    if (hidden_rows == HiddenRows::keras2_additive) {  // every score less 1e9, then softmax
      float mx = fadd(x[0], -1e9f);
      for (std::int64_t c = 1; c < cols; ++c) mx = std_max(mx, fadd(x[c], -1e9f));
      double sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        y[c] = exp_f(fsub(fadd(x[c], -1e9f), mx));
        sum = dadd(sum, f2d(y[c]));
      }
      const float inv = d2f(ddiv(1.0, sum));
      for (std::int64_t c = 0; c < cols; ++c) y[c] = fmul(y[c], inv);
    } else {
      const float each = hidden_rows == HiddenRows::uniform ? fdiv(1.0f, i2f(cols)) : 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) y[c] = each;
    }
    return;
  }
  float mx = 0;
  bool any = false;
  for (std::int64_t c = 0; c < cols; ++c)
    if (attention_key_kept(keep, c, last)) {
      mx = any ? std_max(mx, x[c]) : x[c];
      any = true;
    }
  double sum = 0;
  for (std::int64_t c = 0; c < cols; ++c) {
    y[c] = attention_key_kept(keep, c, last) ? exp_f(fsub(x[c], mx)) : 0.0f;
    sum = dadd(sum, f2d(y[c]));
  }
  const float inv = d2f(ddiv(1.0, sum));
  for (std::int64_t c = 0; c < cols; ++c) y[c] = fmul(y[c], inv);
}

/// The gradient of masked_softmax_row: softmax_row_backward, except that a row whose keys are
/// all hidden gets 0 unless `hidden_rows` is Keras 2's (whose scores still shift its softmax).
/// gi may be g.
TANDEM_HD inline void masked_softmax_row_backward(const float* y, const float* g, float* gi,
                                                  std::int64_t cols, const float* keep,
                                                  std::int64_t last, HiddenRows hidden_rows) {
  if (hidden_rows != HiddenRows::keras2_additive && !attention_row_keeps_any(keep, cols, last)) {
    for (std::int64_t c = 0; c < cols; ++c) gi[c] = 0.0f;
    return;
  }
  softmax_row_backward(y, g, gi, cols);
}

// Row sums in kRowLanes double partial sums: value c goes to lane c % kRowLanes, and the lanes
// are combined pairwise in a fixed order (lane k with k + 4, then with k + 2, then lane 0 with lane
// 1). The independent chains let the CPU add a vector of values at a time (one chain waited on each
// add); the fixed order makes a sum the same bits on any thread count, in either CPU copy
// (avx512_copy.hpp) and in the CUDA kernels.
inline constexpr int kRowLanes = 8;

#if defined(__CUDA_ARCH__)
#define TANDEM_UNROLL_LANES _Pragma("unroll")
#elif defined(__CUDACC__)  // the host pass of a .cu file: its kernels' host stubs sum no rows
#define TANDEM_UNROLL_LANES
#else
#define TANDEM_UNROLL_LANES _Pragma("GCC unroll 8")
#endif

/// body(c, lane) for c in [0, cols), lane = c % kRowLanes, a full block of lanes at a time.
template <class Body>
TANDEM_HD_INLINED void for_each_in_lanes(std::int64_t cols, const Body& body) {
  const std::int64_t full = cols - cols % kRowLanes;
  for (std::int64_t c = 0; c < full; c += kRowLanes) {
    TANDEM_UNROLL_LANES
    for (int k = 0; k < kRowLanes; ++k) body(c + k, k);
  }
  // The lanes named by constants alone, so that a GPU keeps them in registers.
  TANDEM_UNROLL_LANES
  for (int k = 0; k < kRowLanes; ++k)
    if (full + k < cols) body(full + k, k);
}

/// The sum of the lanes in the fixed order above (the lanes are overwritten).
TANDEM_HD_INLINED double lanes_total(double (&lanes)[kRowLanes]) {
  for (int width = kRowLanes / 2; width > 0; width /= 2) {
    TANDEM_UNROLL_LANES
    for (int k = 0; k < width; ++k) lanes[k] = dadd(lanes[k], lanes[k + width]);
  }
  return lanes[0];
}

/// Normalization's factors for one feature, y = x * scale + shift, computed in double and then
/// rounded: (x - mean) / d, or inverted x * d + mean, where d = max(sqrt(variance), 1e-7)
/// (Keras' epsilon; a NaN variance gives NaN factors, as Keras' maximum does).
TANDEM_HD inline void normalization_factors(double mean, double variance, bool invert, float& scale,
                                            float& shift) {
  const double root = dsqrt(variance);
  const double deviation = root < 1e-7 ? 1e-7 : root;
  scale = d2f(invert ? deviation : ddiv(1.0, deviation));
  shift = d2f(invert ? mean : ddiv(-mean, deviation));
}

/// Layer normalization of one row: its mean and 1 / sqrt(biased variance + epsilon), two
/// passes in double, each summed in lanes. Without `centred_variance` (RMSNormalization) the
/// mean is taken as 0: 1 / sqrt(mean of squares + epsilon), one pass.
TANDEM_HD_INLINED void layer_norm_row_stats(const float* x, std::int64_t cols, double epsilon,
                                            bool centred_variance, float* mean, float* inv_std) {
  double m = 0.0;
  if (centred_variance) {
    double sums[kRowLanes] = {};
    for_each_in_lanes(cols, [&](std::int64_t c, int k) { sums[k] = dadd(sums[k], f2d(x[c])); });
    m = ddiv(lanes_total(sums), i2d(cols));
  }
  double squares[kRowLanes] = {};
  for_each_in_lanes(cols, [&](std::int64_t c, int k) {
    const double d = dsub(f2d(x[c]), m);
    squares[k] = dadd(squares[k], dmul(d, d));
  });
  *mean = d2f(m);
  *inv_std = d2f(ddiv(1.0, dsqrt(dadd(ddiv(lanes_total(squares), i2d(cols)), epsilon))));
}

/// What the output subtracts from x before scaling: the row's mean, or nothing (0) where the
/// output is not centred (Keras' rms_scaling, RMSNormalization).
TANDEM_HD_INLINED float layer_norm_output_shift(float mean, bool centred_output) {
  return centred_output ? mean : 0.0f;
}

/// The normalized value of x given its row's statistics.
TANDEM_HD_INLINED float layer_norm_hat(float x, float mean, float inv_std) {
  return fmul(fsub(x, mean), inv_std);
}

/// LayerNormalization's gamma and beta gradients add the rows in blocks of this many: each
/// block's sum in row order, then the blocks' sums in block order, so that the CPU can split the
/// rows across threads and still add as the CUDA kernel (one thread per column) does.
inline constexpr std::int64_t kLayerNormRowBlock = 128;

/// The gamma gradient's term of one value: dy * x-hat (x-hat of the output's shift).
TANDEM_HD_INLINED float layer_norm_gamma_term(float dy, float x, float mean, float inv_std) {
  return fmul(dy, layer_norm_hat(x, mean, inv_std));
}

/// y = x-hat * gamma + beta for one row (gamma, beta may be null: 1 and 0).
TANDEM_HD_INLINED void layer_norm_row(const float* x, float* y, std::int64_t cols, float mean,
                                      float inv_std, const float* gamma, const float* beta) {
  for (std::int64_t c = 0; c < cols; ++c) {
    float v = layer_norm_hat(x[c], mean, inv_std);
    if (gamma) v = fmul(v, gamma[c]);
    if (beta) v = fadd(v, beta[c]);
    y[c] = v;
  }
}

/// dx of one row, g = dy * gamma, shift = layer_norm_output_shift(mean, centred_output):
/// inv_std (g - mean(g) - x-hat mean(g x-hat)) when centred (x-hat = (x - mean) inv_std);
/// otherwise inv_std (g - (x - mean) inv_std mean(g x inv_std)), the variance's own mean kept
/// (0 for RMSNormalization). The means in double, summed in lanes (dx may be dy).
TANDEM_HD_INLINED void layer_norm_row_backward(const float* x, const float* dy, const float* gamma,
                                               float mean, float inv_std, bool centred_output,
                                               std::int64_t cols, float* dx) {
  const float shift = layer_norm_output_shift(mean, centred_output);
  double sum_g[kRowLanes] = {}, sum_gx[kRowLanes] = {};
  const auto add = [&](std::int64_t c, int k, float g) {
    sum_g[k] = dadd(sum_g[k], f2d(g));
    sum_gx[k] = dadd(sum_gx[k], f2d(fmul(g, layer_norm_hat(x[c], shift, inv_std))));
  };
  if (gamma)  // tested outside the loop, so that the loop has no branch to vectorise around
    for_each_in_lanes(cols, [&](std::int64_t c, int k) { add(c, k, fmul(dy[c], gamma[c])); });
  else
    for_each_in_lanes(cols, [&](std::int64_t c, int k) { add(c, k, dy[c]); });
  const float k1 = centred_output ? d2f(ddiv(lanes_total(sum_g), i2d(cols))) : 0.0f;
  const float k2 = d2f(ddiv(lanes_total(sum_gx), i2d(cols)));
  for (std::int64_t c = 0; c < cols; ++c) {
    const float g = gamma ? fmul(dy[c], gamma[c]) : dy[c];
    const float hat = layer_norm_hat(x[c], mean, inv_std);
    dx[c] = fmul(inv_std, fsub(fsub(g, k1), fmul(hat, k2)));
  }
}

/// One row of log-softmax: y = x - max - log(sum e^(x - max)), the sum in double (y may be x).
TANDEM_HD inline void log_softmax_row(const float* x, float* y, std::int64_t cols) {
  if (cols <= 0) return;
  float mx = x[0];
  for (std::int64_t c = 1; c < cols; ++c) mx = std_max(mx, x[c]);
  double sum = 0;
  for (std::int64_t c = 0; c < cols; ++c) sum = dadd(sum, f2d(exp_f(fsub(x[c], mx))));
  const float shift = fadd(mx, d2f(log_d(sum)));
  for (std::int64_t c = 0; c < cols; ++c) y[c] = fsub(x[c], shift);
}

/// One row of log-softmax's backward: gi = g - e^y sum(g), the sum in double (gi may be g).
TANDEM_HD inline void log_softmax_row_backward(const float* y, const float* g, float* gi,
                                               std::int64_t cols) {
  double total = 0;
  for (std::int64_t c = 0; c < cols; ++c) total = dadd(total, f2d(g[c]));
  const float t = d2f(total);
  for (std::int64_t c = 0; c < cols; ++c) gi[c] = fsub(g[c], fmul(exp_f(y[c]), t));
}

// ---------------------------------------------------------------------------------------------
// Losses (nn/losses.cpp). loss_row returns row r's loss as the CPU computes it in double (the
// CPU's compute() returns the sum of these over the rows, added in row order) and, when grad is
// not null, writes the row's part of compute()'s grad: grad_scale * d(row loss)/d(pred).

constexpr float kEpsilon = 1e-7f;  // Keras backend epsilon()
constexpr float kOneMinusEpsilon = 1.0f - kEpsilon;
constexpr double kEpsilonD = static_cast<double>(kEpsilon);
constexpr double kOneMinusEpsilonD = 1.0 - kEpsilonD;

/// CategoricalCrossentropy::label(): the class index a sparse label names, or -1 when it is not
/// an integer in [0, classes) (where the CPU throws DataError).
TANDEM_HD inline std::int64_t sparse_label(float value, std::int64_t classes) {
  if (!(value >= 0.0f) || !(value < 9.2e18f)) return -1;  // NaN, negative, beyond int64
  const auto k = static_cast<std::int64_t>(value);
  if (i2f(k) != value || k >= classes) return -1;
  return k;
}

/// mean_squared_error / mean_absolute_error of row r (cols values).
TANDEM_HD inline double regression_row(bool squared, const float* pred, const float* target,
                                       float* grad, std::int64_t r, std::int64_t cols,
                                       float grad_scale) {
  const float gs = fdiv(grad_scale, i2f(cols));
  double s = 0;
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    const float d = fsub(pred[c], target[c]);
    s = dadd(s, f2d(squared ? fmul(d, d) : fabs_(d)));
    if (grad) grad[c] = squared ? fmul(fmul(2.0f, d), gs) : (d > 0 ? gs : (d < 0 ? -gs : 0.0f));
  }
  return ddiv(s, i2d(cols));
}

/// binary_crossentropy of row r, from probabilities (Keras' clipping) or logits.
TANDEM_HD inline double binary_crossentropy_row(bool from_logits, bool keras2, float smoothing,
                                                const float* pred, const float* target, float* grad,
                                                std::int64_t r, std::int64_t cols,
                                                float grad_scale) {
  const float log_offset = keras2 ? kEpsilon : 0.0f;
  const float gs = fdiv(grad_scale, i2f(cols));
  double s = 0;
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    const float t = fadd(fmul(target[c], fsub(1.0f, smoothing)), fmul(0.5f, smoothing));
    const float x = pred[c];
    if (from_logits) {
      // max(x, 0) - x t + log(1 + exp(-|x|))
      s = dadd(s, f2d(fadd(fsub(std_max(x, 0.0f), fmul(x, t)), log1p_f(exp_f(-fabs_(x))))));
      if (grad) {
        const float sig =
            x >= 0 ? fdiv(1.0f, fadd(1.0f, exp_f(-x))) : fdiv(exp_f(x), fadd(1.0f, exp_f(x)));
        grad[c] = fmul(fsub(sig, t), gs);
      }
    } else {
      const bool clipped = x < kEpsilon || x > kOneMinusEpsilon;
      const float q = std_clamp(x, kEpsilon, kOneMinusEpsilon);
      const float positive = fadd(q, log_offset), negative = fadd(fsub(1.0f, q), log_offset);
      s = dadd(s, f2d(-fadd(fmul(t, log_f(positive)), fmul(fsub(1.0f, t), log_f(negative)))));
      if (grad)
        grad[c] =
            clipped ? 0.0f : fmul(fadd(fdiv(-t, positive), fdiv(fsub(1.0f, t), negative)), gs);
    }
  }
  return ddiv(s, i2d(cols));
}

/// categorical_crossentropy (sparse: target holds one class index per row) of row r. A sparse
/// label that is not a class index gives a NaN loss and NaN gradients for the row (the CPU
/// throws DataError: see check_sparse_labels in losses.hpp).
TANDEM_HD inline double categorical_crossentropy_row(bool sparse, bool from_logits, float smoothing,
                                                     const float* pred, const float* target,
                                                     float* grad, std::int64_t r,
                                                     std::int64_t classes, float grad_scale) {
  const float* p = pred + r * classes;
  float* g = grad ? grad + r * classes : nullptr;
  std::int64_t label = 0;
  if (sparse) {
    label = sparse_label(target[r], classes);
    if (label < 0) {
      if (g)
        for (std::int64_t c = 0; c < classes; ++c) g[c] = quiet_nan();
      return static_cast<double>(quiet_nan());
    }
  }
  const float* t_row = sparse ? target : target + r * classes;
  const float class_share = fdiv(smoothing, i2f(classes));
  auto target_at = [&](std::int64_t c) -> float {
    if (sparse) return c == label ? 1.0f : 0.0f;
    return fadd(fmul(t_row[c], fsub(1.0f, smoothing)), class_share);
  };
  double loss = 0;
  if (from_logits) {
    float mx = p[0];
    for (std::int64_t c = 1; c < classes; ++c) mx = std_max(mx, p[c]);
    double z = 0;
    for (std::int64_t c = 0; c < classes; ++c) z = dadd(z, exp_d(f2d(fsub(p[c], mx))));
    const double log_z = dadd(log_d(z), f2d(mx));
    for (std::int64_t c = 0; c < classes; ++c) {
      const float t = target_at(c);
      if (t != 0.0f) loss = dsub(loss, dmul(f2d(t), dsub(f2d(p[c]), log_z)));
      if (g) g[c] = fmul(d2f(dsub(exp_d(dsub(f2d(p[c]), log_z)), f2d(t))), grad_scale);
    }
  } else {
    // Keras: q = p / sum(p), clipped to [eps, 1 - eps]; loss = -sum t log q.
    double s = 0;
    for (std::int64_t c = 0; c < classes; ++c) s = dadd(s, f2d(p[c]));
    double tsum_active = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const float t = target_at(c);
      const double q = ddiv(f2d(p[c]), s);
      const bool active = q >= kEpsilonD && q <= kOneMinusEpsilonD;
      const double qc = std_clamp(q, kEpsilonD, kOneMinusEpsilonD);
      if (t != 0.0f) loss = dsub(loss, dmul(f2d(t), log_d(qc)));
      if (active) tsum_active = dadd(tsum_active, f2d(t));
    }
    if (g) {
      for (std::int64_t c = 0; c < classes; ++c) {
        const float t = target_at(c);
        const double q = ddiv(f2d(p[c]), s);
        const bool active = q >= kEpsilonD && q <= kOneMinusEpsilonD;
        const double own = active ? ddiv(f2d(-t), q) : 0.0;
        g[c] = fmul(d2f(ddiv(dadd(own, tsum_active), s)), grad_scale);
      }
    }
  }
  return loss;
}

/// The element-wise losses of row r, Keras' formulas, each the mean over the row's values (the
/// CPU's double sum, then / cols); grad (may be null) = grad_scale * d(row loss)/d(pred).
///   huber          0.5 d^2 where |d| <= delta, else delta |d| - 0.5 delta^2   (d = pred - target)
///   hinge          max(1 - t p, 0)       t: a 0 label is read as -1 (Keras converts 0/1 labels)
///   squared_hinge  max(1 - t p, 0)^2
///   log_cosh       log(cosh(d)) = d + softplus(-2d) - log 2
///   poisson        p - t log(p + eps)
TANDEM_HD inline double elementwise_loss_row(const LossDesc& loss, const float* pred,
                                             const float* target, float* grad, std::int64_t r,
                                             std::int64_t cols, float grad_scale) {
  using Kind = LossDesc::Kind;
  const float gs = fdiv(grad_scale, i2f(cols));
  double s = 0;
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    const float p = pred[c], t = target[c];
    float value = 0, slope = 0;  // the element's loss and d(loss)/d(pred)
    switch (loss.kind) {
      case Kind::huber: {
        const float d = fsub(p, t), a = fabs_(d);
        const bool quadratic = a <= loss.delta;
        value = quadratic ? fmul(0.5f, fmul(d, d))
                          : fsub(fmul(loss.delta, a), fmul(0.5f, fmul(loss.delta, loss.delta)));
        slope = quadratic ? d : (d > 0 ? loss.delta : -loss.delta);
        break;
      }
      case Kind::hinge:
      case Kind::squared_hinge: {
        const float label = t == 0.0f ? -1.0f : t;
        const float margin = std_max(fsub(1.0f, fmul(label, p)), 0.0f);
        const bool squared = loss.kind == Kind::squared_hinge;
        value = squared ? fmul(margin, margin) : margin;
        slope = margin > 0 ? (squared ? fmul(-2.0f, fmul(label, margin)) : -label) : 0.0f;
        break;
      }
      case Kind::log_cosh: {
        const float d = fsub(p, t);
        value = fsub(fadd(d, softplus(fmul(-2.0f, d))), 0.69314718055994531f);
        slope = tanh_f(d);
        break;
      }
      case Kind::poisson: {
        const float q = fadd(p, kEpsilon);
        value = fsub(p, fmul(t, log_f(q)));
        slope = fsub(1.0f, fdiv(t, q));
        break;
      }
      default:
        break;
    }
    s = dadd(s, f2d(value));
    if (grad) grad[c] = fmul(slope, gs);
  }
  return ddiv(s, i2d(cols));
}

/// kl_divergence of row r: sum over the row of t log(t / p), t and p clipped to [eps, 1] (a
/// sum, not a mean, as Keras); d/dp = -t / p where p is inside the clip, else 0.
TANDEM_HD inline double kl_divergence_row(const float* pred, const float* target, float* grad,
                                          std::int64_t r, std::int64_t cols, float grad_scale) {
  double s = 0;
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    const float t = std_clamp(target[c], kEpsilon, 1.0f);
    const float p = std_clamp(pred[c], kEpsilon, 1.0f);
    s = dadd(s, f2d(fmul(t, log_f(fdiv(t, p)))));
    if (grad)
      grad[c] = pred[c] >= kEpsilon && pred[c] <= 1.0f ? fmul(fdiv(-t, p), grad_scale) : 0.0f;
  }
  return s;
}

/// cosine_similarity of row r: -(t / |t|) · (p / |p|), each norm sqrt(max(sum x^2, floor)):
/// floor ε² (Keras 3's normalize), or 1e-12 with `keras2` (tf.math.l2_normalize); d/dp = -(u_t -
/// (u_t · u_p) u_p) / |p| (without the projection where the norm is clamped), the sums in double.
TANDEM_HD inline double cosine_similarity_row(bool keras2, const float* pred, const float* target,
                                              float* grad, std::int64_t r, std::int64_t cols,
                                              float grad_scale) {
  const float* p = pred + r * cols;
  const float* t = target + r * cols;
  double pp = 0, tt = 0, tp = 0;
  for (std::int64_t c = 0; c < cols; ++c) {
    pp = dadd(pp, dmul(f2d(p[c]), f2d(p[c])));
    tt = dadd(tt, dmul(f2d(t[c]), f2d(t[c])));
    tp = dadd(tp, dmul(f2d(t[c]), f2d(p[c])));
  }
  const double kFloor = keras2 ? 1e-12 : dmul(kEpsilonD, kEpsilonD);
  const bool p_clamped = pp < kFloor;
  const double np = dsqrt(p_clamped ? kFloor : pp), nt = dsqrt(tt < kFloor ? kFloor : tt);
  const double cosine = ddiv(tp, dmul(np, nt));
  if (grad)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double ut = ddiv(f2d(t[c]), nt), up = ddiv(f2d(p[c]), np);
      const double d = p_clamped ? ut : dsub(ut, dmul(cosine, up));
      grad[r * cols + c] = fmul(d2f(ddiv(-d, np)), grad_scale);
    }
  return -cosine;
}

/// Whether a sparse label is the class the loss ignores (LossDesc::ignore_class).
TANDEM_HD inline bool ignored_label(const LossDesc& loss, float label) {
  return loss.ignores_class && label == loss.ignore_class;
}

/// Row r of any loss; cols = values per row (classes for cce/scce). grad may be null.
TANDEM_HD inline double loss_row(const LossDesc& loss, const float* pred, const float* target,
                                 float* grad, std::int64_t r, std::int64_t cols, float grad_scale) {
  switch (loss.kind) {
    case LossDesc::Kind::mse:
      return regression_row(true, pred, target, grad, r, cols, grad_scale);
    case LossDesc::Kind::mae:
      return regression_row(false, pred, target, grad, r, cols, grad_scale);
    case LossDesc::Kind::bce:
      return binary_crossentropy_row(loss.from_logits, loss.keras2, loss.label_smoothing, pred,
                                     target, grad, r, cols, grad_scale);
    case LossDesc::Kind::cce:
      return categorical_crossentropy_row(false, loss.from_logits, loss.label_smoothing, pred,
                                          target, grad, r, cols, grad_scale);
    case LossDesc::Kind::scce:
      if (ignored_label(loss, target[r])) {
        for (std::int64_t c = 0; grad && c < cols; ++c) grad[r * cols + c] = 0.0f;
        return 0.0;
      }
      return categorical_crossentropy_row(true, loss.from_logits, 0.0f, pred, target, grad, r, cols,
                                          grad_scale);
    case LossDesc::Kind::huber:
    case LossDesc::Kind::hinge:
    case LossDesc::Kind::squared_hinge:
    case LossDesc::Kind::log_cosh:
    case LossDesc::Kind::poisson:
      return elementwise_loss_row(loss, pred, target, grad, r, cols, grad_scale);
    case LossDesc::Kind::kl_divergence:
      return kl_divergence_row(pred, target, grad, r, cols, grad_scale);
    case LossDesc::Kind::cosine_similarity:
      return cosine_similarity_row(loss.keras2, pred, target, grad, r, cols, grad_scale);
  }
  return 0.0;
}

/// Whether a loss is taken over each position's last axis (LossDesc::positions).
TANDEM_HD inline bool on_last_axis(LossDesc::Kind kind) {
  return kind == LossDesc::Kind::cce || kind == LossDesc::Kind::scce ||
         kind == LossDesc::Kind::kl_divergence || kind == LossDesc::Kind::cosine_similarity;
}

/// Row r of a loss over its positions (cols values in all): for a loss on the last axis, the
/// mean of loss_row over the row's positions (rows r * positions + p of cols / positions values;
/// each gradient grad_scale / positions); else loss_row.
TANDEM_HD inline double positional_loss_row(const LossDesc& loss, const float* pred,
                                            const float* target, float* grad, std::int64_t r,
                                            std::int64_t cols, float grad_scale) {
  const std::int64_t n = on_last_axis(loss.kind) ? loss.positions : 1;
  if (n <= 1) return loss_row(loss, pred, target, grad, r, cols, grad_scale);
  const float share = fdiv(grad_scale, i2f(n));
  double s = 0;
  for (std::int64_t p = 0; p < n; ++p)
    s = dadd(s, loss_row(loss, pred, target, grad, r * n + p, cols / n, share));
  return ddiv(s, i2d(n));
}

/// Row r's weight (Keras' sample_weight): weights[r], or 1 without weights.
TANDEM_HD inline float row_weight(const float* weights, std::int64_t r) {
  return weights ? weights[r] : 1.0f;
}

/// The weights of a loss's or metric's rows: `rows`, one per row (Keras' sample_weight), and
/// `positions`, one per position of each row (rows x the desc's positions: a masked output's,
/// nn/objective.hpp); each null when not given. A position weighs their product.
struct RowWeights {
  const float* rows = nullptr;
  const float* positions = nullptr;
};

/// The positions a per-position weight reads in a row of a loss or metric: every loss and
/// metric is taken position by position under such weights (Keras weighs the per-position
/// values, the last axis reduced, by the output's mask).
TANDEM_HD inline std::int64_t weighed_positions(std::int64_t positions) {
  return positions > 1 ? positions : 1;
}

/// Row r of a loss under per-position weights pw (rows x positions): the mean over the row's
/// positions of pw times the position's loss_row (the cols / positions values of its last axis),
/// each gradient grad_scale * pw / positions.
TANDEM_HD inline double position_weighted_loss_row(const LossDesc& loss, const float* pred,
                                                   const float* target, const float* pw,
                                                   float* grad, std::int64_t r, std::int64_t cols,
                                                   float grad_scale) {
  const std::int64_t n = weighed_positions(loss.positions);
  const float share = fdiv(grad_scale, i2f(n));
  double s = 0;
  for (std::int64_t p = 0; p < n; ++p) {
    const float w = pw[r * n + p];
    s = dadd(s,
             dmul(f2d(w), loss_row(loss, pred, target, grad, r * n + p, cols / n, fmul(share, w))));
  }
  return ddiv(s, i2d(n));
}

/// The row's loss weighted by its weights: the row weight w times the row's loss (under the
/// position weights when given), the gradient likewise (grad_scale * w). Without weights,
/// positional_loss_row's values bit for bit.
TANDEM_HD inline double weighted_loss_row(const LossDesc& loss, const float* pred,
                                          const float* target, RowWeights weights, float* grad,
                                          std::int64_t r, std::int64_t cols, float grad_scale) {
  const float w = row_weight(weights.rows, r);
  const float scale = fmul(grad_scale, w);
  return dmul(f2d(w), weights.positions
                          ? position_weighted_loss_row(loss, pred, target, weights.positions, grad,
                                                       r, cols, scale)
                          : positional_loss_row(loss, pred, target, grad, r, cols, scale));
}

// ---------------------------------------------------------------------------------------------
// Metrics (nn/metrics.cpp). Metric::evaluate returns {sum of metric_row over the rows (added in
// row order, in double), count = rows}.

/// The first index of the largest value (metrics.cpp's argmax; NaNs never win).
TANDEM_HD inline std::int64_t argmax(const float* p, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (p[i] > p[best]) best = i;
  return best;
}

/// static_cast<std::int64_t>(label) as the CPU compares it; -1 (matches no class) for NaN and
/// values beyond int64, where the CPU's conversion gives INT64_MIN.
TANDEM_HD inline std::int64_t truncated_label(float value) {
  if (!(value > -9.2e18f && value < 9.2e18f)) return -1;
  return static_cast<std::int64_t>(value);
}

/// Row r's contribution to the metric's sum (its count contribution is 1).
/// Whether class `label` is among the k largest of p[0, n): fewer than k classes score strictly
/// higher (so classes tied at the boundary all count as in, as tf.math.in_top_k has it). A label
/// that is no class is never in.
TANDEM_HD inline bool in_top_k(const float* p, std::int64_t n, std::int64_t label, int k) {
  if (label < 0 || label >= n) return false;
  std::int64_t higher = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (p[i] > p[label]) ++higher;
  return higher < k;
}

/// A row's count of true, predicted or actual positives (Keras' Precision and Recall).
TANDEM_HD inline double positives_row(const MetricDesc& metric, const float* p, const float* t,
                                      std::int64_t cols) {
  double n = 0;
  for (std::int64_t c = 0; c < cols; ++c) {
    const bool predicted = p[c] > metric.threshold, actual = t[c] != 0.0f;
    const bool counted = metric.kind == MetricDesc::Kind::true_positives ? predicted && actual
                         : metric.kind == MetricDesc::Kind::predicted_positives ? predicted
                                                                                : actual;
    if (counted) n = dadd(n, 1.0);
  }
  return n;
}

TANDEM_HD inline double metric_row(const MetricDesc& metric, const float* pred, const float* target,
                                   std::int64_t r, std::int64_t cols) {
  const float* p = pred;
  const float* t = target;
  switch (metric.kind) {
    case MetricDesc::Kind::sparse_categorical_accuracy:
      return argmax(p + r * cols, cols) == truncated_label(t[r]) ? 1.0 : 0.0;
    case MetricDesc::Kind::categorical_accuracy:
      return argmax(p + r * cols, cols) == argmax(t + r * cols, cols) ? 1.0 : 0.0;
    case MetricDesc::Kind::top_k_categorical_accuracy:
      return in_top_k(p + r * cols, cols, argmax(t + r * cols, cols), metric.k) ? 1.0 : 0.0;
    case MetricDesc::Kind::sparse_top_k_categorical_accuracy:
      return in_top_k(p + r * cols, cols, truncated_label(t[r]), metric.k) ? 1.0 : 0.0;
    case MetricDesc::Kind::true_positives:
    case MetricDesc::Kind::predicted_positives:
    case MetricDesc::Kind::actual_positives:
      return positives_row(metric, p + r * cols, t + r * cols, cols);
    case MetricDesc::Kind::samples:
      return 1.0;
    case MetricDesc::Kind::auc_buckets:
    case MetricDesc::Kind::confusion_matrix:
      return 0.0;  // histograms: histogram_row
    case MetricDesc::Kind::binary_accuracy:
    case MetricDesc::Kind::mean_squared_error:
    case MetricDesc::Kind::mean_absolute_error:
      break;
  }
  double s = 0;
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    if (metric.kind == MetricDesc::Kind::binary_accuracy)
      s = dadd(s, ((p[c] > metric.threshold ? 1.0f : 0.0f) == t[c]) ? 1.0 : 0.0);
    else if (metric.kind == MetricDesc::Kind::mean_squared_error)
      s = dadd(s, f2d(fmul(fsub(p[c], t[c]), fsub(p[c], t[c]))));
    else
      s = dadd(s, f2d(fabs_(fsub(p[c], t[c]))));
  }
  return ddiv(s, i2d(cols));
}

/// Whether a metric is taken over each position's last axis (MetricDesc::positions).
TANDEM_HD inline bool on_last_axis(MetricDesc::Kind kind) {
  return kind == MetricDesc::Kind::categorical_accuracy ||
         kind == MetricDesc::Kind::sparse_categorical_accuracy ||
         kind == MetricDesc::Kind::top_k_categorical_accuracy ||
         kind == MetricDesc::Kind::sparse_top_k_categorical_accuracy;
}

/// Row r of a metric over its positions: for a metric on the last axis, the mean of metric_row
/// over the row's positions (as positional_loss_row); else metric_row.
TANDEM_HD inline double positional_metric_row(const MetricDesc& metric, const float* pred,
                                              const float* target, std::int64_t r,
                                              std::int64_t cols) {
  const std::int64_t n = on_last_axis(metric.kind) ? metric.positions : 1;
  if (n <= 1) return metric_row(metric, pred, target, r, cols);
  double s = 0;
  for (std::int64_t p = 0; p < n; ++p)
    s = dadd(s, metric_row(metric, pred, target, r * n + p, cols / n));
  return ddiv(s, i2d(n));
}

/// Row r of a metric under per-position weights pw (rows x positions): the mean over the row's
/// positions of pw times the position's metric_row (as position_weighted_loss_row; `samples`
/// gives the mean of the weights, so a weighted mean's 1 / positions cancels).
TANDEM_HD inline double position_weighted_metric_row(const MetricDesc& metric, const float* pred,
                                                     const float* target, const float* pw,
                                                     std::int64_t r, std::int64_t cols) {
  const std::int64_t n = weighed_positions(metric.positions);
  double s = 0;
  for (std::int64_t p = 0; p < n; ++p)
    s = dadd(s, dmul(f2d(pw[r * n + p]), metric_row(metric, pred, target, r * n + p, cols / n)));
  return ddiv(s, i2d(n));
}

/// positional_metric_row (or, under position weights, position_weighted_metric_row) times the
/// row's weight (Keras' weighted_metrics); without weights, its value.
TANDEM_HD inline double weighted_metric_row(const MetricDesc& metric, const float* pred,
                                            const float* target, RowWeights weights, std::int64_t r,
                                            std::int64_t cols) {
  return dmul(f2d(row_weight(weights.rows, r)),
              weights.positions
                  ? position_weighted_metric_row(metric, pred, target, weights.positions, r, cols)
                  : positional_metric_row(metric, pred, target, r, cols));
}

// Histogram metrics (metric_histogram): each row adds values to bins; summed in row order, then
// element order, every bin in double.

/// The number of bins of a histogram metric: AUC's positive and negative weight per threshold
/// bucket, or MeanIoU's classes x classes confusion matrix.
TANDEM_HD inline std::int64_t histogram_bins(const MetricDesc& metric) {
  const std::int64_t n = metric.bins;
  return metric.kind == MetricDesc::Kind::auc_buckets ? 2 * n : n * n;
}

/// Keras' AUC bucket of a prediction among `thresholds` evenly spread ones (-eps, 1/(T-1), ...,
/// 1 + eps): the bucket b whose thresholds 0..b the prediction exceeds, the prediction clipped to
/// [0, 1] (keras.src.metrics.metrics_utils, the thresholds_distributed_evenly path).
TANDEM_HD inline std::int64_t auc_bucket(float p, int thresholds) {
  const float clipped = std_clamp(p, 0.0f, 1.0f);
  const float b = fsub(ceil_f(fmul(clipped, i2f(thresholds - 1))), 1.0f);
  return b > 0.0f ? static_cast<std::int64_t>(b) : 0;  // NaN: bucket 0
}

/// A class as the confusion matrix reads it: the index `v` truncated, -1 when it is no class.
TANDEM_HD inline std::int64_t class_cell(float v, int classes) {
  const std::int64_t c = truncated_label(v);
  return c >= 0 && c < classes ? c : -1;
}

/// Row r's cell of the confusion matrix (true class x classes + predicted class), or -1 when
/// the row counts nowhere (its true class is ignore_class, or a class is out of range).
TANDEM_HD inline std::int64_t confusion_cell(const MetricDesc& metric, const float* pred,
                                             const float* target, std::int64_t r,
                                             std::int64_t cols) {
  const std::int64_t t =
      metric.sparse_true ? class_cell(target[r], metric.bins) : argmax(target + r * cols, cols);
  const std::int64_t p =
      metric.sparse_pred ? class_cell(pred[r * cols], metric.bins) : argmax(pred + r * cols, cols);
  if (t < 0 || p < 0 || t >= metric.bins || p >= metric.bins || t == metric.ignore_class) return -1;
  return t * metric.bins + p;
}

/// Row r's contributions to a histogram metric: add(bin, value) in the order they are summed.
/// AUC: each element's label weight (1 when t is non-zero, else 0; and 1 minus that after the
/// first `bins` bins) in its bucket;
/// MeanIoU: the row's weight in the cell of each of its positions. Under position weights each
/// position's values weigh the row's weight times its own.
template <class Add>
TANDEM_HD inline void histogram_row(const MetricDesc& metric, const float* pred,
                                    const float* target, RowWeights weights, std::int64_t r,
                                    std::int64_t cols, Add add) {
  const double w = f2d(row_weight(weights.rows, r));
  const std::int64_t n = weighed_positions(metric.positions);
  const auto at = [&](std::int64_t p) {
    return weights.positions ? dmul(w, f2d(weights.positions[r * n + p])) : w;
  };
  if (metric.kind == MetricDesc::Kind::confusion_matrix) {
    for (std::int64_t p = 0; p < n; ++p) {
      const std::int64_t cell = confusion_cell(metric, pred, target, r * n + p, cols / n);
      if (cell >= 0) add(cell, at(p));
    }
    return;
  }
  for (std::int64_t c = r * cols; c < (r + 1) * cols; ++c) {
    const float p = metric.from_logits ? sigmoid(pred[c]) : pred[c];
    const std::int64_t b = auc_bucket(p, metric.bins);
    const double t = target[c] != 0.0f ? 1.0 : 0.0;  // Keras casts the label to bool
    const double wc = weights.positions ? at((c - r * cols) / (cols / n)) : w;
    add(b, dmul(wc, t));
    add(metric.bins + b, dmul(wc, dsub(1.0, t)));
  }
}

// ---------------------------------------------------------------------------------------------
// Axis groups (backend/axis_groups.hpp): which group a value belongs to, and a group's values.

/// The group of value e (row-major over dims).
TANDEM_HD inline std::int64_t group_of(const AxisGroups& d, std::int64_t e) {
  std::int64_t a = 0, stride = 1;
  for (int axis = d.rank - 1; axis >= 0; --axis) {
    const std::int64_t coord = e % d.dims[axis];
    e /= d.dims[axis];
    if (!d.grouped[axis]) {
      a += coord * stride;
      stride *= d.dims[axis];
    }
  }
  return a;
}

/// The m-th (0 <= m < per_group) value of group g (row-major over dims).
TANDEM_HD inline std::int64_t member_of(const AxisGroups& d, std::int64_t a, std::int64_t m) {
  std::int64_t e = 0, stride = 1;
  for (int axis = d.rank - 1; axis >= 0; --axis) {
    std::int64_t& from = d.grouped[axis] ? m : a;
    const std::int64_t coord = from % d.dims[axis];
    from /= d.dims[axis];
    e += coord * stride;
    stride *= d.dims[axis];
  }
  return e;
}

// UnitNormalization (nn/unit_normalization.cpp) and Dot's normalize (nn/dot.cpp): each group of
// a sample (its grouped axes: Keras' `axis`) times rsqrt(max(Σ x², floor)) (UnitNormDesc); the
// sum in double, the members in order.

/// Σ x² over group g of the sample `x`, in double.
TANDEM_HD inline double unit_norm_square_sum(const AxisGroups& d, const float* x, std::int64_t g) {
  double sum = 0;
  for (std::int64_t m = 0; m < d.per_group; ++m) {
    const float v = x[member_of(d, g, m)];
    sum = dadd(sum, f2d(fmul(v, v)));
  }
  return sum;
}

/// rsqrt(max(Σ x², floor)) of a group's square sum: its values' factor.
TANDEM_HD inline float unit_norm_factor(double square_sum, double floor) {
  return d2f(ddiv(1.0, dsqrt(square_sum > floor ? square_sum : floor)));
}

/// Group g of the sample `x` normalized into `y`.
TANDEM_HD inline void unit_normalize_group(const UnitNormDesc& d, const float* x, float* y,
                                           std::int64_t g) {
  const float f = unit_norm_factor(unit_norm_square_sum(d, x, g), d.square_floor);
  for (std::int64_t m = 0; m < d.per_group; ++m) {
    const std::int64_t i = member_of(d, g, m);
    y[i] = fmul(x[i], f);
  }
}

/// Its gradient for group g: dx = (dy − y·(y·dy))·f with y = x·f where Σ x² > floor, else dy·f
/// (the floor does not depend on x); y·dy in double.
TANDEM_HD inline void unit_normalize_group_backward(const UnitNormDesc& d, const float* x,
                                                    const float* dy, float* dx, std::int64_t g) {
  const double square_sum = unit_norm_square_sum(d, x, g);
  const float f = unit_norm_factor(square_sum, d.square_floor);
  double along = 0;
  if (square_sum > d.square_floor)
    for (std::int64_t m = 0; m < d.per_group; ++m) {
      const std::int64_t i = member_of(d, g, m);
      along = dadd(along, f2d(fmul(fmul(x[i], f), dy[i])));
    }
  const float projected = d2f(along);
  for (std::int64_t m = 0; m < d.per_group; ++m) {
    const std::int64_t i = member_of(d, g, m);
    dx[i] = fmul(fsub(dy[i], fmul(fmul(x[i], f), projected)), f);
  }
}

// PReLU (nn/prelu.cpp): y = x where x > 0, else alpha·x, with one alpha per group (the shared
// axes grouped).

/// Keras' relu(x) - alpha·relu(-x), and its gradients (both 0 at x = 0, as TensorFlow's relu).
TANDEM_HD inline float prelu_value(float x, float alpha) {
  return x > 0.0f ? x : (x < 0.0f ? fmul(alpha, x) : 0.0f);
}
TANDEM_HD inline float prelu_input_slope(float x, float alpha) {
  return x > 0.0f ? 1.0f : (x < 0.0f ? alpha : 0.0f);
}
/// Alpha a's gradient over `rows` samples: the sum of dy·min(x, 0) over the values it serves,
/// in double, rows first, then the values in order (the same order on every device).
TANDEM_HD inline double prelu_alpha_gradient(const PreluDesc& d, const float* x, const float* dy,
                                             std::int64_t rows, std::int64_t a) {
  double s = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t m = 0; m < d.per_group; ++m) {
      const std::int64_t i = r * d.size + member_of(d, a, m);
      if (x[i] < 0.0f) s = dadd(s, f2d(fmul(dy[i], x[i])));
    }
  return s;
}

// Weight penalties (nn/regularizer.cpp): Keras' l1·|w| + l2·w², and its gradient
// l1·sign(w) + 2·l2·w (sign(0) = 0, as TensorFlow's).

TANDEM_HD inline float penalty_value(float w, float l1, float l2) {
  return fadd(fmul(l1, fabs_(w)), fmul(l2, fmul(w, w)));
}
TANDEM_HD inline float penalty_derivative(float w, float l1, float l2) {
  const float sign = w > 0.0f ? 1.0f : (w < 0.0f ? -1.0f : 0.0f);
  return fadd(fmul(l1, sign), fmul(fmul(2.0f, l2), w));
}

// Weight constraints (nn/constraint.cpp), as Keras computes them with its epsilon 1e-7: a group's
// norm (over the grouped axes) in double, the scale that takes it to the wanted norm.

/// The factor group g's values are multiplied by (not used for non_neg).
TANDEM_HD inline float constraint_scale(const ConstraintDesc& c, const float* w, std::int64_t g) {
  double sum = 0;
  for (std::int64_t m = 0; m < c.axes.per_group; ++m) {
    const float v = w[member_of(c.axes, g, m)];
    sum = dadd(sum, f2d(fmul(v, v)));
  }
  const float norm = d2f(dsqrt(sum));
  float wanted = norm;
  if (c.kind == ConstraintDesc::Kind::unit_norm) {
    wanted = 1.0f;
  } else if (c.kind != ConstraintDesc::Kind::non_neg) {
    const float lo = c.kind == ConstraintDesc::Kind::max_norm ? 0.0f : c.min_value;
    const float clipped = norm < lo ? lo : (norm > c.max_value ? c.max_value : norm);
    wanted = fadd(fmul(c.rate, clipped), fmul(fsub(1.0f, c.rate), norm));
  }
  return fdiv(wanted, fadd(kEpsilon, norm));
}

/// Value e constrained, given its group's factor.
TANDEM_HD inline float constrained_value(const ConstraintDesc& c, float w, float scale) {
  if (c.kind == ConstraintDesc::Kind::non_neg) return w >= 0.0f ? w : 0.0f;
  return fmul(w, scale);
}

// ---------------------------------------------------------------------------------------------
// Optimizers (optim/optimizer.cpp: clipping and weight decay; optim/optimizers.cpp: updates).

/// The number of slots the update rule itself keeps per parameter (update_element's s0..s2).
TANDEM_HD inline int update_slot_count(const OptimizerDesc& o) {
  switch (o.kind) {
    case OptimizerDesc::Kind::sgd:
      return o.momentum > 0 ? 1 : 0;
    case OptimizerDesc::Kind::adam:
      return o.amsgrad ? 3 : 2;
    case OptimizerDesc::Kind::rmsprop:
      return 1 + (o.momentum > 0 ? 1 : 0) + (o.centered ? 1 : 0);
    case OptimizerDesc::Kind::adagrad:
    case OptimizerDesc::Kind::lion:
      return 1;
    case OptimizerDesc::Kind::adadelta:
    case OptimizerDesc::Kind::adamax:
    case OptimizerDesc::Kind::nadam:
      return 2;
  }
  return 0;
}

/// Where the gradient accumulator is among a parameter's slots (with gradient_accumulation_steps
/// over 1): after the rule's and the moving average.
TANDEM_HD inline int accumulator_slot(const OptimizerDesc& o) {
  return update_slot_count(o) + (o.use_ema ? 1 : 0);
}

/// The number of state slots per parameter (the host Optimizer's slot_names().size()): the
/// rule's, then the moving average's (index update_slot_count(o)) with use_ema, then the
/// gradient accumulator's (accumulator_slot(o)) with gradient_accumulation_steps over 1.
TANDEM_HD inline int optimizer_slot_count(const OptimizerDesc& o) {
  return accumulator_slot(o) + (o.gradient_accumulation_steps > 1 ? 1 : 0);
}

/// What one element's update needs at one step, rounded to float as the CPU rounds it. Built on
/// the host by optimizer_step(); passed to kernels by value.
struct OptimizerStep {
  OptimizerDesc::Kind kind = OptimizerDesc::Kind::sgd;
  float lr = 0;     // float(learning rate): sgd, rmsprop
  float alpha = 0;  // adam: the bias-corrected rate; adamax: lr / (1 - beta_1^t)
  // nadam: the momentum schedule's factors (Keras 3's u_t, u_{t+1}, and 1 - their running
  // products), and 1 - beta_2^t
  float nadam_u = 0, nadam_u_next = 0, nadam_one_minus_product = 0,
        nadam_one_minus_product_next = 0, nadam_one_minus_beta_2_power = 0;
  float beta_1 = 0, beta_2 = 0, epsilon = 0, momentum = 0, rho = 0;
  bool use_momentum = false;  // sgd, rmsprop: momentum > 0
  bool nesterov = false, amsgrad = false, centered = false;
  bool decay = false;      // weight_decay > 0
  float weight_decay = 0;  // w -= (w float(weight_decay)) float(lr), in float as Keras does
  bool clip_value = false;
  float clipvalue = 0;
  // use_ema (average_element): this step's momentum and 1 - momentum as Keras rounds them;
  // ema_from_weights: the averages start at the weights before this step (tf.keras 2's first
  // step: the caller copies them in before the update); ema_overwrite: the weights take the
  // averages after this step.
  bool use_ema = false, ema_from_weights = false, ema_overwrite = false;
  float ema_momentum = 0, ema_complement = 0;
  // gradient_accumulation_steps: this call only adds its gradient to the accumulator
  // (accumulate_element: no update, the average still moves as Keras moves it), or it updates
  // with the combined gradient (combined_gradient) and empties the accumulator.
  bool accumulate_only = false, combine = false;
  float accumulation_steps = 1;
};

/// Nadam's momentum at step i (from 1): beta_1 (1 − ½·0.96^(e·i)), e the schedule decay (1 in
/// Keras 3, the config's `decay` in Keras 2's legacy Nadam).
inline double nadam_momentum(const OptimizerDesc& o, std::int64_t i) {
  return o.beta_1 * (1.0 - 0.5 * std::pow(0.96, o.nadam_schedule_decay * static_cast<double>(i)));
}

/// Their product u_1 ··· u_step, multiplied in that order in double (Keras keeps it in a
/// variable; here it is a function of the step). Remembered per thread: a later step extends the
/// last product asked for (the same multiplications, so the same bits), so a run pays one
/// multiplication a step, not `step` of them; an earlier step or other settings start again.
inline double nadam_momentum_product(const OptimizerDesc& o, std::int64_t step) {
  struct Memo {
    double beta_1 = 0, schedule_decay = 0, product = 1;
    std::int64_t step = 0;
  };
  thread_local Memo memo;
  if (memo.beta_1 != o.beta_1 || memo.schedule_decay != o.nadam_schedule_decay || memo.step > step)
    memo = {o.beta_1, o.nadam_schedule_decay, 1.0, 0};
  for (std::int64_t i = memo.step + 1; i <= step; ++i) memo.product *= nadam_momentum(o, i);
  memo.step = step;
  return memo.product;
}

/// The step's constants, computed exactly as the CPU computes them (host only: pow, sqrt of
/// doubles). `call` counts the optimizer's calls from 1 (Keras' iterations after this one);
/// `lr` is the current learning rate. With gradient_accumulation_steps N the update is number
/// ceil(call / N) (Keras' iterations + 1), made at calls that are multiples of N.
inline OptimizerStep optimizer_step(const OptimizerDesc& o, std::int64_t call, double lr) {
  OptimizerStep s;
  const std::int64_t every = o.gradient_accumulation_steps > 1 ? o.gradient_accumulation_steps : 1;
  const std::int64_t step = (call + every - 1) / every;
  s.combine = every > 1 && call % every == 0;
  s.accumulate_only = every > 1 && !s.combine;
  s.accumulation_steps = static_cast<float>(every);
  s.kind = o.kind;
  s.lr = static_cast<float>(lr);
  s.momentum = static_cast<float>(o.momentum);
  s.use_momentum = o.momentum > 0;
  s.nesterov = o.nesterov;
  s.amsgrad = o.amsgrad;
  s.centered = o.centered;
  s.beta_1 = static_cast<float>(o.beta_1);
  s.beta_2 = static_cast<float>(o.beta_2);
  s.epsilon = static_cast<float>(o.epsilon);
  s.rho = static_cast<float>(o.rho);
  const double t = static_cast<double>(step);
  if (o.kind == OptimizerDesc::Kind::adam)
    s.alpha = static_cast<float>(lr * std::sqrt(1.0 - std::pow(o.beta_2, t)) /
                                 (1.0 - std::pow(o.beta_1, t)));
  if (o.kind == OptimizerDesc::Kind::adamax)
    s.alpha = static_cast<float>(lr / (1.0 - std::pow(o.beta_1, t)));
  if (o.kind == OptimizerDesc::Kind::nadam) {
    const double product = nadam_momentum_product(o, step), next = nadam_momentum(o, step + 1);
    s.nadam_u = static_cast<float>(nadam_momentum(o, step));
    s.nadam_u_next = static_cast<float>(next);
    s.nadam_one_minus_product = static_cast<float>(1.0 - product);
    s.nadam_one_minus_product_next = static_cast<float>(1.0 - product * next);
    s.nadam_one_minus_beta_2_power = static_cast<float>(1.0 - std::pow(o.beta_2, t));
  }
  s.decay = o.weight_decay > 0;
  s.weight_decay = static_cast<float>(o.weight_decay);
  s.clip_value = o.clipvalue > 0;
  s.clipvalue = static_cast<float>(o.clipvalue);
  if (o.use_ema) {
    s.use_ema = true;
    if (o.ema_keras2) {  // tf.keras 2: Python's 1 - m, in double, then float
      s.ema_from_weights = call == 1;
      s.ema_momentum = static_cast<float>(o.ema_momentum);
      s.ema_complement = static_cast<float>(1.0 - o.ema_momentum);
    } else {  // Keras 3: m = float(step > 1) * m, and 1 - m in float
      s.ema_momentum = step == 1 ? 0.0f : static_cast<float>(o.ema_momentum);
      s.ema_complement = 1.0f - s.ema_momentum;
    }
    s.ema_overwrite = o.ema_overwrite_frequency > 0 && step % o.ema_overwrite_frequency == 0;
  }
  return s;
}

/// The global_clipnorm factor from the sum over every parameter tensor of its squared norm
/// (summed in parameter order, in double): global_clipnorm / norm when the norm exceeds it.
TANDEM_HD inline double global_clip_scale(double total_squared_norm, double global_clipnorm) {
  if (global_clipnorm > 0) {
    const double norm = dsqrt(total_squared_norm);
    if (norm > global_clipnorm) return ddiv(global_clipnorm, norm);
  }
  return 1.0;
}

/// One parameter tensor's gradient factor: the global factor, times clipnorm / norm when its own
/// (unscaled) gradient norm exceeds clipnorm.
TANDEM_HD inline double tensor_clip_scale(double global_scale, double squared_norm,
                                          double clipnorm) {
  double scale = global_scale;
  if (clipnorm > 0) {
    const double norm = dsqrt(squared_norm);
    if (norm > clipnorm) scale = dmul(scale, ddiv(clipnorm, norm));
  }
  return scale;
}

/// The gradient the update sees: g float(scale), then clipped to [-clipvalue, clipvalue]; g
/// itself when scale is 1 and there is no clipvalue (the CPU skips the copy then).
TANDEM_HD inline float clipped_gradient(const OptimizerStep& s, float g, double scale) {
  if (!(scale != 1.0 || s.clip_value)) return g;
  float v = fmul(g, d2f(scale));
  if (s.clip_value) v = std_clamp(v, -s.clipvalue, s.clipvalue);
  return v;
}

/// gradient_accumulation_steps: a call that does not update adds its gradient (Keras' g + acc).
TANDEM_HD inline void accumulate_element(float g, float* accumulated) {
  *accumulated = fadd(g, *accumulated);
}

/// The gradient an updating call applies: (g + accumulated) / N, in float as Keras divides.
TANDEM_HD inline float combined_gradient(const OptimizerStep& s, float g, float accumulated) {
  return fdiv(fadd(g, accumulated), s.accumulation_steps);
}

/// Keras' moving average of one weight after its update (use_ema): average = m average +
/// (1 - m) w; then, on an overwrite step, w = average.
TANDEM_HD inline void average_element(const OptimizerStep& s, float* w, float* average) {
  *average = fadd(fmul(s.ema_momentum, *average), fmul(s.ema_complement, *w));
  if (s.ema_overwrite) *w = *average;
}

/// One element's update, weight decay included: w, and the element's slots in slot_names()
/// order (s0, s1, s2; null where the optimizer has fewer). g is the clipped gradient.
///   sgd: [momentum]   adam: m, v, [vhat]   rmsprop: velocity, [momentum], [average_gradient]
///   adagrad: accumulator   adadelta: accumulated_grad, accumulated_delta_var   adamax: m, u
///   nadam: m, v   lion: m
/// Keras 3's rules, operation by operation.
TANDEM_HD inline void update_element(const OptimizerStep& s, float* w, float g, float* s0,
                                     float* s1, float* s2) {
  float wk = *w;
  // Keras' _apply_weight_decay: variable - variable * wd * lr, each product rounded to float
  // (1 - lr wd rounded to float instead moved every decay by up to 3e-8: 18% of lr wd = 1e-7).
  if (s.decay) wk = fsub(wk, fmul(fmul(wk, s.weight_decay), s.lr));
  switch (s.kind) {
    case OptimizerDesc::Kind::sgd: {
      if (!s.use_momentum) {
        wk = fsub(wk, fmul(s.lr, g));
        break;
      }
      const float m = fsub(fmul(s.momentum, *s0), fmul(s.lr, g));
      *s0 = m;
      wk = fadd(wk, s.nesterov ? fsub(fmul(s.momentum, m), fmul(s.lr, g)) : m);
      break;
    }
    case OptimizerDesc::Kind::adam: {
      const float m = fadd(*s0, fmul(fsub(g, *s0), fsub(1.0f, s.beta_1)));
      const float v = fadd(*s1, fmul(fsub(fmul(g, g), *s1), fsub(1.0f, s.beta_2)));
      *s0 = m;
      *s1 = v;
      float denom_v = v;
      if (s.amsgrad) {
        const float vhat = std_max(*s2, v);
        *s2 = vhat;
        denom_v = vhat;
      }
      wk = fsub(wk, fdiv(fmul(m, s.alpha), fadd(fsqrt(denom_v), s.epsilon)));
      break;
    }
    case OptimizerDesc::Kind::rmsprop: {
      float* mom = s.use_momentum ? s1 : nullptr;
      float* avg = s.centered ? (s.use_momentum ? s2 : s1) : nullptr;
      const float vel = fadd(fmul(s.rho, *s0), fmul(fmul(fsub(1.0f, s.rho), g), g));
      *s0 = vel;
      float denom = fadd(vel, s.epsilon);
      if (avg) {
        const float a = fadd(fmul(s.rho, *avg), fmul(fsub(1.0f, s.rho), g));
        *avg = a;
        denom = fadd(fsub(vel, fmul(a, a)), s.epsilon);
      }
      const float inc = fdiv(fmul(s.lr, g), fsqrt(denom));
      if (mom) {
        const float m = fadd(fmul(s.momentum, *mom), inc);
        *mom = m;
        wk = fsub(wk, m);
      } else {
        wk = fsub(wk, inc);
      }
      break;
    }
    case OptimizerDesc::Kind::adagrad: {  // acc += g^2; w -= lr g / sqrt(acc + eps)
      const float acc = fadd(*s0, fmul(g, g));
      *s0 = acc;
      wk = fsub(wk, fdiv(fmul(s.lr, g), fsqrt(fadd(acc, s.epsilon))));
      break;
    }
    case OptimizerDesc::Kind::adadelta: {
      // E[g^2] = rho E[g^2] + (1 - rho) g^2; d = -sqrt(E[d^2] + eps) g / sqrt(E[g^2] + eps);
      // E[d^2] = rho E[d^2] + (1 - rho) d^2; w += lr d
      const float one_minus_rho = fsub(1.0f, s.rho);
      const float acc_g = fadd(fmul(s.rho, *s0), fmul(one_minus_rho, fmul(g, g)));
      *s0 = acc_g;
      const float delta =
          fdiv(fmul(-fsqrt(fadd(*s1, s.epsilon)), g), fsqrt(fadd(acc_g, s.epsilon)));
      *s1 = fadd(fmul(s.rho, *s1), fmul(one_minus_rho, fmul(delta, delta)));
      wk = fadd(wk, fmul(s.lr, delta));
      break;
    }
    case OptimizerDesc::Kind::adamax: {
      // m += (g - m)(1 - b1); u = max(b2 u, |g|); w -= lr m / ((1 - b1^t)(u + eps))
      const float m = fadd(*s0, fmul(fsub(g, *s0), fsub(1.0f, s.beta_1)));
      const float u = std_max(fmul(s.beta_2, *s1), fabs_(g));
      *s0 = m;
      *s1 = u;
      wk = fsub(wk, fdiv(fmul(s.alpha, m), fadd(u, s.epsilon)));
      break;
    }
    case OptimizerDesc::Kind::nadam: {
      const float m = fadd(*s0, fmul(fsub(g, *s0), fsub(1.0f, s.beta_1)));
      const float v = fadd(*s1, fmul(fsub(fmul(g, g), *s1), fsub(1.0f, s.beta_2)));
      *s0 = m;
      *s1 = v;
      const float m_hat = fadd(fdiv(fmul(s.nadam_u_next, m), s.nadam_one_minus_product_next),
                               fdiv(fmul(fsub(1.0f, s.nadam_u), g), s.nadam_one_minus_product));
      const float v_hat = fdiv(v, s.nadam_one_minus_beta_2_power);
      wk = fsub(wk, fdiv(fmul(m_hat, s.lr), fadd(fsqrt(v_hat), s.epsilon)));
      break;
    }
    case OptimizerDesc::Kind::lion: {
      // w -= lr sign(b1 m + (1 - b1) g); m = b2 m + (1 - b2) g
      const float c = fadd(fmul(*s0, s.beta_1), fmul(g, fsub(1.0f, s.beta_1)));
      const float sign = c > 0 ? 1.0f : (c < 0 ? -1.0f : 0.0f);
      wk = fsub(wk, fmul(s.lr, sign));
      *s0 = fadd(fmul(*s0, s.beta_2), fmul(g, fsub(1.0f, s.beta_2)));
      break;
    }
  }
  *w = wk;
}

// ---------------------------------------------------------------------------------------------
// Embedding

/// The table row an index-valued float names, or -1 when it is not an integer in [0, vocab)
/// (NaN fails every comparison).
TANDEM_HD inline std::int64_t embedding_index(float value, std::int64_t vocab) {
  if (!(value >= 0.0f && value < i2f(vocab) && value == floor_f(value))) return -1;
  return static_cast<std::int64_t>(value);
}

/// IntegerLookup's table (nn/integer_lookup.hpp): what a key found in no row of the table
/// gives — with `buckets` > 0, bucket_start + the key modulo buckets (Keras' floormod of an
/// integer key over its OOV indices), else `missing` — and whether the lookup op reports the
/// first such key (num_oov_indices 0: Keras raises).
struct LookupDesc {
  float missing = 0;
  std::int64_t buckets = 0;
  float bucket_start = 0;
  bool refuse_missing = false;
};

/// The key an input value looks up: the value truncated toward zero, as Keras casts a float
/// input to int64; NaN and infinities are no key (found nowhere, bucket 0).
TANDEM_HD inline float lookup_key(float x) {
  return x >= 0.0f ? floor_f(x) : -floor_f(-x);
}

/// The position of `key` among n ascending, distinct keys, or -1. Binary search.
TANDEM_HD inline std::int64_t lookup_position(float key, const float* keys, std::int64_t n) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && keys[lo] == key ? lo : -1;
}

/// What x looks up in a table of n ascending keys and their values (see LookupDesc); `found`
/// says whether its key is a row of the table.
TANDEM_HD inline float looked_up(float x, const float* keys, const float* values, std::int64_t n,
                                 const LookupDesc& d, bool* found) {
  const float key = lookup_key(x);
  const std::int64_t at = lookup_position(key, keys, n);
  *found = at >= 0;
  if (at >= 0) return values[at];
  if (d.buckets <= 0) return d.missing;
  const double b = static_cast<double>(d.buckets), k = static_cast<double>(key);
  const double bucket = k == k && k - k == 0.0 ? k - b * floor_d(k / b) : 0.0;  // finite keys
  return d.bucket_start + static_cast<float>(bucket);
}

/// Discretization's bin of x among n ascending boundaries: how many are at most x (NumPy's
/// digitize; 0 below the first, n from the last on; NaN compares false: bin 0). Binary search.
TANDEM_HD inline std::int64_t bin_of(float x, const float* boundaries, std::int64_t n) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (boundaries[mid] <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// Dropout (nn/dropout.cpp): mask = scale or 0 from a counter-based hash of (stream, call, global
// sample index, column).

/// splitmix64's finaliser.
TANDEM_HD inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/// The key of one training forward: `call` = the layer's calls so far (random_state()[1] before
/// the forward), `stream` = its stream (random_state()[0]).
TANDEM_HD inline std::uint64_t dropout_step_key(std::uint64_t stream, std::uint64_t call) {
  return mix(stream ^ mix(call + 1));
}
/// The key of the sample at index `sample` of the global batch (sample_offset() + row).
TANDEM_HD inline std::uint64_t dropout_row_key(std::uint64_t step_key, std::int64_t sample) {
  return mix(step_key ^ static_cast<std::uint64_t>(sample));
}
/// Keep when the top 24 bits of the hash, as a fraction, are below 1 - rate.
TANDEM_HD inline std::uint64_t dropout_keep_below(double rate) {
  return static_cast<std::uint64_t>(dmul(dsub(1.0, rate), 16777216.0));
}
TANDEM_HD inline float dropout_scale(double rate) {
  return d2f(ddiv(1.0, dsub(1.0, rate)));
}
TANDEM_HD inline float dropout_mask(std::uint64_t row_key, std::int64_t col,
                                    std::uint64_t keep_below, float scale) {
  const std::uint64_t h = mix(row_key + static_cast<std::uint64_t>(col));
  return (h >> 40) < keep_below ? scale : 0.0f;
}
/// The column of a sample whose mask value element c takes: c itself, or with Keras' noise_shape
/// (`noise`, rank > 0: the sample's axes, those where noise_shape is 1 grouped) its group, one
/// value shared along the grouped axes (SpatialDropout2D: one per channel).
TANDEM_HD inline std::int64_t dropout_column(const AxisGroups& noise, std::int64_t c) {
  return noise.rank == 0 ? c : group_of(noise, c);
}
/// A standard normal value keyed as a dropout mask value (GaussianNoise, GaussianDropout):
/// Box-Muller on two 24-bit uniforms from the hash of (row key, column), u1 in (0, 1] and u2 in
/// [0, 1). Only log and cos differ between the host and the device.
TANDEM_HD inline float normal_noise(std::uint64_t row_key, std::int64_t col) {
  const std::uint64_t h = mix(row_key + static_cast<std::uint64_t>(col));
  const double u1 = ddiv(i2d(static_cast<std::int64_t>(h >> 40) + 1), 16777216.0);
  const double u2 = ddiv(i2d(static_cast<std::int64_t>((h >> 16) & 0xffffffULL)), 16777216.0);
  return d2f(dmul(dsqrt(dmul(-2.0, log_d(u1))), cos_d(dmul(6.283185307179586, u2))));
}
/// A uniform value in [0, 1) keyed as a dropout mask value (RandomFlip's draws): the hash's top
/// 24 bits as a fraction.
TANDEM_HD inline float uniform_noise(std::uint64_t row_key, std::int64_t col) {
  const std::uint64_t h = mix(row_key + static_cast<std::uint64_t>(col));
  return d2f(ddiv(i2d(static_cast<std::int64_t>(h >> 40)), 16777216.0));
}
/// The element of x that element e of flip_images' output takes (FlipDesc; `draws`: two per
/// sample). A flip is its own inverse, so the gradient flips back through the same map.
TANDEM_HD inline std::int64_t flip_source(const FlipDesc& d, const float* draws, std::int64_t e) {
  const std::int64_t c = e % d.channels, j = (e / d.channels) % d.cols,
                     i = (e / (d.channels * d.cols)) % d.rows,
                     n = e / (d.channels * d.cols * d.rows);
  const bool mirror = d.horizontal && draws[2 * n] <= 0.5f;
  const bool upside_down = d.vertical && draws[2 * n + 1] <= 0.5f;
  const std::int64_t from_i = upside_down ? d.rows - 1 - i : i;
  const std::int64_t from_j = mirror ? d.cols - 1 - j : j;
  return ((n * d.rows + from_i) * d.cols + from_j) * d.channels + c;
}
// ---------------------------------------------------------------------------------------------
// Random image transforms (WarpDesc, AdjustDesc): Keras' preprocessing layers.

/// The projective matrix a0..a7 (TensorFlow's order) of sample n of a warp: output pixel (x =
/// column, y = row) reads the point ((a0 x + a1 y + a2) / k, (a3 x + a4 y + a5) / k) of the
/// source region, k = a6 x + a7 y + 1 (k is 1 here: every transform is affine). Keras' formulas
/// (get_translation_matrix, get_rotation_matrix, get_zoom_matrix); crop offsets are whole
/// pixels; resize maps half-pixel centres as tf.image.resize does.
TANDEM_HD inline void warp_matrix(const WarpDesc& d, const float* draws, std::int64_t n, float* m) {
  const float u0 = draws[WarpDesc::kDraws * n], u1 = draws[WarpDesc::kDraws * n + 1];
  const float h = static_cast<float>(d.src_rows), w = static_cast<float>(d.src_cols);
  for (int k = 0; k < 8; ++k) m[k] = 0.0f;
  m[0] = m[4] = 1.0f;
  const float f0 = fadd(d.lo0, fmul(fsub(d.hi0, d.lo0), u0));
  const float f1 = d.width_follows_height ? f0 : fadd(d.lo1, fmul(fsub(d.hi1, d.lo1), u1));
  switch (d.kind) {
    case WarpDesc::translate:
      m[2] = -fmul(f1, w);
      m[5] = -fmul(f0, h);
      break;
    case WarpDesc::rotate: {
      const double angle = dmul(f2d(f0), 6.283185307179586);
      const float c = static_cast<float>(cos_d(angle)), s = static_cast<float>(sin_d(angle));
      const float w1 = fsub(w, 1.0f), h1 = fsub(h, 1.0f);
      m[0] = c;
      m[1] = -s;
      m[2] = fdiv(fsub(w1, fsub(fmul(c, w1), fmul(s, h1))), 2.0f);
      m[3] = s;
      m[4] = c;
      m[5] = fdiv(fsub(h1, fadd(fmul(s, w1), fmul(c, h1))), 2.0f);
      break;
    }
    case WarpDesc::zoom: {
      const float zy = fadd(1.0f, f0), zx = fadd(1.0f, f1);
      m[0] = zx;
      m[2] = fmul(fdiv(fsub(w, 1.0f), 2.0f), fsub(1.0f, zx));
      m[4] = zy;
      m[5] = fmul(fdiv(fsub(h, 1.0f), 2.0f), fsub(1.0f, zy));
      break;
    }
    case WarpDesc::crop: {
      const std::int64_t spare_rows = d.src_rows - d.out_rows, spare_cols = d.src_cols - d.out_cols;
      const auto top = static_cast<std::int64_t>(fmul(u0, static_cast<float>(spare_rows + 1)));
      const auto left = static_cast<std::int64_t>(fmul(u1, static_cast<float>(spare_cols + 1)));
      m[2] = static_cast<float>(left < spare_cols ? left : spare_cols);
      m[5] = static_cast<float>(top < spare_rows ? top : spare_rows);
      break;
    }
    case WarpDesc::resize: {
      const float sy = fdiv(h, static_cast<float>(d.out_rows));
      const float sx = fdiv(w, static_cast<float>(d.out_cols));
      m[0] = sx;
      m[2] = fsub(fmul(0.5f, sx), 0.5f);
      m[4] = sy;
      m[5] = fsub(fmul(0.5f, sy), 0.5f);
      break;
    }
  }
}

/// A source coordinate brought into [0, len - 1] as the fill mode says (TensorFlow's
/// map_coordinate); constant leaves it as it is (what lies outside reads the fill value).
TANDEM_HD inline float warp_map_coordinate(float v, std::int64_t len_i, int fill) {
  const float len = static_cast<float>(len_i);
  if (fill == WarpDesc::reflect) {
    if (v < 0.0f) {
      if (len_i <= 1) {
        v = 0.0f;
      } else {
        const float size2 = fmul(2.0f, len);
        if (v < -size2)
          v = fadd(fmul(size2, static_cast<float>(static_cast<std::int64_t>(fdiv(-v, size2)))), v);
        v = v < -len ? fadd(v, size2) : fsub(-v, 1.0f);
      }
    } else if (v > fsub(len, 1.0f)) {
      if (len_i <= 1) {
        v = 0.0f;
      } else {
        const float size2 = fmul(2.0f, len);
        v = fsub(v, fmul(size2, static_cast<float>(static_cast<std::int64_t>(fdiv(v, size2)))));
        if (v >= len) v = fsub(fsub(size2, v), 1.0f);
      }
    }
  } else if (fill == WarpDesc::wrap) {
    if (v < 0.0f) {
      if (len_i <= 1) {
        v = 0.0f;
      } else {
        const float size = fsub(len, 1.0f);
        v = fadd(v, fmul(len, static_cast<float>(static_cast<std::int64_t>(fdiv(-v, size)) + 1)));
      }
    } else if (v > fsub(len, 1.0f)) {
      if (len_i <= 1) {
        v = 0.0f;
      } else {
        const float size = fsub(len, 1.0f);
        v = fsub(v, fmul(len, static_cast<float>(static_cast<std::int64_t>(fdiv(v, size)))));
      }
    }
  } else if (fill == WarpDesc::constant) {
    return v;
  }
  return v < 0.0f ? 0.0f : v > fsub(len, 1.0f) ? fsub(len, 1.0f) : v;
}

/// The input pixels output pixel (i, j) of sample n reads and their weights: `at` a pixel index
/// into the sample's image (row * cols + col), or -1 where the fill value is read.
struct WarpTaps {
  std::int64_t at[4];
  float weight[4];
  int count;
};

/// The pixel index of source point (r, c) of the source region, or -1 (the fill value) outside
/// the region or, where the region reaches past the image (a padded resize), outside the image.
TANDEM_HD inline std::int64_t warp_pixel(const WarpDesc& d, float r, float c) {
  if (r < 0.0f || c < 0.0f || r > static_cast<float>(d.src_rows - 1) ||
      c > static_cast<float>(d.src_cols - 1))
    return -1;
  const std::int64_t row = d.src_row + static_cast<std::int64_t>(r);
  const std::int64_t col = d.src_col + static_cast<std::int64_t>(c);
  if (row < 0 || col < 0 || row >= d.rows || col >= d.cols) return -1;
  return row * d.cols + col;
}

/// One axis of a source point: the two pixels it lies between and their weights (nearest: one
/// pixel, weight 1).
struct WarpAxis {
  float lo, hi, w_lo, w_hi;
};

TANDEM_HD inline WarpAxis warp_axis(const WarpDesc& d, float src) {
  WarpAxis a;
  if (d.interpolation == WarpDesc::nearest) {
    a.lo = a.hi = round_f(src);
    a.w_lo = 1.0f;
    a.w_hi = 0.0f;
    return a;
  }
  a.lo = floor_f(src);
  a.hi = fadd(a.lo, 1.0f);
  a.w_lo = fsub(a.hi, src);
  a.w_hi = fsub(src, a.lo);
  return a;
}

/// The source column (x) and row (y) that output pixel (i, j) reads, mapped by the fill mode.
TANDEM_HD inline float warp_source_x(const WarpDesc& d, const float* m, float x, float y) {
  return warp_map_coordinate(fadd(fadd(fmul(m[0], x), fmul(m[1], y)), m[2]), d.src_cols, d.fill);
}
TANDEM_HD inline float warp_source_y(const WarpDesc& d, const float* m, float x, float y) {
  return warp_map_coordinate(fadd(fadd(fmul(m[3], x), fmul(m[4], y)), m[5]), d.src_rows, d.fill);
}

/// The taps of a pixel from its row's and its column's axis.
TANDEM_HD inline WarpTaps warp_taps_of(const WarpDesc& d, const WarpAxis& y, const WarpAxis& x) {
  WarpTaps t;
  if (d.interpolation == WarpDesc::nearest) {
    t.count = 1;
    t.at[0] = warp_pixel(d, y.lo, x.lo);
    t.weight[0] = 1.0f;
    return t;
  }
  t.count = 4;
  t.at[0] = warp_pixel(d, y.lo, x.lo);
  t.at[1] = warp_pixel(d, y.lo, x.hi);
  t.at[2] = warp_pixel(d, y.hi, x.lo);
  t.at[3] = warp_pixel(d, y.hi, x.hi);
  t.weight[0] = fmul(y.w_lo, x.w_lo);
  t.weight[1] = fmul(y.w_lo, x.w_hi);
  t.weight[2] = fmul(y.w_hi, x.w_lo);
  t.weight[3] = fmul(y.w_hi, x.w_hi);
  return t;
}

TANDEM_HD inline WarpTaps warp_taps(const WarpDesc& d, const float* m, std::int64_t i,
                                    std::int64_t j) {
  const float x = static_cast<float>(j), y = static_cast<float>(i);
  return warp_taps_of(d, warp_axis(d, warp_source_y(d, m, x, y)),
                      warp_axis(d, warp_source_x(d, m, x, y)));
}

/// Whether a warp's source column depends on the output column only and its row on the row
/// only (every kind but rotate): its axes can then be computed once per column and per row.
/// Given m[1] = m[3] = +0, warp_source_x(d, m, x, 0) equals warp_source_x(d, m, x, y) for every
/// row y >= 0, bit for bit, and likewise for rows.
TANDEM_HD inline bool warp_separable(const WarpDesc& d) {
  return d.kind != WarpDesc::rotate;
}

/// Channel c of an output pixel from its taps into its sample's input `image`.
TANDEM_HD inline float warp_tap_sum(const WarpDesc& d, const WarpTaps& t, const float* image,
                                    std::int64_t c) {
  float v = 0.0f;
  for (int k = 0; k < t.count; ++k)
    v = fadd(v, fmul(t.weight[k], t.at[k] < 0 ? d.fill_value : image[t.at[k] * d.channels + c]));
  return v;
}

/// Output value e of warp_images (batch, out_rows, out_cols, channels) from x.
TANDEM_HD inline float warp_value(const WarpDesc& d, const float* draws, const float* x,
                                  std::int64_t e) {
  const std::int64_t c = e % d.channels, j = (e / d.channels) % d.out_cols,
                     i = (e / (d.channels * d.out_cols)) % d.out_rows,
                     n = e / (d.channels * d.out_cols * d.out_rows);
  float m[8];
  warp_matrix(d, draws, n, m);
  return warp_tap_sum(d, warp_taps(d, m, i, j), x + n * d.rows * d.cols * d.channels, c);
}

/// AdjustDesc: sample n's factor (contrast) or delta times the value range (brightness).
TANDEM_HD inline float adjust_amount(const AdjustDesc& d, const float* draws, std::int64_t n) {
  const float f = fadd(d.lo, fmul(fsub(d.hi, d.lo), draws[n]));
  return d.kind == AdjustDesc::contrast ? f : fmul(f, fsub(d.value_hi, d.value_lo));
}
/// The adjusted value before clipping: (x - mean) f + mean, or x + delta.
TANDEM_HD inline float adjust_unclipped(const AdjustDesc& d, float amount, float x, float mean) {
  return d.kind == AdjustDesc::contrast ? fadd(fmul(fsub(x, mean), amount), mean) : fadd(x, amount);
}
TANDEM_HD inline float adjust_clip(const AdjustDesc& d, float v) {
  return v < d.value_lo ? d.value_lo : v > d.value_hi ? d.value_hi : v;
}
/// Channel c's mean over an image's `cells` pixels, summed in pixel order in double.
TANDEM_HD inline float adjust_channel_mean(std::int64_t cells, std::int64_t channels,
                                           const float* image, std::int64_t c) {
  double sum = 0.0;
  for (std::int64_t p = 0; p < cells; ++p) sum = dadd(sum, f2d(image[p * channels + c]));
  return static_cast<float>(ddiv(sum, i2d(cells)));
}
/// Contrast's input gradient from the gradient that passed the clip (g) and its channel mean.
TANDEM_HD inline float adjust_input_grad(float amount, float g, float g_mean) {
  return fadd(fmul(amount, g), fmul(fsub(1.0f, amount), g_mean));
}
/// Whether the gradient passes the clip at v (inside the range, ends included).
TANDEM_HD inline bool adjust_passes(const AdjustDesc& d, float v) {
  return v >= d.value_lo && v <= d.value_hi;
}

/// Everything at once: the mask value of (global sample, column) at one training forward.
TANDEM_HD inline float dropout_mask_value(std::uint64_t stream, std::uint64_t call,
                                          std::int64_t sample, std::int64_t col, double rate) {
  return dropout_mask(dropout_row_key(dropout_step_key(stream, call), sample), col,
                      dropout_keep_below(rate), dropout_scale(rate));
}

}  // namespace math
}  // namespace tandem::backend
