// CpuReplica: a replica that trains its host model on the CPU — the model's own layers (oneDNN),
// its parameters' gradients bound to one flat arena so the Communicator sums them in one call.
// The pipeline replica (pipeline_replica.cpp) is one, whose train() runs the model in stages.
//
// Ownership: borrows the model and optimizer (they outlive it). One thread at a time.
#pragma once

#include <memory>

#include "backend/ops.hpp"
#include "parallel/replica.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

class CpuReplica : public Replica {
 public:
  CpuReplica(Model& model, Optimizer& optimizer, DeviceSpec device);

  DeviceSpec device() const override { return device_; }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return optimizer_; }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Objective& objective, const NextRows* next) override;
  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                    const Objective& objective) override;
  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override;

  Tensor& gradients() override { return arena_; }
  void apply_update() override;
  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

 protected:
  // The loss with the weights' penalties (Keras' regularization losses): each row carries it,
  // so the batch mean has it once, however the rows are split. `activity` holds the activity
  // penalties summed over these rows (Model::enqueue_activity_penalties), when any.
  StepSums with_penalty(StepSums sums, const std::vector<double>& activity);

  Model& model_;
  Optimizer& optimizer_;
  DeviceSpec device_;
  Tensor arena_;  // every trainable parameter's gradient, flat, in trainable_parameters() order

 private:
  ObjectiveScratch scratch_;  // the loss gradients of the last train(), and targets apart
  std::unique_ptr<backend::Sums> sums_ = backend::cpu_backend().sums();
  std::unique_ptr<backend::Sums> penalty_sums_ = backend::cpu_backend().sums();
  std::unique_ptr<backend::Sums> activity_sums_ = backend::cpu_backend().sums();
};

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
