// The CPU backend's element-wise arithmetic for the merging layers (Subtract, Average, Maximum,
// Minimum), the layers that scale their input (Rescaling, attention's query scaling) and the
// ReLU-family layers with parameters.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// f(i) for every i in [0, n), in parallel.
template <class F>
void each(std::int64_t n, F f) {
  cpu::parallel_for(n, cpu::kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i);
  });
}

// group(at, g) for group g of every sample (the sample's first value at `at`), in parallel.
template <class Group>
void for_each_sample_group(const AxisGroups& d, std::int64_t samples, const Group& group) {
  cpu::parallel_for(samples * d.groups, std::max<std::int64_t>(1, 4096 / d.per_group),
                    [&](std::int64_t r0, std::int64_t r1) {
                      for (std::int64_t r = r0; r < r1; ++r)
                        group((r / d.groups) * d.size, r % d.groups);
                    });
}

}  // namespace

void CpuBackend::subtract(const Tensor& a, const Tensor& b, Tensor& out) {
  require_device(*this, {&a, &b, &out}, "subtract");
  check_same_sizes(a.size(), b.size(), out.size(), "subtract");
  const float* ap = a.data();
  const float* bp = b.data();
  float* op = out.data();
  each(out.size(), [&](std::int64_t i) { op[i] = math::fsub(ap[i], bp[i]); });
}

void CpuBackend::affine(const Tensor& x, float scale, float offset, Tensor& out) {
  require_device(*this, {&x, &out}, "affine");
  check_same_sizes(x.size(), out.size(), out.size(), "affine");
  const float* xp = x.data();
  float* op = out.data();
  each(out.size(), [&](std::int64_t i) { op[i] = math::fadd(math::fmul(xp[i], scale), offset); });
}

bool CpuBackend::scale_checking_finite(Tensor& values, float factor) {
  require_device(*this, values, "scale_checking_finite");
  float* p = values.data();
  std::atomic<bool> finite{true};  // written once per thread's range, at its end
  cpu::parallel_for(values.size(), cpu::kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    unsigned bad = 0;  // an OR over the range, which the compiler vectorises
    for (std::int64_t i = b; i < e; ++i) {
      bad |= static_cast<unsigned>(!(std::fabs(p[i]) <= std::numeric_limits<float>::max()));
      p[i] = math::fmul(p[i], factor);
    }
    if (bad) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load();
}

void CpuBackend::column_affine(const Tensor& x, const Tensor& scale, const Tensor* shift,
                               Tensor& y, std::int64_t cols) {
  require_device(*this, {&x, &scale, &y}, "column_affine");
  if (shift) require_device(*this, *shift, "column_affine");
  check_column_affine(x, scale, shift, y, cols);
  const float* xp = x.data();
  const float* a = scale.data();
  const float* b = shift ? shift->data() : nullptr;
  float* yp = y.data();
  each(y.size(), [&](std::int64_t i) {
    const std::int64_t c = i % cols;
    yp[i] = b ? math::fadd(math::fmul(xp[i], a[c]), b[c]) : math::fmul(xp[i], a[c]);
  });
}

void CpuBackend::normalization_factors(const Tensor& mean, const Tensor& variance, bool invert,
                                       Tensor& scale, Tensor& shift) {
  require_device(*this, {&mean, &variance, &scale, &shift}, "normalization_factors");
  check_same_sizes(mean.size(), variance.size(), scale.size(), "normalization_factors");
  check_same_sizes(mean.size(), variance.size(), shift.size(), "normalization_factors");
  for (std::int64_t c = 0; c < mean.size(); ++c)
    math::normalization_factors(math::f2d(mean[c]), math::f2d(variance[c]), invert, scale[c],
                                shift[c]);
}

void CpuBackend::extreme_update(bool maximum, const Tensor& x, int index, Tensor& out,
                                Tensor& winner) {
  require_device(*this, {&x, &out, &winner}, "extreme_update");
  check_same_sizes(x.size(), out.size(), winner.size(), "extreme_update");
  const float* xp = x.data();
  float* op = out.data();
  float* wp = winner.data();
  const auto tag = static_cast<float>(index);
  each(out.size(), [&](std::int64_t i) {
    if (index == 0 || math::extreme_beats(maximum, xp[i], op[i])) {
      op[i] = xp[i];
      wp[i] = tag;
    }
  });
}

void CpuBackend::route_gradient(const Tensor& winner, int index, const Tensor& dy, Tensor& dx) {
  require_device(*this, {&winner, &dy, &dx}, "route_gradient");
  check_same_sizes(winner.size(), dy.size(), dx.size(), "route_gradient");
  const float* wp = winner.data();
  const float* g = dy.data();
  float* gx = dx.data();
  const auto tag = static_cast<float>(index);
  each(dx.size(), [&](std::int64_t i) { gx[i] = wp[i] == tag ? g[i] : 0.0f; });
}

void CpuBackend::shaped_activation_forward(const ShapedActivation& a, const Tensor& x,
                                           Tensor& y) {
  require_device(*this, {&x, &y}, "shaped_activation_forward");
  check_same_sizes(x.size(), y.size(), y.size(), "shaped_activation_forward");
  const float* xp = x.data();
  float* yp = y.data();
  each(y.size(), [&](std::int64_t i) { yp[i] = math::shaped_activation_value(a, xp[i]); });
}

void CpuBackend::shaped_activation_backward(const ShapedActivation& a, const Tensor& x,
                                            const Tensor& dy, Tensor& dx) {
  require_device(*this, {&x, &dy, &dx}, "shaped_activation_backward");
  check_same_sizes(x.size(), dy.size(), dx.size(), "shaped_activation_backward");
  const float* xp = x.data();
  const float* g = dy.data();
  float* gx = dx.data();
  each(dx.size(), [&](std::int64_t i) {
    gx[i] = math::fmul(g[i], math::shaped_activation_derivative(a, xp[i]));
  });
}

void CpuBackend::prelu_forward(const PreluDesc& d, const Tensor& x, const Tensor& alpha,
                               Tensor& y) {
  require_device(*this, {&x, &alpha, &y}, "prelu_forward");
  prelu_rows(d, x, alpha, &y, nullptr);
  const float* xp = x.data();
  const float* ap = alpha.data();
  float* yp = y.data();
  each(y.size(), [&](std::int64_t i) {
    yp[i] = math::prelu_value(xp[i], ap[math::group_of(d, i % d.size)]);
  });
}

void CpuBackend::prelu_backward(const PreluDesc& d, const Tensor& x, const Tensor& alpha,
                                const Tensor& dy, Tensor* dx, Tensor* d_alpha) {
  require_device(*this, {&x, &alpha, &dy}, "prelu_backward");
  if (dx) require_device(*this, *dx, "prelu_backward");
  if (d_alpha) require_device(*this, *d_alpha, "prelu_backward");
  const std::int64_t rows = prelu_rows(d, x, alpha, &dy, dx);
  if (d_alpha && d_alpha->size() != d.groups)
    throw std::logic_error("prelu_backward: d_alpha's size");
  const float* xp = x.data();
  const float* ap = alpha.data();
  const float* g = dy.data();
  if (dx) {
    float* gx = dx->data();
    each(dx->size(), [&](std::int64_t i) {
      gx[i] = math::fmul(g[i], math::prelu_input_slope(xp[i], ap[math::group_of(d, i % d.size)]));
    });
  }
  if (!d_alpha) return;
  float* ga = d_alpha->data();
  each(d.groups, [&](std::int64_t a) {
    ga[a] = math::d2f(math::prelu_alpha_gradient(d, xp, g, rows, a));
  });
}

void CpuBackend::add_penalty_gradient(const Tensor& w, float l1, float l2, Tensor& grad) {
  require_device(*this, {&w, &grad}, "add_penalty_gradient");
  check_same_sizes(w.size(), grad.size(), grad.size(), "add_penalty_gradient");
  const float* p = w.data();
  float* g = grad.data();
  each(grad.size(), [&](std::int64_t i) {
    g[i] = math::fadd(g[i], math::penalty_derivative(p[i], l1, l2));
  });
}

void CpuBackend::unit_normalize(const UnitNormDesc& d, const Tensor& x, Tensor& y) {
  require_device(*this, {&x, &y}, "unit_normalize");
  const std::int64_t samples = unit_norm_samples(d, x, nullptr, y);
  const float* xp = x.data();
  float* yp = y.data();
  for_each_sample_group(d, samples, [&](std::int64_t at, std::int64_t g) {
    math::unit_normalize_group(d, xp + at, yp + at, g);
  });
}

void CpuBackend::unit_normalize_backward(const UnitNormDesc& d, const Tensor& x, const Tensor& dy,
                                         Tensor& dx) {
  require_device(*this, {&x, &dy, &dx}, "unit_normalize_backward");
  const std::int64_t samples = unit_norm_samples(d, x, &dy, dx);
  const float* xp = x.data();
  const float* gp = dy.data();
  float* dp = dx.data();
  for_each_sample_group(d, samples, [&](std::int64_t at, std::int64_t g) {
    math::unit_normalize_group_backward(d, xp + at, gp + at, dp + at, g);
  });
}

void CpuBackend::apply_constraint(const ConstraintDesc& c, Tensor& w) {
  require_device(*this, w, "apply_constraint");
  if (w.size() != c.axes.size)
    throw std::logic_error("apply_constraint: " + std::to_string(w.size()) + " values for " +
                           std::to_string(c.axes.size));
  float* p = w.data();
  std::vector<float> scales(static_cast<std::size_t>(c.axes.groups), 1.0f);
  if (c.kind != ConstraintDesc::Kind::non_neg)
    each(c.axes.groups, [&](std::int64_t g) {
      scales[static_cast<std::size_t>(g)] = math::constraint_scale(c, p, g);
    });
  each(w.size(), [&](std::int64_t i) {
    p[i] = math::constrained_value(c, p[i], scales[static_cast<std::size_t>(math::group_of(c.axes, i))]);
  });
}

}  // namespace tandem::backend
