// A replica that trains its host model on the CPU: the model's own layers (oneDNN), its
// parameters' gradients bound to one flat arena so the Communicator sums them in one call.
#include "backend/ops.hpp"
#include "nn/constraint.hpp"
#include "nn/regularizer.hpp"
#include "parallel/replica.hpp"

namespace tandem::detail {

namespace {

class CpuReplica : public Replica {
 public:
  CpuReplica(Model& model, Optimizer& optimizer, DeviceSpec device)
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

  DeviceSpec device() const override { return device_; }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return optimizer_; }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Objective& objective, const NextRows* /*next*/) override {
    const auto& outputs = model_.forward_outputs(x, true, sample_offset);
    model_.enqueue_activity_penalties(*activity_sums_, loss_scale);
    objective.enqueue(backend::cpu_backend(), outputs, y, loss_scale, true, scratch_, *sums_);
    model_.backward_outputs(scratch_.grad_views, [](std::size_t) {});
    return with_penalty(objective.read(*sums_, x.dim(0)));
  }

  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                    const Objective& objective) override {
    const auto& outputs = model_.forward_outputs(x, false, sample_offset);
    model_.enqueue_activity_penalties(*activity_sums_, 0.0f);
    objective.enqueue(backend::cpu_backend(), outputs, y, 1.0f, false, scratch_, *sums_);
    return with_penalty(objective.read(*sums_, x.dim(0)));
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    const Tensor& y = model_.forward(x, false, sample_offset);
    if (y.size() > 0) std::copy(y.data(), y.data() + y.size(), out);
  }

  Tensor& gradients() override { return arena_; }
  void apply_update() override {
    nn::add_penalty_gradients(model_);  // Keras' kernel_regularizer and kin
    optimizer_.apply(model_.trainable_parameters());
    nn::apply_constraints(model_);  // Keras' kernel_constraint and kin, after the step
  }
  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

 private:
  // The loss with the weights' penalties (Keras' regularization losses): each row carries it,
  // so the batch mean has it once, however the rows are split. The activity penalties are sums
  // over these rows already.
  StepSums with_penalty(StepSums sums) {
    sums.loss.sum += nn::weight_penalty(model_, *penalty_sums_) * sums.loss.count;
    if (model_.has_activity_regularizers())
      for (double p : activity_sums_->read()) sums.loss.sum += p;
    return sums;
  }

  Model& model_;
  Optimizer& optimizer_;
  DeviceSpec device_;
  Tensor arena_;      // every trainable parameter's gradient, flat
  ObjectiveScratch scratch_;  // the loss gradients of the last train(), and targets apart
  std::unique_ptr<backend::Sums> sums_ = backend::cpu_backend().sums();
  std::unique_ptr<backend::Sums> penalty_sums_ = backend::cpu_backend().sums();
  std::unique_ptr<backend::Sums> activity_sums_ = backend::cpu_backend().sums();
};

}  // namespace

std::unique_ptr<Replica> make_cpu_replica(Model& model, Optimizer& optimizer, DeviceSpec device) {
  return std::make_unique<CpuReplica>(model, optimizer, device);
}

}  // namespace tandem::detail
