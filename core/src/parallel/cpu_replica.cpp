#include "parallel/cpu_replica.hpp"

#include "nn/constraint.hpp"
#include "nn/regularizer.hpp"

namespace tandem::detail {

CpuReplica::CpuReplica(Model& model, Optimizer& optimizer, DeviceSpec device)
    : model_(model), optimizer_(optimizer), device_(device) {
  auto params = model_.trainable_parameters();
  std::int64_t total = 0;
  for (Parameter* p : params) total += p->value.size();
  arena_ = Tensor({total});
  std::int64_t offset = 0;
  for (Parameter* p : params) {
    p->grad = Tensor::view(arena_, offset, p->value.shape());
    offset += p->value.size();
  }
}

StepSums CpuReplica::train(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                           float loss_scale, const Objective& objective, const NextRows* /*next*/) {
  const auto& outputs = model_.forward_outputs(x, true, sample_offset);
  model_.enqueue_activity_penalties(*activity_sums_, loss_scale);
  objective.enqueue(backend::cpu_backend(), model_, outputs, y, loss_scale, true, scratch_, *sums_);
  model_.backward_outputs(scratch_.grad_views, [](std::size_t) {});
  return with_penalty(objective.read(*sums_, x.dim(0)),
                      model_.has_activity_regularizers() ? activity_sums_->read()
                                                         : std::vector<double>{});
}

StepSums CpuReplica::evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                              const Objective& objective) {
  const auto& outputs = model_.forward_outputs(x, false, sample_offset);
  model_.enqueue_activity_penalties(*activity_sums_, 0.0f);
  objective.enqueue(backend::cpu_backend(), model_, outputs, y, 1.0f, false, scratch_, *sums_);
  return with_penalty(objective.read(*sums_, x.dim(0)),
                      model_.has_activity_regularizers() ? activity_sums_->read()
                                                         : std::vector<double>{});
}

void CpuReplica::predict(const Tensor& x, std::int64_t sample_offset, float* out) {
  const Tensor& y = model_.forward(x, false, sample_offset);
  if (y.size() > 0) std::copy(y.data(), y.data() + y.size(), out);
}

void CpuReplica::apply_update() {
  // A loss-scaled step: unscaled first (the penalties' gradients are not scaled); skipped when
  // they are not finite.
  if (!optimizer_.unscale_gradients(arena_, backend::cpu_backend())) return;
  nn::add_penalty_gradients(model_);  // Keras' kernel_regularizer and kin
  optimizer_.apply(model_.trainable_parameters());
  nn::apply_constraints(model_);  // Keras' kernel_constraint and kin, after the step
}

StepSums CpuReplica::with_penalty(StepSums sums, const std::vector<double>& activity) {
  sums.loss.sum += nn::weight_penalty(model_, *penalty_sums_) * sums.loss.count;
  for (double p : activity) sums.loss.sum += p;
  return sums;
}

Tensor rows_of(const Tensor& t, std::int64_t offset, std::int64_t n) {
  Shape shape = t.shape();
  const std::int64_t row = shape_size(Shape(shape.begin() + 1, shape.end()));
  shape[0] = n;
  return Tensor::view(t, offset * row, shape);
}

std::unique_ptr<Replica> make_cpu_replica(Model& model, Optimizer& optimizer, DeviceSpec device) {
  return std::make_unique<CpuReplica>(model, optimizer, device);
}

}  // namespace tandem::detail
