// Private (CUDA module): the merging layers' element-wise kernels (Subtract, Average, Maximum,
// Minimum), affine scaling, the ReLU-family layers with parameters and UnitNormalization (a
// thread per sample's group), kernel_math's float operations one by one, as the CPU backend.
// Ownership: none. Thread-safety: launchers queue on the given stream, any thread.
#include "backend/kernel_math.hpp"
#include "cuda/ops/launch.cuh"
#include "cuda/ops/layer_kernels.hpp"

namespace tandem::cuda {

namespace math = backend::math;

namespace {

__global__ void subtract_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) out[i] = math::fsub(a[i], b[i]);
}

__global__ void affine_kernel(const float* x, float* out, std::int64_t n, float scale,
                              float offset) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    out[i] = math::fadd(math::fmul(x[i], scale), offset);
}

__global__ void scale_checking_finite_kernel(float* x, std::int64_t n, float factor,
                                             float* nonfinite) {
  bool bad = false;
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const float v = x[i];
    bad = bad || !isfinite(v);
    x[i] = math::fmul(v, factor);
  }
  if (bad) *nonfinite = 1.0f;  // every writer stores the same value
}

__global__ void column_affine_kernel(const float* x, const float* scale, const float* shift,
                                     float* y, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step()) {
    const std::int64_t c = i % cols;
    y[i] = shift ? math::fadd(math::fmul(x[i], scale[c]), shift[c]) : math::fmul(x[i], scale[c]);
  }
}

__global__ void normalization_factors_kernel(const float* mean, const float* variance, bool invert,
                                             float* scale, float* shift, std::int64_t n) {
  for (std::int64_t c = grid_first(); c < n; c += grid_step())
    math::normalization_factors(math::f2d(mean[c]), math::f2d(variance[c]), invert, scale[c],
                                shift[c]);
}

__global__ void extreme_kernel(bool maximum, const float* x, int index, float* out,
                               float* winner, std::int64_t n) {
  const auto tag = static_cast<float>(index);
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    if (index == 0 || math::extreme_beats(maximum, x[i], out[i])) {
      out[i] = x[i];
      winner[i] = tag;
    }
}

__global__ void route_kernel(const float* winner, int index, const float* dy, float* dx,
                             std::int64_t n) {
  const auto tag = static_cast<float>(index);
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    dx[i] = winner[i] == tag ? dy[i] : 0.0f;
}

__global__ void shaped_forward_kernel(backend::ShapedActivation a, const float* x, float* y,
                                      std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    y[i] = math::shaped_activation_value(a, x[i]);
}

__global__ void shaped_backward_kernel(backend::ShapedActivation a, const float* x,
                                       const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    dx[i] = math::fmul(dy[i], math::shaped_activation_derivative(a, x[i]));
}

__global__ void prelu_forward_kernel(backend::PreluDesc d, const float* x, const float* alpha,
                                     float* y, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    y[i] = math::prelu_value(x[i], alpha[math::group_of(d, i % d.size)]);
}

__global__ void prelu_input_kernel(backend::PreluDesc d, const float* x, const float* alpha,
                                   const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    dx[i] = math::fmul(dy[i],
                       math::prelu_input_slope(x[i], alpha[math::group_of(d, i % d.size)]));
}

__global__ void prelu_alpha_kernel(backend::PreluDesc d, const float* x, const float* dy,
                                   float* d_alpha, std::int64_t rows) {
  for (std::int64_t a = grid_first(); a < d.groups; a += grid_step())
    d_alpha[a] = math::d2f(math::prelu_alpha_gradient(d, x, dy, rows, a));
}

// One thread per (sample, group) of a unit normalization.
__global__ void unit_normalize_kernel(backend::UnitNormDesc d, const float* x, float* y,
                                      std::int64_t groups) {
  for (std::int64_t r = grid_first(); r < groups; r += grid_step()) {
    const std::int64_t at = (r / d.groups) * d.size;
    math::unit_normalize_group(d, x + at, y + at, r % d.groups);
  }
}

__global__ void unit_normalize_backward_kernel(backend::UnitNormDesc d, const float* x,
                                               const float* dy, float* dx, std::int64_t groups) {
  for (std::int64_t r = grid_first(); r < groups; r += grid_step()) {
    const std::int64_t at = (r / d.groups) * d.size;
    math::unit_normalize_group_backward(d, x + at, dy + at, dx + at, r % d.groups);
  }
}

__global__ void penalty_values_kernel(const float* w, float l1, float l2, float* out,
                                      std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    out[i] = math::penalty_value(w[i], l1, l2);
}

__global__ void penalty_gradient_kernel(const float* w, float l1, float l2, float* grad,
                                        std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    grad[i] = math::fadd(grad[i], math::penalty_derivative(w[i], l1, l2));
}

__global__ void constraint_scale_kernel(backend::ConstraintDesc c, const float* w,
                                        float* scales) {
  for (std::int64_t g = grid_first(); g < c.axes.groups; g += grid_step())
    scales[g] = math::constraint_scale(c, w, g);
}

__global__ void constrain_kernel(backend::ConstraintDesc c, float* w, const float* scales) {
  for (std::int64_t i = grid_first(); i < c.axes.size; i += grid_step())
    w[i] = math::constrained_value(c, w[i], scales ? scales[math::group_of(c.axes, i)] : 1.0f);
}

}  // namespace

void penalty_values(const float* w, float l1, float l2, float* out, std::int64_t n,
                    cudaStream_t stream) {
  if (n <= 0) return;
  penalty_values_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, l1, l2, out, n);
  check_launch("penalty_values");
}

void add_penalty_gradient(const float* w, float l1, float l2, float* grad, std::int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return;
  penalty_gradient_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, l1, l2, grad, n);
  check_launch("add_penalty_gradient");
}

void apply_constraint(const backend::ConstraintDesc& c, float* w, float* scales,
                      cudaStream_t stream) {
  if (c.axes.size <= 0) return;
  const bool scaled = c.kind != backend::ConstraintDesc::Kind::non_neg;
  if (scaled) {
    constraint_scale_kernel<<<blocks_for(c.axes.groups), kThreads, 0, stream>>>(c, w, scales);
    check_launch("apply_constraint (norms)");
  }
  constrain_kernel<<<blocks_for(c.axes.size), kThreads, 0, stream>>>(c, w,
                                                                       scaled ? scales : nullptr);
  check_launch("apply_constraint");
}

void unit_normalize(const backend::UnitNormDesc& d, const float* x, float* y, std::int64_t samples,
                    cudaStream_t stream) {
  const std::int64_t groups = samples * d.groups;
  if (groups <= 0) return;
  unit_normalize_kernel<<<blocks_for(groups), kThreads, 0, stream>>>(d, x, y, groups);
  check_launch("unit_normalize");
}

void unit_normalize_backward(const backend::UnitNormDesc& d, const float* x, const float* dy,
                             float* dx, std::int64_t samples, cudaStream_t stream) {
  const std::int64_t groups = samples * d.groups;
  if (groups <= 0) return;
  unit_normalize_backward_kernel<<<blocks_for(groups), kThreads, 0, stream>>>(d, x, dy, dx, groups);
  check_launch("unit_normalize_backward");
}

void prelu_forward(const backend::PreluDesc& d, const float* x, const float* alpha, float* y,
                   std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  prelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, x, alpha, y, n);
  check_launch("prelu_forward");
}

void prelu_backward(const backend::PreluDesc& d, const float* x, const float* alpha,
                    const float* dy, float* dx, float* d_alpha, std::int64_t rows,
                    cudaStream_t stream) {
  const std::int64_t n = rows * d.size;
  if (dx && n > 0) {
    prelu_input_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, x, alpha, dy, dx, n);
    check_launch("prelu_backward (input)");
  }
  if (!d_alpha) return;
  prelu_alpha_kernel<<<blocks_for(d.groups), kThreads, 0, stream>>>(d, x, dy, d_alpha, rows);
  check_launch("prelu_backward (alpha)");
}

void shaped_activation_forward(const backend::ShapedActivation& a, const float* x, float* y,
                               std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  shaped_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, y, n);
  check_launch("shaped_activation_forward");
}

void shaped_activation_backward(const backend::ShapedActivation& a, const float* x,
                                const float* dy, float* dx, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  shaped_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, dy, dx, n);
  check_launch("shaped_activation_backward");
}

void subtract(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  subtract_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  check_launch("subtract");
}

void affine(const float* x, float* out, std::int64_t n, float scale, float offset,
            cudaStream_t stream) {
  if (n <= 0) return;
  affine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, out, n, scale, offset);
  check_launch("affine");
}

void scale_checking_finite(float* x, std::int64_t n, float factor, float* nonfinite,
                           cudaStream_t stream) {
  if (n <= 0) return;
  scale_checking_finite_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, factor, nonfinite);
  check_launch("scale_checking_finite");
}

void column_affine(const float* x, const float* scale, const float* shift, float* y,
                   std::int64_t n, std::int64_t cols, cudaStream_t stream) {
  if (n <= 0) return;
  column_affine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, shift, y, n, cols);
  check_launch("column_affine");
}

void normalization_factors(const float* mean, const float* variance, bool invert, float* scale,
                           float* shift, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  normalization_factors_kernel<<<blocks_for(n), kThreads, 0, stream>>>(mean, variance, invert,
                                                                       scale, shift, n);
  check_launch("normalization_factors");
}

void extreme_update(bool maximum, const float* x, int index, float* out, float* winner,
                    std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  extreme_kernel<<<blocks_for(n), kThreads, 0, stream>>>(maximum, x, index, out, winner, n);
  check_launch("extreme_update");
}

void route_gradient(const float* winner, int index, const float* dy, float* dx, std::int64_t n,
                    cudaStream_t stream) {
  if (n <= 0) return;
  route_kernel<<<blocks_for(n), kThreads, 0, stream>>>(winner, index, dy, dx, n);
  check_launch("route_gradient");
}

}  // namespace tandem::cuda
