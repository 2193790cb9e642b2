// Private: one replica of the meta-model — a full copy of the model and its optimizer state on
// one device, trained on its shard of each batch (replica_model.hpp).
//
// Every replica has a *host model* and a host optimizer: a CPU replica trains them directly; a
// device replica (the CUDA module's) trains a copy in device memory and mirrors it into them on
// pull() — weights, optimizer state, random state — and takes them back on push() after someone
// changed them (a checkpoint loaded, a callback restored weights). For replica 0 the host model
// is the template itself and the host optimizer the run's, so the template is current after
// pull() (contract 2).
//
// Ownership: the ReplicaModel owns its replicas; a replica borrows or owns its host model and
// optimizer (replica 0 borrows the template's). Thread-safety: one thread at a time — the
// replica's worker thread during a step, the driving thread otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tandem/device_plan.hpp"
#include "nn/objective.hpp"
#include "tandem/model.hpp"
#include "optim/optimizer.hpp"
#include "parallel/pipeline_layout.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/tensor.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::detail {

/// This replica's rows of the batch the next train() will get, when the caller knows them. The
/// caller promises their contents stay unchanged until then (a device replica copies them to the
/// device while the current step runs, and keeps the copy when they are the rows it trains now).
struct NextRows {
  Tensor x;
  Tensor y;
};

class Replica {
 public:
  virtual ~Replica() = default;

  virtual DeviceSpec device() const = 0;
  /// The host model and optimizer (see above). Current only after pull().
  virtual Model& model() = 0;
  virtual Optimizer& optimizer() = 0;

  /// Forward, loss and backward on `x`/`y` (host tensors, this replica's rows, the first at
  /// `sample_offset` of the global batch); the loss gradient is scaled by `loss_scale`. Returns
  /// the objective's sums; the gradients wait in gradients() until apply_update() (summed
  /// across replicas already when sums_gradients()). `next`: see NextRows; may be null.
  virtual StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                         float loss_scale, const Objective& objective, const NextRows* next) = 0;
  /// The objective's sums in inference mode.
  virtual StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                            const Objective& objective) = 0;
  /// Inference outputs for `x`, written to `out` (x.dim(0) rows of the output size).
  virtual void predict(const Tensor& x, std::int64_t sample_offset, float* out) = 0;

  /// Every trainable parameter's gradient of the last train(), flat in trainable_parameters()
  /// order, on the replica's device (what the plan's Communicator sums). Owned by the replica.
  virtual Tensor& gradients() = 0;
  /// True when train() itself sums the gradients across every replica of the plan (and every
  /// rank): a CUDA replica reducing through NCCL in buckets while its backward pass still runs.
  /// The ReplicaModel then goes straight to apply_update().
  virtual bool sums_gradients() const { return false; }
  /// The optimizer step with the (summed) gradients.
  virtual void apply_update() = 0;
  virtual void set_learning_rate(double lr) = 0;

  /// A pipeline replica's stages in the last train() (ReplicaStep::stages); empty otherwise.
  virtual std::vector<StageStep> last_stages() const { return {}; }
  /// The models whose layers compute train(): the host model, or a pipeline's micro-batch
  /// copies (synchronized BatchNormalization is given its sums there).
  virtual std::vector<Model*> training_models() { return {&model()}; }

  /// Device state into the host model and optimizer; nothing to do when they are current.
  virtual void pull() {}
  /// The host model's weights and random state and the host optimizer's state (learning rate,
  /// iterations, slots) to the device.
  virtual void push() {}
};

/// A replica that trains its host model on the CPU. Borrows `model` and `optimizer`. Ignores
/// NextRows: its batches are read where they are.
std::unique_ptr<Replica> make_cpu_replica(Model& model, Optimizer& optimizer, DeviceSpec device);

/// A CPU replica whose train() runs `model` as a pipeline (docs/pipeline.md): `layout`'s stages
/// on one worker thread each (stage s on devices[s] with threads[s] compute threads), the shard
/// cut into `microbatches` that flow through them in `schedule`'s order, their gradients summed
/// in micro-batch order. evaluate() and predict() run the whole model on the calling thread.
/// Borrows `model` and `optimizer`.
std::unique_ptr<Replica> make_cpu_pipeline_replica(Model& model, Optimizer& optimizer,
                                                   std::vector<DeviceSpec> devices,
                                                   std::vector<int> threads, PipelineLayout layout,
                                                   int microbatches, PipelineSchedule schedule);

/// Rows [offset, offset + n) of a batch tensor, without copying.
Tensor rows_of(const Tensor& t, std::int64_t offset, std::int64_t n);

}  // namespace tandem::detail

TANDEM_INTERNAL_API_END
