#include "optim/optimizer.hpp"

#include "backend/ops.hpp"
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
  nlohmann::json c = {
      {"name", name},
      {"learning_rate", schedule_ ? schedule_->keras_config() : nlohmann::json(learning_rate_)},
      {"weight_decay", weight_decay_},
      {"clipnorm", opt(clipnorm_)},
      {"clipvalue", opt(clipvalue_)},
      {"global_clipnorm", opt(global_clipnorm_)}};
  if (decay_ > 0) c["decay"] = decay_;
  return c;
}

double Optimizer::learning_rate() const {
  return schedule_ ? schedule_->at(iterations_) : learning_rate_;
}

void Optimizer::set_learning_rate(double lr) {
  if (schedule_)
    throw RunError("the learning rate follows the optimizer's " + schedule_->class_name() +
                   " schedule (optimizer.config.learning_rate) and cannot be set, as Keras "
                   "refuses too: give the optimizer a number to let a callback set it");
  learning_rate_ = lr;
}

double Optimizer::step_learning_rate() const {
  if (schedule_) return schedule_->at(std::max<std::int64_t>(iterations_ - 1, 0));
  if (decay_ <= 0) return learning_rate_;
  const auto before = static_cast<double>(std::max<std::int64_t>(iterations_ - 1, 0));
  return learning_rate_ / (1.0 + decay_ * before);
}

void Optimizer::create_slots(const std::vector<Parameter*>& params) {
  const std::size_t per_param = slot_names().size();
  slots_.clear();
  for (Parameter* p : params) {
    std::vector<Tensor> s;
    for (std::size_t i = 0; i < per_param; ++i) {
      s.emplace_back(p->value.shape());
      s.back().fill(slot_initial_value(i));
    }
    slots_.push_back(std::move(s));
  }
}

void Optimizer::apply(const std::vector<Parameter*>& params) {
  apply(params, backend::cpu_backend());
}

void Optimizer::apply(const std::vector<Parameter*>& params, backend::Backend& backend) {
  if (slots_.size() != params.size()) {
    if (!slots_.empty())
      throw RunError("optimizer " + class_name() + ": parameter list changed between steps");
    create_slots(params);
  }
  ++iterations_;
  std::vector<backend::UpdateTensors> tensors;
  tensors.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i];
    if (p.grad.size() != p.value.size())
      throw RunError("optimizer " + class_name() + ": parameter '" + p.name + "' has no gradient");
    tensors.push_back({&p.value, &p.grad, &slots_[i]});
  }
  backend.optimizer_update(desc(), iterations_, step_learning_rate(), tensors);
}

std::optional<std::size_t> Optimizer::average_slot(const std::vector<Parameter*>& params) const {
  if (!desc().use_ema || iterations_ == 0 || slots_.size() != params.size()) return std::nullopt;
  return static_cast<std::size_t>(backend::math::update_slot_count(desc()));
}

bool Optimizer::use_moving_averages(const std::vector<Parameter*>& params) {
  const std::optional<std::size_t> average = average_slot(params);
  if (!average) return false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (averages_in_weights_)
      slots_[i][*average].copy_from(params[i]->value);
    else
      params[i]->value.copy_from(slots_[i][*average]);
  }
  averages_in_weights_ = false;
  return true;
}

bool Optimizer::swap_moving_averages(const std::vector<Parameter*>& params, bool in_weights) {
  const std::optional<std::size_t> average = average_slot(params);
  if (!average) return false;
  if (in_weights == averages_in_weights_) return averages_in_weights_;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor weights = params[i]->value.clone();
    params[i]->value.copy_from(slots_[i][*average]);
    slots_[i][*average].copy_from(weights);
  }
  averages_in_weights_ = in_weights;
  return averages_in_weights_;
}

float Optimizer::loss_scale_factor() const {
  return loss_scale_ ? static_cast<float>(loss_scale_->scale()) : 1.0f;
}

bool Optimizer::unscale_gradients(Tensor& grads, backend::Backend& backend) {
  if (!loss_scale_) return true;
  // 1 / scale is exact for a power-of-two scale: the unscaled gradients are the bits an
  // unscaled backward pass would have given (short of overflow and subnormals).
  const bool finite =
      backend.scale_checking_finite(grads, static_cast<float>(1.0 / loss_scale_->scale()));
  return loss_scale_->record(finite);
}

std::string Optimizer::keras_class_name() const {
  return loss_scale_ && !loss_scale_->config().factor ? "LossScaleOptimizer" : class_name();
}

nlohmann::json Optimizer::keras_config() const {
  if (!loss_scale_ || loss_scale_->config().factor) return config();  // config() has the factor
  const LossScaleConfig& c = loss_scale_->config();
  nlohmann::json out = {{"name", "loss_scale_optimizer"},
                        {"inner_optimizer", {{"class_name", class_name()}, {"config", config()}}},
                        {"initial_scale", c.initial_scale},
                        {"dynamic_growth_steps", c.growth_steps}};
  if (!c.dynamic) out["dynamic"] = false;  // Keras 2's fixed scale
  return out;
}

}  // namespace tandem
