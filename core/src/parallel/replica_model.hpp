// ReplicaModel: the meta-model — one template, N replicas on N devices (docs/design.md
// contracts 1-2).
//
// Every replica holds a full copy of the weights and its own optimizer state. A train step
// splits the global batch (the first B mod N replicas take one more sample), runs forward and
// backward on all replicas at once (one worker thread per replica, each with its fair share of
// the cores), sums the gradients in replica order through the Communicator — each replica's
// loss gradient is scaled by 1/B, so the sum is the gradient of the mean over the whole batch —
// and applies the same optimizer update on every replica. On a CPU plan replica 0 *is* the
// template, so the template is current at every moment. On a CUDA plan every replica trains a
// copy in its GPU's memory (the CUDA module's replicas); template_model(), optimizer() and
// replica() copy the device state back to the host when it changed since (sync_template()), and
// broadcast_from_template() sends the host state to every device.
//
// Across processes (an MPI job, docs/design.md contract 8) every rank runs a ReplicaModel on its
// shard of the global batch: the loss gradient is scaled by 1/(global batch), gradients are summed
// inside the process first and then across ranks (World::all_reduce_sum, rank order), and loss
// and metric sums are gathered so every rank sees the logs of the whole batch.
//
// Ownership: borrows the template and its optimizer (they must outlive the ReplicaModel); owns
// the other replicas, their optimizers and the worker threads; shares the World. One thread
// drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "parallel/communicator.hpp"
#include "data/data_loader.hpp"
#include "tandem/device_plan.hpp"
#include "nn/loss.hpp"
#include "nn/metric.hpp"
#include "nn/objective.hpp"
#include "tandem/model.hpp"
#include "optim/optimizer.hpp"
#include "parallel/pipeline_layout.hpp"
#include "util/internal_api.hpp"
#include "util/precision.hpp"
#include "parallel/world.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class CrossReplicaSum;

namespace detail {
class Replica;
}

/// One stage of a pipeline replica in the last step (parallel/pipeline_layout.hpp).
struct StageStep {
  DeviceSpec device;
  std::vector<std::size_t> layers;  // the template's layers it computes
  std::int64_t parameters = 0;
  double seconds = 0;  // time its worker computed (the rest of the step it waited)
};

/// Per-replica facts of the last step (the meta view of callbacks and replica_stats events).
struct ReplicaStep {
  int rank = 0;  // the process (MPI rank) it runs in
  DeviceSpec device;  // a pipeline's first stage's
  std::int64_t samples = 0;
  double seconds = 0;  // forward + backward of this replica
  std::vector<StageStep> stages;  // a pipeline replica's stages; empty for one device
  /// The fraction of the step a pipeline's workers waited: 1 - Σ stage seconds / (S · seconds).
  double bubble() const;
};

class ReplicaModel {
 public:
  /// `precision` is the run's (util/precision.hpp): CPU replicas compute each layer in
  /// nn::layer_precisions (the bf16 CPU backend for bf16), CUDA replicas their matrix products.
  /// Throws ConfigError when the plan's devices cannot train this model (no CUDA module, a layer
  /// without a CUDA implementation, a precision the devices lack: check_precision).
  /// With `pipeline` (parallel/pipeline_layout.hpp), the plan's devices are pipelines of its
  /// stage count, each a replica (pipeline_replicas() checks the plan; CPU only for now).
  ReplicaModel(Model& template_model, Optimizer& optimizer, DevicePlan plan,
               std::shared_ptr<World> world = single_process_world(),
               Precision precision = Precision::fp32,
               std::optional<PipelinePlan> pipeline = std::nullopt);
  ~ReplicaModel();
  ReplicaModel(const ReplicaModel&) = delete;
  ReplicaModel& operator=(const ReplicaModel&) = delete;

  /// The pipeline each replica runs, when there is one.
  const std::optional<PipelinePlan>& pipeline() const { return pipeline_; }
  /// Replicas in this process (pipelines, when the model runs in stages).
  int size() const { return static_cast<int>(replicas_.size()); }
  /// Replicas of every rank of the run (size() in one process).
  int total_size() const { return total_size_; }
  const DevicePlan& plan() const { return plan_; }
  Precision precision() const { return precision_; }
  /// Throws ConfigError at "precision" when a device of `plan` cannot compute `model`'s layers
  /// in `precision` (nn::layer_precisions): a CPU without AVX-512 BF16 for bf16, fp16 on a CPU.
  /// CUDA devices compute every precision. Logs, once per process, a warning when a CPU device
  /// computes bf16 slower than fp32 (backend::cpu_precision_warning). Any thread.
  static void check_precision(const DevicePlan& plan, const Model& model, Precision precision);
  World& world() const { return *world_; }
  /// The plan as checkpoints record it: the plan itself in one process, "P×(plan)" across P.
  std::string plan_text() const;
  const Communicator& communicator() const { return *communicator_; }
  /// Samples per replica for a global batch of `batch`: the first batch % n take one more.
  static std::vector<std::int64_t> split(std::int64_t batch, int n);

  /// The template, current (contract 2), for the engine's own reads and for code that sends
  /// what it changes itself (load weights, then broadcast_from_template()).
  Model& template_model();
  /// The template, current, lent to code that may change it without saying so (a callback's
  /// hook, through CallbackContext::model() or its ModelView): whatever it changes reaches
  /// every replica, and with several ranks rank 0's template reaches every rank, before the
  /// next forward_backward(), evaluate() or predict() (send_lent_template()). The reference is
  /// the template's; it stays valid as long as the template.
  Model& lend_template();
  /// Replica 0's optimizer, current: the one checkpoints save.
  Optimizer& optimizer();
  /// Replica i's host model, current (replica 0's is the template; a lent template is sent
  /// to the replicas first).
  Model& replica(int i);

  /// Forward, loss and backward on every replica for its share of the batch (this process's
  /// shard of the global batch); returns the sums over the whole global batch, the same on every
  /// rank. Gradients wait in each replica until apply_update() (CUDA replicas with NCCL sum them
  /// across replicas during the backward pass already).
  ///
  /// `next`, when the caller knows it: the batch the following forward_backward() will train.
  /// GPU replicas copy it to the device while this step computes, so the copy costs no step
  /// time; when `next` is `batch` itself (the same tensors), the device copy is kept and nothing
  /// is copied again. The caller promises that next's tensors do not change until that step;
  /// next may be anything else, or null, at no cost but the copy.
  StepSums forward_backward(const Batch& batch, const Objective& objective,
                            const Batch* next = nullptr);
  /// The same for a model with one output: its loss and metrics.
  StepSums forward_backward(const Batch& batch, const Loss& loss,
                            const std::vector<std::unique_ptr<Metric>>& metrics,
                            const Batch* next = nullptr);
  /// Sums the gradients across replicas and ranks (unless the replicas already did during
  /// forward_backward) and applies the optimizer on every replica.
  void apply_update();
  /// Rank 0's weights, optimizer state, learning rate and layers' random streams to every rank
  /// (after a callback on rank 0 changed them, e.g. restored a backup). Collective; nothing to
  /// do in one process.
  void broadcast_from_rank0();
  /// Loss and metrics of the batch without training (inference mode).
  StepSums evaluate(const Batch& batch, const Objective& objective);
  StepSums evaluate(const Batch& batch, const Loss& loss,
                    const std::vector<std::unique_ptr<Metric>>& metrics);
  /// Outputs for x, gathered in order into `out` (rows of the model's output size).
  void predict(const Tensor& x, float* out);

  void set_learning_rate(double lr);
  /// The current learning rate (without copying any device state back).
  double learning_rate() const { return optimizer_.learning_rate(); }
  /// The optimizer's loss scale (null when it is not loss-scaled), as of the last step: kept on
  /// the host by every replica, so reading it copies no device state back.
  const LossScale* loss_scale() const { return optimizer_.loss_scale(); }
  /// Copies the template's weights and replica 0's optimizer state to every other replica
  /// (after loading weights or resuming), and has every replica take its host model afresh
  /// (Replica::push()): what a lent template's borrower changed has reached them (the other
  /// ranks still wait for the next forward_backward() or evaluate()).
  void broadcast_from_template();
  /// Replica 0's weights and optimizer state into the template and optimizer() when they live
  /// on a device and changed since the last sync.
  void sync_template();
  /// Keras' finalize_variable_values: with the optimizer's use_ema, the trainable weights of the
  /// template and of every replica take their moving averages (Optimizer::use_moving_averages).
  /// Returns whether they did. Collective across ranks (each averages its own, equal, state).
  bool use_moving_averages();
  /// Keras 3's SwapEMAWeights: the trainable weights of the template and of every replica
  /// swap places with the optimizer's moving averages (in_weights true), or back (false);
  /// Optimizer::swap_moving_averages. Returns whether the averages are in the weights after.
  /// Called between steps on the thread that drives the model; the other ranks take rank 0's
  /// state at the next collective call, as from any callback's change.
  bool swap_moving_averages(bool in_weights);
  /// Whether the optimizer keeps moving averages (its use_ema), and whether they are in the
  /// weights now (swap_moving_averages; a host flag: no device state is read).
  bool keeps_moving_averages() const;
  bool averages_in_weights() const { return optimizer_.averages_in_weights(); }

  /// The last step of every replica of every rank, in rank order.
  const std::vector<ReplicaStep>& last_step() const { return all_steps_; }

 private:
  class Workers;
  template <class F>
  void on_replicas(F&& f);
  StepSums combine(std::size_t metric_count, bool with_steps);
  void share_cross_replica_sums();
  // A replica failed during a step: releases the others from every sum they wait on in it (from
  // the worker that caught the failure). A pipeline replica's stages meet the other pipelines'
  // in step order, so its failure reaches its worker without waiting on them (pipeline_test).
  void abandon_step();
  // What a lent template's borrower changed (lend_template()), to every replica of this
  // process, and `across_ranks` (collective: every rank calls it at the same point), rank 0's
  // template to every rank when any rank lent its template.
  void send_lent_template(bool across_ranks);
  // The global batch of the coming step, to every model a replica computes with
  // (Model::set_penalty_batch_size: Keras 3's activity penalties).
  void set_penalty_batch_size(std::int64_t rows);

  Model& template_;
  Optimizer& optimizer_;
  DevicePlan plan_;
  Precision precision_;
  std::optional<PipelinePlan> pipeline_;
  std::unique_ptr<Communicator> communicator_;
  // A CUDA pipeline's: per stage after the first, the replicas' sum of that stage (the first
  // stage's is communicator_); null where there is nothing to sum.
  std::vector<std::unique_ptr<StreamCommunicator>> stage_communicators_;
  // Synchronized BatchNormalization's sums, one per pipeline stage (empty: nothing to sum).
  std::vector<std::shared_ptr<CrossReplicaSum>> cross_replica_sums_;
  std::vector<std::unique_ptr<Model>> owned_;  // host models of replicas 1..N-1
  std::vector<std::unique_ptr<Optimizer>> owned_optimizers_;
  std::vector<std::unique_ptr<detail::Replica>> replicas_;  // [0] holds the template
  std::vector<StepSums> shard_sums_;
  std::vector<ReplicaStep> last_step_;  // this process's replicas
  std::vector<ReplicaStep> all_steps_;  // every rank's
  int total_size_ = 0;                  // replicas of every rank
  std::shared_ptr<World> world_;
  std::vector<std::string> rank_plans_;  // every rank's plan text
  std::unique_ptr<Workers> workers_;     // none when there is one replica
  // lend_template() since the last broadcast_from_rank0() (what the ranks must agree on), and
  // since the last broadcast_from_template() (what this process's replicas have not seen).
  bool template_lent_ = false;
  bool replicas_stale_ = false;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
