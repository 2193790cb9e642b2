#include "tandem/optimizer.hpp"

#include <cmath>

#include "backend/cpu/parallel.hpp"
#include "tandem/error.hpp"

namespace tandem {

Optimizer::Optimizer(double learning_rate, double weight_decay, double clipnorm, double clipvalue,
                     double global_clipnorm)
    : learning_rate_(learning_rate),
      weight_decay_(weight_decay),
      clipnorm_(clipnorm),
      clipvalue_(clipvalue),
      global_clipnorm_(global_clipnorm) {}

nlohmann::json Optimizer::base_config(const std::string& name) const {
  auto opt = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"name", name},
          {"learning_rate", learning_rate_},
          {"weight_decay", weight_decay_},
          {"clipnorm", opt(clipnorm_)},
          {"clipvalue", opt(clipvalue_)},
          {"global_clipnorm", opt(global_clipnorm_)}};
}

void Optimizer::create_slots(const std::vector<Parameter*>& params) {
  const std::size_t per_param = slot_names().size();
  slots_.clear();
  for (Parameter* p : params) {
    std::vector<Tensor> s;
    for (std::size_t i = 0; i < per_param; ++i) s.emplace_back(p->value.shape());
    slots_.push_back(std::move(s));
  }
}

namespace {

double squared_norm(const float* g, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

}  // namespace

void Optimizer::apply(const std::vector<Parameter*>& params) {
  if (slots_.size() != params.size()) {
    if (!slots_.empty())
      throw RunError("optimizer " + class_name() + ": parameter list changed between steps");
    create_slots(params);
  }
  ++iterations_;
  double global_scale = 1.0;
  if (global_clipnorm_ > 0) {
    double total = 0;
    for (Parameter* p : params) total += squared_norm(p->grad.data(), p->grad.size());
    const double norm = std::sqrt(total);
    if (norm > global_clipnorm_) global_scale = global_clipnorm_ / norm;
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i];
    if (p.grad.size() != p.value.size())
      throw RunError("optimizer " + class_name() + ": parameter '" + p.name + "' has no gradient");
    const float* g = p.grad.data();
    double scale = global_scale;
    if (clipnorm_ > 0) {
      const double norm = std::sqrt(squared_norm(g, p.grad.size()));
      if (norm > clipnorm_) scale *= clipnorm_ / norm;
    }
    if (scale != 1.0 || clipvalue_ > 0) {
      clipped_.resize(p.grad.shape());
      const float s = static_cast<float>(scale);
      const float cv = static_cast<float>(clipvalue_);
      for (std::int64_t k = 0; k < p.grad.size(); ++k) {
        float v = g[k] * s;
        if (clipvalue_ > 0) v = std::clamp(v, -cv, cv);
        clipped_[k] = v;
      }
      g = clipped_.data();
    }
    if (weight_decay_ > 0) {
      const float f = static_cast<float>(1.0 - learning_rate_ * weight_decay_);
      float* w = p.value.data();
      cpu::parallel_for(p.value.size(), 1 << 16, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t k = b; k < e; ++k) w[k] -= w[k] * (1.0f - f);
      });
    }
    update(p, g, slots_[i], iterations_);
  }
}

}  // namespace tandem
