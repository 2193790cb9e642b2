#include "parallel/replica_model.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/cpu/parallel.hpp"
#include "backend/kernel_math.hpp"
#include "nn/dtype_policy.hpp"
#include "nn/layer_extensions.hpp"
#include "parallel/abandoned_step.hpp"
#include "parallel/cross_replica_sum.hpp"
#include "parallel/cuda_module.hpp"
#include "parallel/replica.hpp"
#include "tandem/error.hpp"
#include "util/warn_once.hpp"

namespace tandem {

// Persistent worker threads, one per replica. run(job) calls job(i) on worker i for every i and
// returns when all are done, rethrowing the error of the lowest-numbered replica that failed on
// its own (an AbandonedStep only when there is no other). The first failure of a run calls
// on_failure, from the failing worker, so that no replica waits for the failed one.
class ReplicaModel::Workers {
 public:
  Workers(const std::vector<int>& threads_per_worker, std::function<void()> on_failure)
      : on_failure_(std::move(on_failure)) {
    errors_.resize(threads_per_worker.size());
    for (std::size_t i = 0; i < threads_per_worker.size(); ++i)
      threads_.emplace_back([this, i, t = threads_per_worker[i]] { loop(static_cast<int>(i), t); });
  }

  ~Workers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void run(const std::function<void(int)>& job) {
    std::unique_lock lock(mutex_);
    job_ = &job;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    failed_ = false;
    std::exception_ptr cause;
    for (const auto& e : errors_)
      if (e && (!cause || (is_abandoned_step(cause) && !is_abandoned_step(e)))) cause = e;
    std::fill(errors_.begin(), errors_.end(), nullptr);
    if (cause) std::rethrow_exception(cause);
  }

 private:
  void loop(int index, int threads) {
    cpu::set_compute_threads(threads);  // this replica's fair share of the cores
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      try {
        (*job)(index);
      } catch (...) {
        errors_[static_cast<std::size_t>(index)] = std::current_exception();
        signal_failure();
      }
      {
        std::lock_guard lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  // Calls on_failure_ for the run's first failure (outside the lock: it wakes other workers).
  void signal_failure() {
    {
      std::lock_guard lock(mutex_);
      if (failed_) return;
      failed_ = true;
    }
    if (on_failure_) on_failure_();
  }

  const std::function<void()> on_failure_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  bool failed_ = false;  // this run's on_failure_ was called
  const std::function<void(int)>* job_ = nullptr;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

namespace {

std::unique_ptr<Optimizer> clone_optimizer(const Optimizer& o) {
  return make_optimizer(nlohmann::json{{"class_name", o.keras_class_name()},
                                       {"config", o.keras_config()}},
                        "optimizer");
}

// Whether a layer of `model` computes statistics over the global batch (nn/layer_extensions.hpp).
bool wants_cross_replica_sum(Model& model) {
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    if (auto* stats = nn::cross_replica_statistics_of(model.layer(l)))
      if (stats->wants_cross_replica_sum()) return true;
  return false;
}

// Gives every such layer of `model` the sum (empty: none).
void set_cross_replica_sum(Model& model, const backend::SumAcrossReplicas& sum) {
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    if (auto* stats = nn::cross_replica_statistics_of(model.layer(l)))
      stats->set_cross_replica_sum(sum);
}

// Places each layer of a CPU replica's model on the CPU backend of its precision.
void place_on_cpu(Model& model, const std::vector<Precision>& precisions) {
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    model.layer(l).set_backend(backend::cpu_backend(precisions[l]));
}

}  // namespace

double ReplicaStep::bubble() const {
  if (stages.empty() || seconds <= 0) return 0.0;
  double busy = 0;
  for (const StageStep& s : stages) busy += s.seconds;
  return std::clamp(1.0 - busy / (static_cast<double>(stages.size()) * seconds), 0.0, 1.0);
}

void ReplicaModel::check_precision(const DevicePlan& plan, const Model& model,
                                   Precision precision) {
  // CUDA GPUs compute bf16 and fp16 (the CUDA module is built for sm_80 and later); a CPU
  // device needs the CPU backend's support.
  const bool has_cpu = std::any_of(plan.replicas.begin(), plan.replicas.end(),
                                   [](const DeviceSpec& d) { return d.kind == DeviceKind::cpu; });
  // The layers' dtype policies choose the precision where they give one (nn/dtype_policy.hpp).
  std::string policy_layer;
  for (std::size_t i = 0; i < model.layer_count() && policy_layer.empty(); ++i)
    if (!model.layer_dtype_policy(i).empty())
      policy_layer = "layer '" + model.layer(i).name() + "' has the dtype policy '" +
                     model.layer_dtype_policy(i) + "' (";
  for (Precision p : nn::layer_precisions(model, precision)) {
    if (!is_mixed(p) || !has_cpu) continue;
    const std::string why = backend::cpu_precision_unavailable(p);
    if (!why.empty() && !policy_layer.empty())
      throw ConfigError("model", policy_layer + precision_name(p) + "): " + why);
    if (!why.empty()) throw ConfigError("precision", precision_name(p) + ": " + why);
    warn_once(backend::cpu_precision_warning(p));  // checked by `tandem check` and the run
  }
}

namespace {

// Stage s's devices of a plan of pipelines of `stages` each: one per replica, in replica order
// (the whole plan without a pipeline).
DevicePlan stage_plan(const DevicePlan& plan, int stages, int s) {
  if (stages == 1) return plan;
  DevicePlan devices{{}, plan.text + " (stage " + std::to_string(s) + ")"};
  for (std::size_t d = static_cast<std::size_t>(s); d < plan.replicas.size();
       d += static_cast<std::size_t>(stages))
    devices.replicas.push_back(plan.replicas[d]);
  return devices;
}

// The replicas of a plan: one per device, or one per pipeline (its first stage's device).
DevicePlan replica_plan(const DevicePlan& plan, int stages) {
  DevicePlan replicas = stage_plan(plan, stages, 0);
  replicas.text = plan.text;
  return replicas;
}

// Each of `workers` worker threads' fair share of this process's compute threads.
std::vector<int> core_shares(int workers) {
  const int cores = cpu::compute_threads();
  std::vector<int> shares;
  for (int w = 0; w < workers; ++w)
    shares.push_back(std::max(1, cores / workers + (w < cores % workers ? 1 : 0)));
  return shares;
}

}  // namespace

ReplicaModel::ReplicaModel(Model& template_model, Optimizer& optimizer, DevicePlan plan,
                           std::shared_ptr<World> world, Precision precision,
                           std::optional<PipelinePlan> pipeline)
    : template_(template_model),
      optimizer_(optimizer),
      plan_(std::move(plan)),
      precision_(precision),
      pipeline_(std::move(pipeline)),
      world_(world ? std::move(world) : single_process_world()) {
  if (plan_.size() < 1) throw ConfigError("devices", "a device plan needs at least one replica");
  check_precision(plan_, template_, precision_);
  const int stages = pipeline_ ? pipeline_->stage_count() : 1;
  const int replica_count = pipeline_ ? pipeline_replicas(plan_, stages) : plan_.size();
  const DevicePlan replicas = replica_plan(plan_, stages);
  const std::vector<Precision> layer_precisions = nn::layer_precisions(template_, precision_);
  // CUDA plans: the replicas sum their gradients themselves through the stream communicator
  // (a pipeline: one per stage, over the replicas' GPUs of that stage).
  std::vector<StreamCommunicator*> stage_streams;
  if (pipeline_ && !plan_.all_cpu())  // checked before any GPU is touched
    require_device_hand_offs(template_, pipeline_->layout, plan_.text);
  if (pipeline_ && template_.any_output_masked())
    throw ConfigError("pipeline",
                      "the model's outputs carry Keras masks, whose loss is divided by the kept "
                      "steps of the whole batch; a pipeline computes each micro-batch's loss "
                      "before the others' masks are known, so it cannot train this model (run "
                      "it without \"pipeline\")");
  if (!plan_.all_cpu()) {
    for (int s = 0; s < stages; ++s) {
      auto streams = make_stream_communicator(stage_plan(plan_, stages, s), *world_);
      stage_streams.push_back(streams.get());
      if (s == 0 && streams)
        communicator_ = std::move(streams);
      else if (streams)
        stage_communicators_.push_back(std::move(streams));
    }
  }
  StreamCommunicator* const stream_communicator =
      stage_streams.empty() ? nullptr : stage_streams[0];
  if (!communicator_) communicator_ = make_communicator(replicas, world_);
  const detail::CudaModule* cuda = nullptr;
  if (!plan_.all_cpu()) {
    cuda = &detail::cuda_module();
    if (!cuda->api)
      throw ConfigError("devices",
                        "device plan '" + plan_.text + "' needs CUDA, but " + cuda->why_not);
    if (!cuda->api->make_cuda_replica || !cuda->api->make_cuda_pipeline_replica)
      throw ConfigError("devices", "device plan '" + plan_.text +
                                       "' names CUDA devices, but this Tandem's CUDA module was "
                                       "built without the CUDA backend");
  }
  const std::vector<int> stage_threads = core_shares(plan_.size());
  for (int r = 0; r < replica_count; ++r) {
    Model* model = &template_;
    Optimizer* opt = &optimizer_;
    if (r > 0) {
      owned_.push_back(template_.clone());
      owned_optimizers_.push_back(clone_optimizer(optimizer_));
      model = owned_.back().get();
      opt = owned_optimizers_.back().get();
    }
    const DeviceSpec& device = replicas.replicas[static_cast<std::size_t>(r)];
    if (device.kind == DeviceKind::cpu) place_on_cpu(*model, layer_precisions);
    const auto first = plan_.replicas.begin() + static_cast<std::ptrdiff_t>(r) * stages;
    if (pipeline_ && cuda) {
      replicas_.push_back(cuda->api->make_cuda_pipeline_replica(
          *model, *opt, {first, first + stages}, precision_, stage_streams, r, pipeline_->layout,
          pipeline_->microbatches, pipeline_->schedule));
    } else if (pipeline_) {
      replicas_.push_back(detail::make_cpu_pipeline_replica(
          *model, *opt, {first, first + stages},
          {stage_threads.begin() + static_cast<std::ptrdiff_t>(r) * stages,
           stage_threads.begin() + static_cast<std::ptrdiff_t>(r + 1) * stages},
          pipeline_->layout, pipeline_->microbatches, pipeline_->schedule));
    } else {
      replicas_.push_back(device.kind == DeviceKind::cpu
                              ? detail::make_cpu_replica(*model, *opt, device)
                              : cuda->api->make_cuda_replica(*model, *opt, device, precision_,
                                                             stream_communicator, r));
    }
  }
  shard_sums_.resize(replicas_.size());
  last_step_.resize(replicas_.size());
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    last_step_[r].device = replicas.replicas[r];
    last_step_[r].rank = world_->rank();
  }
  all_steps_ = last_step_;
  rank_plans_ = world_->all_gather_bytes(plan_.text);
  const double mine = static_cast<double>(size());
  for (double n : world_->all_gather(&mine, 1)) total_size_ += static_cast<int>(n);
  share_cross_replica_sums();
  broadcast_from_template();
  if (replicas_.size() > 1)
    workers_ = std::make_unique<Workers>(core_shares(size()), [this] { abandon_step(); });
}

// Layers whose statistics span the global batch (synchronized BatchNormalization) share one
// CrossReplicaSum over every replica of every rank — one per pipeline stage, whose workers
// reach their layers' sums independently of the other stages'.
void ReplicaModel::share_cross_replica_sums() {
  if (size() == 1 && world_->size() == 1) return;
  // The kept steps of the outputs whose losses weigh them (a Keras mask, a loss's ignored
  // class), counted over the global batch (nn/objective.hpp): unused by other objectives.
  {
    auto sum = std::make_shared<CrossReplicaSum>(size(), world_);
    cross_replica_sums_.push_back(sum);
    for (int r = 0; r < size(); ++r)
      for (Model* m : replicas_[static_cast<std::size_t>(r)]->training_models())
        m->set_mask_count_sum(
            [sum, r](double* values, std::size_t count) { sum->sum(r, values, count); });
  }
  if (!wants_cross_replica_sum(template_)) return;
  const PipelineLayout layout =
      pipeline_ ? pipeline_->layout : PipelineLayout::whole(template_);
  for (const auto& stage_layers : layout.layers) {
    auto sum = std::make_shared<CrossReplicaSum>(size(), world_);
    cross_replica_sums_.push_back(sum);
    for (int r = 0; r < size(); ++r)
      for (Model* m : replicas_[static_cast<std::size_t>(r)]->training_models())
        for (std::size_t l : stage_layers)
          if (auto* stats = nn::cross_replica_statistics_of(m->layer(l)))
            stats->set_cross_replica_sum(
                [sum, r](double* values, std::size_t count) { sum->sum(r, values, count); });
  }
}

void ReplicaModel::abandon_step() {
  for (const auto& sum : cross_replica_sums_) sum->abandon();
  communicator_->abort();
  for (const auto& stage : stage_communicators_) stage->abort();
}

ReplicaModel::~ReplicaModel() {
  // The template outlives this meta-model: leave its layers without the shared sums.
  set_cross_replica_sum(template_, {});
  template_.set_mask_count_sum({});
}

std::vector<std::int64_t> ReplicaModel::split(std::int64_t batch, int n) {
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < n; ++r) sizes.push_back(shard_of(batch, n, r).size);
  return sizes;
}

template <class F>
void ReplicaModel::on_replicas(F&& f) {
  if (!workers_) {
    f(0);
    return;
  }
  const std::function<void(int)> job = std::forward<F>(f);
  try {
    workers_->run(job);
  } catch (...) {
    // Every worker is done: the abandoned sums may start over (a caller may go on, e.g. with
    // evaluate()); an aborted NCCL communicator cannot.
    for (const auto& sum : cross_replica_sums_) sum->reset();
    throw;
  }
}

std::string ReplicaModel::plan_text() const {
  if (world_->size() == 1) return plan_.text;
  bool same = true;
  for (const auto& p : rank_plans_) same = same && p == plan_.text;
  if (same) return std::to_string(world_->size()) + "x(" + plan_.text + ")";
  std::string text;
  for (std::size_t r = 0; r < rank_plans_.size(); ++r)
    text += (r ? "; " : "") + std::to_string(r) + ":" + rank_plans_[r];
  return std::to_string(world_->size()) + " ranks (" + text + ")";
}

// This process's sums (replicas in order), then every rank's in rank order: the same totals, to
// the bit, on every rank. With `with_steps`, also every rank's per-replica step facts.
StepSums ReplicaModel::combine(std::size_t metric_count, bool with_steps) {
  StepSums local;
  local.metrics.resize(metric_count);
  for (const auto& s : shard_sums_) local.add(s);
  if (world_->size() == 1) {
    if (with_steps) all_steps_ = last_step_;
    return local;
  }
  std::vector<double> packed{local.loss.sum, local.loss.count};
  for (const auto& m : local.metrics) {
    packed.push_back(m.sum);
    packed.push_back(m.count);
  }
  if (with_steps)
    for (const auto& step : last_step_) {
      packed.push_back(static_cast<double>(step.samples));
      packed.push_back(step.seconds);
    }
  const auto ranks = world_->all_gather_bytes(
      std::string(reinterpret_cast<const char*>(packed.data()), packed.size() * sizeof(double)));
  StepSums total;
  total.metrics.resize(metric_count);
  if (with_steps) all_steps_.clear();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::vector<double> v(ranks[r].size() / sizeof(double));
    std::memcpy(v.data(), ranks[r].data(), v.size() * sizeof(double));
    total.loss.add({v[0], v[1]});
    for (std::size_t m = 0; m < metric_count; ++m)
      total.metrics[m].add({v[2 + 2 * m], v[3 + 2 * m]});
    if (!with_steps) continue;
    std::size_t k = 2 + 2 * metric_count;
    for (std::size_t i = 0; k + 1 < v.size(); ++i, k += 2) {
      ReplicaStep step;
      step.rank = static_cast<int>(r);
      step.device = i < last_step_.size() ? last_step_[i].device : last_step_.back().device;
      step.samples = static_cast<std::int64_t>(v[k]);
      step.seconds = v[k + 1];
      if (static_cast<int>(r) == world_->rank() && i < last_step_.size())
        step.stages = last_step_[i].stages;
      all_steps_.push_back(step);
    }
  }
  return total;
}

StepSums ReplicaModel::forward_backward(const Batch& batch, const Loss& loss,
                                        const std::vector<std::unique_ptr<Metric>>& metrics,
                                        const Batch* next) {
  return forward_backward(batch, Objective::borrowing(loss, metrics, template_.output_masked(0)),
                          next);
}

StepSums ReplicaModel::forward_backward(const Batch& batch, const Objective& objective,
                                        const Batch* next) {
  send_lent_template(true);
  set_penalty_batch_size(batch.whole_size());
  const std::int64_t total = batch.size();
  const auto sizes = split(total, size());
  std::vector<std::int64_t> offsets(sizes.size(), 0);
  offsets[0] = batch.global_offset;  // a sample's place in the global batch (dropout masks)
  for (std::size_t r = 1; r < sizes.size(); ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  // Each replica's rows of the next batch, split the same way.
  std::vector<detail::NextRows> ahead;
  if (next) {
    std::int64_t at = 0;
    for (std::int64_t n : split(next->size(), size())) {
      ahead.push_back({detail::rows_of(next->x, at, n), detail::rows_of(next->y, at, n)});
      at += n;
    }
  }
  // The gradient of the mean over the global batch, whichever process holds which rows.
  // Times the loss scale of a loss-scaled optimizer (optim/loss_scale.hpp): a power of two
  // keeps the product exact.
  const float scale = 1.0f / static_cast<float>(std::max<std::int64_t>(batch.whole_size(), 1)) *
                      optimizer_.loss_scale_factor();
  on_replicas([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t local = offsets[i] - batch.global_offset;
    shard_sums_[i] =
        replicas_[i]->train(detail::rows_of(batch.x, local, sizes[i]), detail::rows_of(batch.y, local, sizes[i]),
                            offsets[i], scale, objective, next ? &ahead[i] : nullptr);
    last_step_[i].samples = sizes[i];
    last_step_[i].seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    last_step_[i].stages = replicas_[i]->last_stages();
  });
  return combine(objective.part_count(), true);
}

void ReplicaModel::apply_update() {
  std::vector<Tensor*> buffers;
  for (auto& r : replicas_) buffers.push_back(&r->gradients());
  const auto count = static_cast<std::size_t>(buffers[0]->size());
  if (count > 0 && !replicas_[0]->sums_gradients()) {
    // Inside the process first, then across processes (hierarchical; host memory: the
    // communicator checked, and only CPU plans get here with several ranks).
    communicator_->all_reduce_sum(buffers);
    if (world_->size() > 1 && !communicator_->spans_world()) {
      world_->all_reduce_sum(buffers[0]->data(), count);
      for (std::size_t r = 1; r < buffers.size(); ++r)
        std::memcpy(buffers[r]->data(), buffers[0]->data(), count * sizeof(float));
    }
  }
  on_replicas([&](int r) { replicas_[static_cast<std::size_t>(r)]->apply_update(); });
}

StepSums ReplicaModel::evaluate(const Batch& batch, const Loss& loss,
                                const std::vector<std::unique_ptr<Metric>>& metrics) {
  return evaluate(batch, Objective::borrowing(loss, metrics, template_.output_masked(0)));
}

StepSums ReplicaModel::evaluate(const Batch& batch, const Objective& objective) {
  send_lent_template(true);
  set_penalty_batch_size(batch.whole_size());
  const auto sizes = split(batch.size(), size());
  std::vector<std::int64_t> offsets(sizes.size(), 0);
  for (std::size_t r = 1; r < sizes.size(); ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  on_replicas([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    shard_sums_[i] =
        replicas_[i]->evaluate(detail::rows_of(batch.x, offsets[i], sizes[i]),
                               detail::rows_of(batch.y, offsets[i], sizes[i]), offsets[i], objective);
  });
  return combine(objective.part_count(), false);
}

void ReplicaModel::broadcast_from_rank0() {
  if (world_->size() == 1) return;
  sync_template();
  for (Parameter* p : template_.parameters())
    world_->broadcast(p->value.data(), static_cast<std::size_t>(p->value.size()) * sizeof(float),
                      0);
  template_lent_ = false;  // every rank holds rank 0's template now
  double lr = optimizer_.learning_rate();
  std::int64_t iterations = optimizer_.iterations();
  std::uint64_t slotted = optimizer_.slotted_params();
  world_->broadcast(&lr, sizeof lr, 0);
  world_->broadcast(&iterations, sizeof iterations, 0);
  world_->broadcast(&slotted, sizeof slotted, 0);
  std::uint8_t averages_in_weights = optimizer_.averages_in_weights() ? 1 : 0;
  world_->broadcast(&averages_in_weights, sizeof averages_in_weights, 0);
  if (!optimizer_.schedule()) optimizer_.set_learning_rate(lr);  // else iterations give it
  optimizer_.set_iterations(iterations);
  optimizer_.set_averages_in_weights(averages_in_weights != 0);
  if (LossScale* scale = optimizer_.loss_scale()) {
    double value = scale->scale();
    std::int64_t counts[2] = {scale->good_steps(), scale->skipped_steps()};
    world_->broadcast(&value, sizeof value, 0);
    world_->broadcast(counts, sizeof counts, 0);
    scale->restore({{"scale", value}, {"good_steps", counts[0]}, {"skipped_steps", counts[1]}},
                   "rank 0's loss scale");
  }
  auto params = template_.trainable_parameters();
  if (slotted == params.size()) {
    if (optimizer_.slotted_params() != params.size()) optimizer_.create_slots(params);
    for (std::size_t p = 0; p < params.size(); ++p)
      for (Tensor& slot : optimizer_.slots(p))
        world_->broadcast(slot.data(), static_cast<std::size_t>(slot.size()) * sizeof(float), 0);
  }
  // The layers' random streams (Dropout's): a backup restored on rank 0 holds rank 0's.
  for (std::size_t li = 0; li < template_.layer_count(); ++li) {
    Layer& layer = template_.layer(li);
    std::vector<std::uint64_t> state = layer.random_state();
    if (state.empty()) continue;
    world_->broadcast(state.data(), state.size() * sizeof(std::uint64_t), 0);
    layer.set_random_state(state);
  }
  broadcast_from_template();
}

void ReplicaModel::predict(const Tensor& x, float* out) {
  send_lent_template(false);  // each rank predicts with its own replicas
  const auto sizes = split(x.rank() > 0 ? x.dim(0) : 0, size());
  const std::int64_t out_row = shape_size(template_.output_shape());
  std::int64_t offset = 0;
  std::vector<std::int64_t> offsets;
  for (auto n : sizes) {
    offsets.push_back(offset);
    offset += n;
  }
  on_replicas([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    replicas_[i]->predict(detail::rows_of(x, offsets[i], sizes[i]), offsets[i], out + offsets[i] * out_row);
  });
}

void ReplicaModel::set_learning_rate(double lr) {
  for (auto& r : replicas_) r->set_learning_rate(lr);
}

void ReplicaModel::broadcast_from_template() {
  auto template_params = template_.trainable_parameters();
  for (std::size_t r = 1; r < replicas_.size(); ++r) {
    Model& m = replicas_[r]->model();
    m.copy_weights_from(template_);
    for (std::size_t l = 0; l < m.layer_count(); ++l)
      m.layer(l).set_random_state(template_.layer(l).random_state());
    Optimizer& o = replicas_[r]->optimizer();
    if (!o.schedule()) o.set_learning_rate(optimizer_.learning_rate());
    o.set_iterations(optimizer_.iterations());
    if (optimizer_.loss_scale()) *o.loss_scale() = *optimizer_.loss_scale();  // same config
    if (optimizer_.slotted_params() == template_params.size()) {
      auto params = m.trainable_parameters();
      o.create_slots(params);
      for (std::size_t p = 0; p < params.size(); ++p)
        for (std::size_t s = 0; s < optimizer_.slots(p).size(); ++s)
          o.slots(p)[s].copy_from(optimizer_.slots(p)[s]);
    }
  }
  for (auto& r : replicas_) r->push();
  replicas_stale_ = false;
}

void ReplicaModel::set_penalty_batch_size(std::int64_t rows) {
  for (auto& r : replicas_) {
    r->model().set_penalty_batch_size(rows);
    for (Model* m : r->training_models()) m->set_penalty_batch_size(rows);
  }
}

void ReplicaModel::send_lent_template(bool across_ranks) {
  if (across_ranks && world_->size() > 1) {
    const double mine = template_lent_ ? 1.0 : 0.0;
    const std::vector<double> all = world_->all_gather(&mine, 1);
    if (std::find(all.begin(), all.end(), 1.0) != all.end()) broadcast_from_rank0();
  }
  if (replicas_stale_) broadcast_from_template();
}

void ReplicaModel::sync_template() {
  replicas_[0]->pull();
}

bool ReplicaModel::use_moving_averages() {
  send_lent_template(true);  // what a callback changed holds on every replica and rank first
  sync_template();
  if (!optimizer_.use_moving_averages(template_.trainable_parameters())) return false;
  broadcast_from_template();
  return true;
}

bool ReplicaModel::keeps_moving_averages() const {
  return optimizer_.desc().use_ema;
}

bool ReplicaModel::swap_moving_averages(bool in_weights) {
  sync_template();
  const bool before = optimizer_.averages_in_weights();
  const bool after = optimizer_.swap_moving_averages(template_.trainable_parameters(), in_weights);
  // Every replica and rank takes a swap before its next step (none happened: no averages yet).
  if (after != before) template_lent_ = replicas_stale_ = true;
  return after;
}

Model& ReplicaModel::template_model() {
  sync_template();
  return template_;
}

Model& ReplicaModel::lend_template() {
  sync_template();
  template_lent_ = replicas_stale_ = true;
  return template_;
}

Optimizer& ReplicaModel::optimizer() {
  sync_template();
  return optimizer_;
}

Model& ReplicaModel::replica(int i) {
  send_lent_template(false);
  auto& r = *replicas_.at(static_cast<std::size_t>(i));
  r.pull();
  return r.model();
}

}  // namespace tandem
