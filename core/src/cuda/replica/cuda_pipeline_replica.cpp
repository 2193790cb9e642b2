// The CUDA pipeline replica (parallel/replica.hpp, docs/pipeline.md): one replica of the
// meta-model whose layers are cut into stages, stage s on GPU devices[s] (pipeline_stage.hpp),
// its shard of each batch cut into micro-batches that flow through the stages in the schedule's
// order (parallel/pipeline_scheduler.hpp), one worker thread per stage driving its GPU.
//
// As in the CPU pipeline, every micro-batch in flight runs in a slot: a copy of the host model
// whose layers compute on their stage's backend, whose weights are views into the stage's flat
// device parameters (one "owner" copy holds them: the optimizer updates it) and whose gradients
// go to the stage's scratch; after each backward the stage adds the scratch into its gradients,
// in micro-batch order, and after the last one sums them across the replicas' same stage (that
// stage's communicator). Tensors cross a stage boundary as device-to-device copies the
// receiving stage pulls (HandOff). Every micro-batch draws its Dropout masks as the whole
// batch's forward would for its rows (contract 1): each stage resets its layers' counters to the
// step's before every micro-batch. BatchNormalization's moving statistics move once a step, as on
// the CPU (parallel/pipeline_moving_state.hpp): each slot holds its own copy on its stage's GPU.
//
// The host model and optimizer are a mirror (as CudaReplica's): pull() copies every stage's state
// back. Ownership: owns its stages, slots and scheduler; borrows the host model, optimizer and
// communicators. Thread-safety: one thread at a time, the stage workers inside train().
#include <cuda_runtime_api.h>

#include <algorithm>

#include "backend/kernel_math.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/replica/host_copies.hpp"
#include "cuda/replica/pipeline_stage.hpp"
#include "cuda/replica/replica_device.hpp"
#include "nn/constraint.hpp"
#include "nn/dtype_policy.hpp"
#include "nn/layer_extensions.hpp"
#include "nn/regularizer.hpp"
#include "optim/loss_scale.hpp"
#include "parallel/cuda_module_api.hpp"
#include "parallel/pipeline_moving_state.hpp"
#include "parallel/pipeline_scheduler.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

using cuda::use_device;

void record(const cuda::CudaEvent& event, const cuda::CudaStream& stream) {
  cuda::check(cudaEventRecord(event.get(), stream.get()), "cudaEventRecord");
}

void wait(const cuda::CudaStream& stream, const cuda::CudaEvent& event) {
  cuda::check(cudaStreamWaitEvent(stream.get(), event.get(), 0), "cudaStreamWaitEvent");
}

// Stage of every layer.
std::vector<std::size_t> stage_of_layers(const PipelineLayout& layout, std::size_t layers) {
  std::vector<std::size_t> stage(layers, 0);
  for (std::size_t s = 0; s < layout.layers.size(); ++s)
    for (std::size_t l : layout.layers[s]) stage[l] = s;
  return stage;
}

class CudaPipelineReplica : public Replica {
 public:
  CudaPipelineReplica(Model& model, Optimizer& optimizer, std::vector<DeviceSpec> devices,
                      Precision precision, std::vector<StreamCommunicator*> communicators,
                      int participant, PipelineLayout layout, int microbatches,
                      PipelineSchedule schedule)
      : model_(model),
        optimizer_(optimizer),
        devices_(std::move(devices)),
        communicators_(std::move(communicators)),
        participant_(participant),
        layout_(std::move(layout)),
        hand_offs_(stage_hand_offs(model, layout_)),
        microbatches_(microbatches),
        layer_precisions_(nn::layer_precisions(model, precision)),
        layer_stage_(stage_of_layers(layout_, model.layer_count())) {
    if (model.has_activity_regularizers())
      throw ConfigError("pipeline",
                        "a model with activity_regularizer layers cannot be "
                        "pipelined over GPUs (its penalties span the stages); "
                        "train it without stages or on a CPU plan");
    const backend::OptimizerDesc rule = optimizer.desc();
    if (rule.global_clipnorm > 0 && rule.clipnorm > 0)
      throw ConfigError("optimizer",
                        "global_clipnorm with clipnorm cannot be pipelined over GPUs (each "
                        "tensor's clip reads its unscaled norm, which the stages' global scaling "
                        "changes); give one of them");
    if (rule.global_clipnorm > 0 && rule.gradient_accumulation_steps > 1)
      throw ConfigError("optimizer.config.gradient_accumulation_steps",
                        "global_clipnorm with gradient accumulation cannot be pipelined over "
                        "GPUs (the stages scale their own gradients globally, not the combined "
                        "ones); give clipnorm, or train without stages");
    make_stages(precision);
    owner_ = model_.clone();
    place_layers(*owner_);
    moving_ = PipelineMovingState::of(*owner_, layout_);
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      use_device(stages_[s]->device);
      stages_[s]->parameters = std::make_unique<cuda::DeviceParameters>(
          *owner_, layout_.layers[s], optimizer_.slot_names().size(), stages_[s]->backend);
      stages_[s]->scratch = stages_[s]->backend.tensor(
          {std::max<std::int64_t>(stages_[s]->parameters->layout().trainable_floats, 1)});
      stages_[s]->backend.fill(stages_[s]->scratch, 0.0f);
    }
    const int slots = pipeline_slots(schedule, stage_count(), microbatches);
    for (int i = 0; i < slots; ++i) slots_.push_back(make_slot());
    use_device(stages_.back()->device);
    for (int m = 0; m < microbatches; ++m) sums_.push_back(stages_.back()->backend.sums());
    push();
    scheduler_ = std::make_unique<PipelineScheduler>(
        schedule, stage_count(), microbatches,
        [this](int s) { use_device(stages_[static_cast<std::size_t>(s)]->device); });
  }

  ~CudaPipelineReplica() override {
    scheduler_.reset();  // no worker may outlive what it drives
    for (auto& stage : stages_) {
      cudaSetDevice(stage->device);
      cudaDeviceSynchronize();  // no copy or kernel may still read a buffer that goes
    }
  }

  DeviceSpec device() const override { return devices_.front(); }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return optimizer_; }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Objective& objective, const NextRows* /*next*/) override {
    host_current_ = false;
    Step step;
    step.sample_offset = sample_offset;
    step.loss_scale = loss_scale;
    step.objective = &objective;
    static_cast<MicroBatches&>(step) = microbatches_of(x.rank() > 0 ? x.dim(0) : 0, microbatches_);
    for (auto& stage : stages_) {
      use_device(stage->device);
      stage->backend.fill(stage->parameters->gradients(), 0.0f);
    }
    place_batch(x, y, &objective);
    for (PipelineMovingState& state : moving_) state.start();
    step_ = &step;
    try {
      stage_seconds_ = scheduler_->run([this](int s, const StageOperation& op) {
        if (op.forward)
          forward(static_cast<std::size_t>(s), op.microbatch);
        else
          backward(static_cast<std::size_t>(s), op.microbatch);
      });
    } catch (...) {
      step_ = nullptr;
      throw;
    }
    step_ = nullptr;
    finish_moving_state(x.rank() > 0 ? x.dim(0) : 0);
    advance_random_states(step.rows.front() > 0);
    use_device(stages_.back()->device);
    StepSums total = objective.zero();
    for (std::size_t m = 0; m < step.rows.size(); ++m) {
      if (step.rows[m] > 0) total.add(objective.read(*sums_[m], step.rows[m]));
    }
    return with_penalty(total);
  }

  StepSums evaluate(const Tensor& x, const Tensor& y, std::int64_t sample_offset,
                    const Objective& objective) override {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return objective.zero();
    place_batch(x, y, &objective);
    Slot& slot = slots_.front();
    const auto& outputs = forward_through_stages(slot, sample_offset);
    cuda::PipelineStage& last = *stages_.back();
    objective.enqueue(last.backend, *slot.model, outputs, y_, 1.0f, false, slot.scratch,
                      *sums_.front());
    return with_penalty(objective.read(*sums_.front(), rows));
  }

  void predict(const Tensor& x, std::int64_t sample_offset, float* out) override {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    place_batch(x, Tensor(), nullptr);
    const auto& outputs = forward_through_stages(slots_.front(), sample_offset);
    cuda::PipelineStage& last = *stages_.back();
    // Each output to the host, then packed row by row (forward()'s layout for several outputs).
    std::int64_t total = 0;
    for (const Tensor* o : outputs) total += o->size() / rows;
    std::vector<std::vector<float>> host(outputs.size());
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      host[j].resize(static_cast<std::size_t>(outputs[j]->size()));
      cuda::copy_to_host(host[j].data(), outputs[j]->data(), outputs[j]->size(), last.stream.get());
    }
    cuda::check(cudaStreamSynchronize(last.stream.get()), "the prediction");
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const std::int64_t width = outputs[j]->size() / rows;
      for (std::int64_t r = 0; r < rows; ++r)
        std::copy_n(host[j].data() + r * width, width, out + r * total + offset);
      offset += width;
    }
  }

  /// Stage 0's: the gradients are split across the stages' GPUs, and train() sums each stage's
  /// itself (sums_gradients), so the meta-model never reads them.
  Tensor& gradients() override { return stages_.front()->parameters->gradients(); }
  bool sums_gradients() const override { return true; }

  void apply_update() override {
    std::int64_t trainable = 0;
    for (auto& stage : stages_) trainable += stage->parameters->layout().trainable_floats;
    if (trainable == 0) return;
    if (LossScale* scale = optimizer_.loss_scale()) {
      // One verdict for the whole model: every stage unscaled, skipped together.
      bool finite = true;
      for (auto& stage : stages_) {
        use_device(stage->device);
        finite = stage->backend.scale_checking_finite(stage->parameters->gradients(),
                                                      static_cast<float>(1.0 / scale->scale())) &&
                 finite;
      }
      if (!scale->record(finite)) return;
    }
    optimizer_.set_iterations(optimizer_.iterations() + 1);
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      use_device(stages_[s]->device);
      nn::add_penalty_gradients(*owner_, layout_.layers[s]);  // Keras' kernel_regularizer, ...
    }
    backend::OptimizerDesc rule = optimizer_.desc();
    clip_globally(rule);
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      cuda::PipelineStage& stage = *stages_[s];
      use_device(stage.device);
      if (stage.parameters->layout().trainable_floats == 0) continue;
      stage.backend.optimizer_update(rule, optimizer_.iterations(), optimizer_.step_learning_rate(),
                                     stage.parameters->update_tensors());
      nn::apply_constraints(*owner_, layout_.layers[s]);
      cuda::check(cudaGetLastError(), "the optimizer update");
    }
    host_current_ = false;
  }

  void set_learning_rate(double lr) override { optimizer_.set_learning_rate(lr); }

  std::vector<StageStep> last_stages() const override {
    std::vector<StageStep> stages;
    for (std::size_t s = 0; s < stages_.size(); ++s)
      stages.push_back({devices_[s], layout_.layers[s], layout_.parameters[s],
                        s < stage_seconds_.size() ? stage_seconds_[s] : 0.0});
    return stages;
  }

  std::vector<Model*> training_models() override {
    std::vector<Model*> models;
    for (auto& slot : slots_) models.push_back(slot.model.get());
    return models;
  }

  void pull() override {
    if (host_current_) return;
    for (auto& stage : stages_) {
      use_device(stage->device);
      stage->parameters->pull(model_, optimizer_, stage->stream.get());
      cuda::check(cudaStreamSynchronize(stage->stream.get()), "copy of the weights to the host");
    }
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      if (!random_states_[l].empty()) model_.layer(l).set_random_state(random_states_[l]);
    host_current_ = true;
  }

  void push() override {
    for (auto& stage : stages_) {
      use_device(stage->device);
      stage->parameters->push(model_, optimizer_, stage->stream.get());
      cuda::check(cudaStreamSynchronize(stage->stream.get()), "copy of the weights to the device");
    }
    random_states_.clear();
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      random_states_.push_back(model_.layer(l).random_state());
    host_current_ = true;
  }

 private:
  // A micro-batch's model copy and its working state.
  struct Slot {
    std::unique_ptr<Model> model;
    ObjectiveScratch scratch;
    std::vector<cuda::HandOff> hand_offs;                    // per stage boundary
    std::vector<std::unique_ptr<cuda::CudaEvent>> released;  // per stage: its backward queued
  };

  // One train(): its micro-batches and the objective.
  struct Step : MicroBatches {
    std::int64_t sample_offset = 0;
    float loss_scale = 1.0f;
    const Objective* objective = nullptr;
  };

  int stage_count() const { return static_cast<int>(stages_.size()); }

  void make_stages(Precision precision) {
    const bool float_layers = cuda::keeps_float_layers(layer_precisions_, precision);
    std::vector<int> indices;
    for (const DeviceSpec& d : devices_) {
      stages_.push_back(std::make_unique<cuda::PipelineStage>(
          d.index, cuda::device_precision(precision), float_layers));
      indices.push_back(d.index);
    }
    cuda::enable_neighbour_access(indices);
    run_precision_ = precision;
  }

  // Every layer of `m` on its stage's backend (its float32 sibling where a dtype policy says).
  void place_layers(Model& m) {
    for (std::size_t l = 0; l < m.layer_count(); ++l) {
      cuda::PipelineStage& stage = *stages_[layer_stage_[l]];
      m.layer(l).set_trainable(model_.layer(l).trainable());
      m.layer(l).set_backend(layer_precisions_[l] == run_precision_ ? stage.backend
                                                                    : *stage.float_backend);
    }
  }

  // A slot: a copy whose weights are the owner's views and whose gradients are its stages'
  // scratch, with its hand-off events made on their GPUs.
  Slot make_slot() {
    Slot slot;
    slot.model = model_.clone();
    place_layers(*slot.model);
    const auto owner = owner_->parameters(), mine = slot.model->parameters();
    const auto stage_of = parameter_stages();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      cuda::PipelineStage& stage = *stages_[stage_of[i]];
      const cuda::ParameterLayout& layout = stage.parameters->layout();
      // The same storage, but for the moving state: the slot's own (pipeline_moving_state.hpp).
      if (is_moving_state(moving_, owner[i])) {
        use_device(stage.device);
        mine[i]->value = stage.backend.tensor(owner[i]->value.shape());
        stage.backend.copy(owner[i]->value, mine[i]->value);
      } else {
        mine[i]->value = owner[i]->value;
      }
      mine[i]->grad = layout.trainable[i]
                          ? Tensor::view(stage.scratch, layout.offsets[i], owner[i]->value.shape())
                          : Tensor();
    }
    slot.hand_offs.resize(hand_offs_.size());
    for (std::size_t b = 0; b < hand_offs_.size(); ++b) {
      cuda::HandOff& h = slot.hand_offs[b];
      use_device(stages_[b]->device);
      h.forward_computed = std::make_unique<cuda::CudaEvent>();
      h.gradients_received = std::make_unique<cuda::CudaEvent>();
      use_device(stages_[b + 1]->device);
      h.activations_received = std::make_unique<cuda::CudaEvent>();
      h.backward_computed = std::make_unique<cuda::CudaEvent>();
      h.activations.resize(hand_offs_[b].size());
      h.gradients.resize(hand_offs_[b].size());
    }
    for (auto& stage : stages_) {
      use_device(stage->device);
      slot.released.push_back(std::make_unique<cuda::CudaEvent>());
    }
    return slot;
  }

  // Per parameter (Model::parameters() order), its layer's stage.
  std::vector<std::size_t> parameter_stages() {
    std::vector<std::size_t> stage;
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      for (std::size_t j = 0; j < model_.layer(l).parameters().size(); ++j)
        stage.push_back(layer_stage_[l]);
    return stage;
  }

  Slot& slot_of(int m) { return slots_[static_cast<std::size_t>(m) % slots_.size()]; }

  // The batch's x to stage 0's GPU, its targets (checked on the host first, as the CPU loss
  // does) to the last stage's, each on that stage's stream.
  void place_batch(const Tensor& x, const Tensor& y, const Objective* objective) {
    const std::int64_t rows = x.rank() > 0 ? x.dim(0) : 0;
    if (rows == 0) return;
    for (auto& stage : stages_)
      stage->allocator->set_context("a batch of " + std::to_string(rows) +
                                    " samples on this pipeline");
    cuda::PipelineStage& first = *stages_.front();
    use_device(first.device);
    first.backend.place(x_, x.shape());
    cuda::copy_to_device(x_.data(), x.data(), x.size(), first.stream.get());
    if (!objective) return;
    objective->check_labels(y, model_);
    cuda::PipelineStage& last = *stages_.back();
    use_device(last.device);
    last.backend.place(y_, y.shape());
    cuda::copy_to_device(y_.data(), y.data(), y.size(), last.stream.get());
  }

  // Stage s's forward of micro-batch m (its worker).
  void forward(std::size_t s, int m) {
    const auto i = static_cast<std::size_t>(m);
    if (step_->rows[i] == 0) {  // no kernels; the averages over the replicas still met
      nn::forward_without_rows(*slot_of(m).model, layout_.calls[s]);
      return;
    }
    Slot& slot = slot_of(m);
    Model& model = *slot.model;
    cuda::PipelineStage& stage = *stages_[s];
    reset_random_states(s, model);
    if (s == 0)
      model.start_forward(rows_of(x_, step_->starts[i], step_->rows[i]));
    else
      receive_activations(s, slot);
    reset_moving_state(s, model);
    model.forward_calls(layout_.calls[s], true, step_->sample_offset + step_->starts[i]);
    for (PipelineMovingState& state : moving_)
      if (state.stage() == static_cast<int>(s)) state.add(model, step_->rows[i]);
    if (s + 1 < stages_.size()) {
      record(*slot.hand_offs[s].forward_computed, stage.stream);
      return;
    }
    step_->objective->enqueue(stage.backend, model, model.forward_results(),
                              rows_of(y_, step_->starts[i], step_->rows[i]), step_->loss_scale,
                              true, slot.scratch, *sums_[i]);
  }

  // Stage s's backward of micro-batch m (its worker); after the last, the stage's sum across
  // the replicas.
  void backward(std::size_t s, int m) {
    const auto i = static_cast<std::size_t>(m);
    cuda::PipelineStage& stage = *stages_[s];
    if (step_->rows[i] > 0) {
      Slot& slot = slot_of(m);
      Model& model = *slot.model;
      if (s + 1 == stages_.size())
        model.start_backward(slot.scratch.grad_views);
      else
        receive_gradients(s, slot);
      model.backward_calls(layout_.calls[s], [](std::size_t) {});
      if (s > 0) record(*slot.hand_offs[s - 1].backward_computed, stage.stream);
      Tensor& sum = stage.parameters->gradients();
      stage.backend.add(sum, Tensor::view(stage.scratch, 0, sum.shape()), sum);
      record(*slot.released[s], stage.stream);
    }
    StreamCommunicator* communicator = communicators_[s];
    if (m + 1 == microbatches_ && communicator)
      communicator->all_reduce_on_stream(participant_, stage.parameters->gradients(),
                                         stage.stream.get());
  }

  // Stage s pulls the activations it reads from stage s - 1 (its worker, or the caller's thread
  // in evaluate and predict).
  void receive_activations(std::size_t s, Slot& slot) {
    cuda::HandOff& h = slot.hand_offs[s - 1];
    std::vector<const Tensor*> sources;
    for (std::size_t k : hand_offs_[s - 1]) sources.push_back(slot.model->call_output(k));
    pull(s, s - 1, sources, h.activations, *h.forward_computed, *slot.released[s],
         stages_[s]->activation_copies, *h.activations_received);
    for (std::size_t j = 0; j < hand_offs_[s - 1].size(); ++j)
      slot.model->set_call_output(hand_offs_[s - 1][j], &h.activations[j]);
  }

  // Stage s pulls the gradients of what it handed to stage s + 1 (its worker).
  void receive_gradients(std::size_t s, Slot& slot) {
    cuda::HandOff& h = slot.hand_offs[s];
    std::vector<const Tensor*> sources;
    for (std::size_t k : hand_offs_[s]) sources.push_back(slot.model->output_gradient(k));
    pull(s, s + 1, sources, h.gradients, *h.backward_computed, *slot.released[s],
         stages_[s]->gradient_copies, *h.gradients_received);
    for (std::size_t j = 0; j < hand_offs_[s].size(); ++j)
      if (sources[j]) slot.model->set_output_gradient(hand_offs_[s][j], &h.gradients[j]);
  }

  // Stage s copies `sources` (on stage `from`'s GPU; null: nothing after it trains) into
  // `copies` on `copy_stream`, once `computed` (stage from's) and `released` (the slot's last use
  // of the copies here) are reached; its compute stream then waits for `received`.
  void pull(std::size_t s, std::size_t from, const std::vector<const Tensor*>& sources,
            std::vector<Tensor>& copies, const cuda::CudaEvent& computed,
            const cuda::CudaEvent& released, const cuda::CudaStream& copy_stream,
            const cuda::CudaEvent& received) {
    cuda::PipelineStage& stage = *stages_[s];
    bool grown = false;
    for (std::size_t j = 0; j < sources.size(); ++j) {
      if (!sources[j]) continue;
      const float* before = copies[j].data();
      stage.backend.place(copies[j], sources[j]->shape());
      grown = grown || copies[j].data() != before;
    }
    if (grown) {  // a block from the allocator's cache: free only in the compute stream's order
      record(stage.compute_tail, stage.stream);
      wait(copy_stream, stage.compute_tail);
    }
    wait(copy_stream, computed);
    wait(copy_stream, released);
    for (std::size_t j = 0; j < sources.size(); ++j)
      if (sources[j])
        cuda::copy_between_devices(*sources[j], stages_[from]->device, copies[j], stage.device,
                                   stage.backend, copy_stream.get());
    record(received, copy_stream);
    wait(stage.stream, received);
  }

  // Inference through every stage on the calling thread (evaluate, predict).
  const std::vector<const Tensor*>& forward_through_stages(Slot& slot, std::int64_t offset) {
    Model& model = *slot.model;
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      use_device(stages_[s]->device);
      if (s == 0)
        model.start_forward(x_);
      else
        receive_activations(s, slot);
      reset_moving_state(s, model);  // the owner's: a checkpoint may have been pushed since
      model.forward_calls(layout_.calls[s], false, offset);
      if (s + 1 < stages_.size()) record(*slot.hand_offs[s].forward_computed, stages_[s]->stream);
    }
    return model.forward_results();
  }

  // Stage s's layers of `slot` start from the owner's moving state (its worker, or the caller's
  // thread in evaluate and predict).
  void reset_moving_state(std::size_t s, Model& slot) {
    for (const PipelineMovingState& state : moving_)
      if (state.stage() == static_cast<int>(s)) state.reset(slot);
  }

  // After the schedule: the owner's moving state moves once for the step, through slot 0 (every
  // replica takes part in the average across replicas, rows or not).
  void finish_moving_state(std::int64_t replica_rows) {
    for (PipelineMovingState& state : moving_) {
      use_device(stages_[static_cast<std::size_t>(state.stage())]->device);
      state.finish(*slots_.front().model, replica_rows);
    }
  }

  // Every micro-batch draws as the step's whole forward does: the layers of stage s start from
  // the step's random state (a Dropout's call count also on the stage's GPU).
  void reset_random_states(std::size_t s, Model& model) {
    for (std::size_t l : layout_.layers[s]) {
      const auto& state = random_states_[l];
      if (state.empty()) continue;
      model.layer(l).set_random_state(state);
      if (state.size() == 2) stages_[s]->backend.set_dropout_calls(state[0], state[1]);
    }
  }

  // After a step, the layers' random states are where micro-batch 0's forward left them (each
  // micro-batch starts from the step's), as on the CPU. With no rows here nothing ran: a Dropout
  // whose counter exists on its stage's GPU counts one call more, as CudaReplica's do.
  void advance_random_states(bool first_ran) {
    if (first_ran) {
      for (std::size_t l = 0; l < random_states_.size(); ++l)
        if (!random_states_[l].empty())
          random_states_[l] = slots_.front().model->layer(l).random_state();
      return;
    }
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      use_device(stages_[s]->device);
      const auto counters = stages_[s]->backend.dropout_calls();
      for (std::size_t l : layout_.layers[s]) {
        auto& state = random_states_[l];
        if (state.size() == 2 && counters.count(state[0])) ++state[1];
      }
    }
  }

  // Keras' global_clipnorm spans every stage: the norm of all the gradients (each stage's sum of
  // squares in double, added in stage order), every stage's gradients scaled by
  // kernel_math's global_clip_scale of it, and the update then told not to clip again.
  void clip_globally(backend::OptimizerDesc& rule) {
    if (!(rule.global_clipnorm > 0) || stages_.size() < 2) return;
    double squares = 0;
    for (auto& stage : stages_) {
      use_device(stage->device);
      stage->penalty_sums->reset(1);
      stage->backend.penalty_sum(stage->parameters->gradients(), 0.0f, 1.0f, *stage->penalty_sums,
                                 0);
      squares += stage->penalty_sums->read()[0];
    }
    const double factor = backend::math::global_clip_scale(squares, rule.global_clipnorm);
    rule.global_clipnorm = 0;
    if (factor == 1.0) return;
    for (auto& stage : stages_) {
      use_device(stage->device);
      stage->backend.scale_checking_finite(stage->parameters->gradients(),
                                           static_cast<float>(factor));
    }
  }

  // The loss with every stage's weight penalties (as CudaReplica's, per row).
  StepSums with_penalty(StepSums sums) {
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      use_device(stages_[s]->device);
      sums.loss.sum += nn::weight_penalty(*owner_, *stages_[s]->penalty_sums, layout_.layers[s]) *
                       sums.loss.count;
    }
    return sums;
  }

  Model& model_;
  Optimizer& optimizer_;
  std::vector<DeviceSpec> devices_;
  std::vector<StreamCommunicator*> communicators_;  // per stage; null: nothing to sum
  int participant_;
  PipelineLayout layout_;
  std::vector<std::vector<std::size_t>> hand_offs_;  // per boundary (stage_hand_offs)
  int microbatches_;
  std::vector<Precision> layer_precisions_;  // per layer (nn/dtype_policy.hpp)
  std::vector<std::size_t> layer_stage_;     // per layer
  Precision run_precision_ = Precision::fp32;
  std::vector<std::unique_ptr<cuda::PipelineStage>> stages_;
  std::unique_ptr<Model> owner_;  // holds the device parameters (views), as the optimizer sees them
  std::vector<PipelineMovingState> moving_;  // the owner's layers with a moving state, in order
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<backend::Sums>> sums_;       // per micro-batch, on the last stage
  std::vector<std::vector<std::uint64_t>> random_states_;  // per layer, at the next step's start
  Tensor x_, y_;  // the batch on the first stage's GPU, its targets on the last's
  Step* step_ = nullptr;
  std::vector<double> stage_seconds_;
  bool host_current_ = false;
  std::unique_ptr<PipelineScheduler> scheduler_;  // started last, stopped first
};

}  // namespace

std::unique_ptr<Replica> make_cuda_pipeline_replica(Model& model, Optimizer& optimizer,
                                                    std::vector<DeviceSpec> devices,
                                                    Precision precision,
                                                    std::vector<StreamCommunicator*> communicators,
                                                    int participant, PipelineLayout layout,
                                                    int microbatches, PipelineSchedule schedule) {
  return std::make_unique<CudaPipelineReplica>(model, optimizer, std::move(devices), precision,
                                               std::move(communicators), participant,
                                               std::move(layout), microbatches, schedule);
}

}  // namespace tandem::detail
