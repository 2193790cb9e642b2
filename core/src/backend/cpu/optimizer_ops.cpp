// The CPU backend's optimizer step: kernel_math.hpp's clipping factors and update_element over
// each parameter tensor, elements in parallel (each element's update is independent).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

double squared_norm(const Tensor& g) {
  const float* p = g.data();
  double s = 0;
  for (std::int64_t i = 0; i < g.size(); ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

// Slot i of the parameter, or null where the optimizer keeps fewer.
float* slot_data(std::vector<Tensor>* slots, int i, int count) {
  const auto at = static_cast<std::size_t>(i);
  return slots && i < count && at < slots->size() ? (*slots)[at].data() : nullptr;
}

// use_ema: the moving averages after the step (kernel_math's average_element).
void update_averages(const math::OptimizerStep& s, float* w, float* average, std::int64_t n) {
  cpu::parallel_for(n, 1 << 16, [=](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) math::average_element(s, w + k, average + k);
  });
}

using OptimizerKind = OptimizerDesc::Kind;

// One tensor's update with the step's switches as compile-time constants: each combination is a
// straight loop the compiler vectorises (kernel_math's update_element, its branches folded).
// kVariant is the kind's own switch: nesterov (SGD), amsgrad (Adam), centered (RMSprop); the
// other kinds have none (false).
template <OptimizerKind K, bool kMomentum, bool kVariant, bool kDecay, bool kClip>
void update_tensor(const math::OptimizerStep& step, double scale, float* w, const float* g,
                   float* s0, float* s1, float* s2, std::int64_t n) {
  // The slots this combination has (kernel_math.hpp's update_element order).
  constexpr int kSlots = K == OptimizerKind::sgd       ? (kMomentum ? 1 : 0)
                         : K == OptimizerKind::adam    ? (kVariant ? 3 : 2)
                         : K == OptimizerKind::rmsprop ? 1 + (kMomentum ? 1 : 0) + (kVariant ? 1 : 0)
                         : K == OptimizerKind::adagrad || K == OptimizerKind::lion ? 1
                                                                 : 2;
  cpu::parallel_for(n, 1 << 16, [=](std::int64_t b, std::int64_t e) {
    // The switches set here, where the compiler sees them (the closure reaches this code through
    // OpenMP by pointer), and everything in locals: a float store through w or a slot could
    // otherwise alias the step's float fields.
    math::OptimizerStep s = step;
    s.kind = K;
    s.use_momentum = kMomentum;
    s.decay = kDecay;
    s.clip_value = s.clip_value && kClip;
    if constexpr (K == OptimizerKind::sgd) s.nesterov = kVariant;
    if constexpr (K == OptimizerKind::adam) s.amsgrad = kVariant;
    if constexpr (K == OptimizerKind::rmsprop) s.centered = kVariant;
    float* __restrict wr = w;
    float* __restrict r0 = s0;
    float* __restrict r1 = s1;
    float* __restrict r2 = s2;
    const float* __restrict gr = g;
    for (std::int64_t k = b; k < e; ++k) {
      const float gk = kClip ? math::clipped_gradient(s, gr[k], scale) : gr[k];
      math::update_element(s, wr + k, gk, kSlots > 0 ? r0 + k : nullptr,
                           kSlots > 1 ? r1 + k : nullptr, kSlots > 2 ? r2 + k : nullptr);
    }
  });
}

template <OptimizerKind K, bool kMomentum, bool kVariant, bool kDecay>
void update_with_decay(const math::OptimizerStep& s, bool clip, double scale, float* w,
                       const float* g, float* s0, float* s1, float* s2, std::int64_t n) {
  if (clip)
    update_tensor<K, kMomentum, kVariant, kDecay, true>(s, scale, w, g, s0, s1, s2, n);
  else
    update_tensor<K, kMomentum, kVariant, kDecay, false>(s, scale, w, g, s0, s1, s2, n);
}

template <OptimizerKind K, bool kMomentum, bool kVariant>
void update_with_variant(const math::OptimizerStep& s, bool clip, double scale, float* w,
                         const float* g, float* s0, float* s1, float* s2, std::int64_t n) {
  if (s.decay)
    update_with_decay<K, kMomentum, kVariant, true>(s, clip, scale, w, g, s0, s1, s2, n);
  else
    update_with_decay<K, kMomentum, kVariant, false>(s, clip, scale, w, g, s0, s1, s2, n);
}

template <OptimizerKind K, bool kMomentum>
void update_with_momentum(const math::OptimizerStep& s, bool variant, bool clip, double scale,
                          float* w, const float* g, float* s0, float* s1, float* s2,
                          std::int64_t n) {
  if (variant)
    update_with_variant<K, kMomentum, true>(s, clip, scale, w, g, s0, s1, s2, n);
  else
    update_with_variant<K, kMomentum, false>(s, clip, scale, w, g, s0, s1, s2, n);
}

template <OptimizerKind K>
void update_kind(const math::OptimizerStep& s, bool variant, bool clip, double scale, float* w,
                 const float* g, float* s0, float* s1, float* s2, std::int64_t n) {
  if (s.use_momentum)
    update_with_momentum<K, true>(s, variant, clip, scale, w, g, s0, s1, s2, n);
  else
    update_with_momentum<K, false>(s, variant, clip, scale, w, g, s0, s1, s2, n);
}

// gradient_accumulation_steps: a parameter's accumulator slot, after adding the call's gradient
// to it (accumulate_only) or making it the combined gradient (combine).
Tensor& accumulated(const OptimizerDesc& desc, const math::OptimizerStep& s,
                    const UpdateTensors& p) {
  const auto at = static_cast<std::size_t>(math::accumulator_slot(desc));
  if (!p.slots || p.slots->size() <= at)
    throw std::logic_error("optimizer_update: gradient accumulation without its slot");
  Tensor& acc = (*p.slots)[at];
  float* a = acc.data();
  const float* g = p.grad->data();
  cpu::parallel_for(acc.size(), 1 << 16, [=, &s](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) {
      if (s.combine)
        a[k] = math::combined_gradient(s, g[k], a[k]);
      else
        math::accumulate_element(g[k], a + k);
    }
  });
  return acc;
}

// One parameter's update from `grad` (its gradient, or the combined one), clipped by `scale`.
void update_parameter(const OptimizerDesc& desc, const math::OptimizerStep& s, double scale,
                      const UpdateTensors& p, const Tensor& grad) {
  float* w = p.value->data();
  const float* g = grad.data();
  const int rule_slots = math::update_slot_count(desc);
  float* s0 = slot_data(p.slots, 0, rule_slots);
  float* s1 = slot_data(p.slots, 1, rule_slots);
  float* s2 = slot_data(p.slots, 2, rule_slots);
  const std::int64_t n = p.value->size();
  const bool clip = scale != 1.0 || s.clip_value;
  switch (s.kind) {
    case OptimizerKind::sgd:
      update_kind<OptimizerKind::sgd>(s, s.nesterov, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::adam:
      update_kind<OptimizerKind::adam>(s, s.amsgrad, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::rmsprop:
      update_kind<OptimizerKind::rmsprop>(s, s.centered, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::adagrad:
      update_kind<OptimizerKind::adagrad>(s, false, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::adadelta:
      update_kind<OptimizerKind::adadelta>(s, false, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::adamax:
      update_kind<OptimizerKind::adamax>(s, false, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::nadam:
      update_kind<OptimizerKind::nadam>(s, false, clip, scale, w, g, s0, s1, s2, n);
      break;
    case OptimizerKind::lion:
      update_kind<OptimizerKind::lion>(s, false, clip, scale, w, g, s0, s1, s2, n);
      break;
  }
}

// use_ema: the parameter's average slot (null without use_ema).
float* average_of(const OptimizerDesc& desc, const math::OptimizerStep& s, const UpdateTensors& p) {
  if (!s.use_ema) return nullptr;
  const int at = math::update_slot_count(desc);
  float* average = slot_data(p.slots, at, at + 1);
  if (!average)
    throw std::logic_error("optimizer_update: use_ema without the parameter's average slot");
  return average;
}

}  // namespace

void CpuBackend::optimizer_update(const OptimizerDesc& desc, std::int64_t step, double lr,
                                  const std::vector<UpdateTensors>& params) {
  const math::OptimizerStep s = math::optimizer_step(desc, step, lr);
  std::vector<const Tensor*> grads;  // what each update reads
  std::vector<float*> averages;      // use_ema's, else null
  for (const UpdateTensors& p : params) {
    require_device(*this, *p.value, "optimizer_update");
    require_device(*this, *p.grad, "optimizer_update");
    averages.push_back(average_of(desc, s, p));
    if (s.ema_from_weights)
      std::copy(p.value->data(), p.value->data() + p.value->size(), averages.back());
    grads.push_back(s.accumulate_only || s.combine ? &accumulated(desc, s, p) : p.grad);
  }
  double total = 0;
  if (desc.global_clipnorm > 0 && !s.accumulate_only)
    for (const Tensor* g : grads) total += squared_norm(*g);
  const double global_scale = math::global_clip_scale(total, desc.global_clipnorm);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const UpdateTensors& p = params[i];
    if (!s.accumulate_only) {
      const double scale = math::tensor_clip_scale(
          global_scale, desc.clipnorm > 0 ? squared_norm(*grads[i]) : 0.0, desc.clipnorm);
      update_parameter(desc, s, scale, p, *grads[i]);
      if (s.combine) (*p.slots)[static_cast<std::size_t>(math::accumulator_slot(desc))].fill(0.0f);
    }
    if (averages[i]) update_averages(s, p.value->data(), averages[i], p.value->size());
  }
}

}  // namespace tandem::backend
