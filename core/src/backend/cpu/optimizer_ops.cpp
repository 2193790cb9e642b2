// The CPU backend's optimizer step: kernel_math.hpp's clipping factors and update_element over
// each parameter tensor, elements in parallel (each element's update is independent).
#include <cmath>

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

float* slot_data(std::vector<Tensor>* slots, std::size_t i) {
  return slots && i < slots->size() ? (*slots)[i].data() : nullptr;
}

}  // namespace

void CpuBackend::optimizer_update(const OptimizerDesc& desc, std::int64_t step, double lr,
                                  const std::vector<UpdateTensors>& params) {
  const math::OptimizerStep s = math::optimizer_step(desc, step, lr);
  double total = 0;
  if (desc.global_clipnorm > 0)
    for (const UpdateTensors& p : params) total += squared_norm(*p.grad);
  const double global_scale = math::global_clip_scale(total, desc.global_clipnorm);
  for (const UpdateTensors& p : params) {
    require_device(*this, *p.value, "optimizer_update");
    require_device(*this, *p.grad, "optimizer_update");
    const double scale = math::tensor_clip_scale(
        global_scale, desc.clipnorm > 0 ? squared_norm(*p.grad) : 0.0, desc.clipnorm);
    float* w = p.value->data();
    const float* g = p.grad->data();
    float* s0 = slot_data(p.slots, 0);
    float* s1 = slot_data(p.slots, 1);
    float* s2 = slot_data(p.slots, 2);
    cpu::parallel_for(p.value->size(), 1 << 16, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t k = b; k < e; ++k)
        math::update_element(s, w + k, math::clipped_gradient(s, g[k], scale), s0 ? s0 + k : nullptr,
                             s1 ? s1 + k : nullptr, s2 ? s2 + k : nullptr);
    });
  }
}

}  // namespace tandem::backend
