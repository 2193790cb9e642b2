// A CPU replica that trains its model as a pipeline of stages (docs/pipeline.md).
//
// Every micro-batch in flight needs its own activations, so the replica keeps "slots": copies of
// the model whose weights are the host model's own tensors (they share the storage) and whose
// gradients go to one scratch arena. Micro-batch m runs in slot m mod slots (pipeline_slots()).
// The PipelineScheduler's worker for stage s runs its calls of each slot's model
// (Model::forward_calls/backward_calls) and, after each backward, adds the scratch gradients of
// its layers into the host model's arena in micro-batch order — so the sum is the same bits for
// every schedule and stage layout. Only stage s's worker touches stage s's parameters, gradients
// and arena range; a micro-batch's hand-off to the next stage is its slot's outputs, in memory.
//
// A training forward's moving state (BatchNormalization's moving statistics) is the slots' own,
// combined once a step (parallel/pipeline_moving_state.hpp).
#include <algorithm>

#include "backend/cpu/parallel.hpp"
#include "parallel/cpu_replica.hpp"
#include "parallel/pipeline_moving_state.hpp"
#include "parallel/pipeline_scheduler.hpp"
#include "tandem/error.hpp"

namespace tandem::detail {

namespace {

// A range of the gradient arena: one trainable parameter's.
struct ArenaRange {
  std::int64_t offset = 0, size = 0;
};

class CpuPipelineReplica : public CpuReplica {
 public:
  CpuPipelineReplica(Model& model, Optimizer& optimizer, std::vector<DeviceSpec> devices,
                     std::vector<int> threads, PipelineLayout layout, int microbatches,
                     PipelineSchedule schedule)
      : CpuReplica(model, optimizer, devices.at(0)),
        devices_(std::move(devices)),
        layout_(std::move(layout)),
        microbatches_(microbatches),
        scratch_arena_({arena_.size()}),
        scheduler_(schedule, layout_.stage_count(), microbatches, [threads](int s) {
          cpu::set_compute_threads(threads.at(static_cast<std::size_t>(s)));  // its share
        }) {
    const int slots = pipeline_slots(schedule, layout_.stage_count(), microbatches);
    for (int i = 0; i < slots; ++i) slots_.push_back(make_slot());
    moving_ = PipelineMovingState::of(model_, layout_);
    share_host_weights();
    stage_ranges_ = arena_ranges();
    stage_seconds_.assign(static_cast<std::size_t>(layout_.stage_count()), 0.0);
  }

  StepSums train(const Tensor& x, const Tensor& y, std::int64_t sample_offset, float loss_scale,
                 const Objective& objective, const NextRows* /*next*/) override {
    Step step(x, y, sample_offset, loss_scale, objective);
    static_cast<MicroBatches&>(step) = microbatches_of(x.dim(0), microbatches_);
    step.sums.assign(static_cast<std::size_t>(microbatches_), objective.zero());
    step.activity.assign(static_cast<std::size_t>(microbatches_), {});
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      step.random_states.push_back(model_.layer(l).random_state());
    for (PipelineMovingState& state : moving_) state.start();
    stage_seconds_ = scheduler_.run([&](int s, const StageOperation& op) {
      if (op.forward)
        forward(s, op.microbatch, step);
      else
        backward(s, op.microbatch);
    });
    for (PipelineMovingState& state : moving_) state.finish(*slots_[0].model, x.dim(0));
    // The host's random state moves on as one training forward moved every slot's.
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      if (!step.random_states[l].empty())
        model_.layer(l).set_random_state(slots_[0].model->layer(l).random_state());
    StepSums total = objective.zero();
    std::vector<double> activity;
    for (std::size_t m = 0; m < step.sums.size(); ++m) {
      total.add(step.sums[m]);
      activity.resize(std::max(activity.size(), step.activity[m].size()), 0.0);
      for (std::size_t i = 0; i < step.activity[m].size(); ++i) activity[i] += step.activity[m][i];
    }
    return with_penalty(total, activity);
  }

  std::vector<StageStep> last_stages() const override {
    std::vector<StageStep> stages;
    for (int s = 0; s < layout_.stage_count(); ++s) {
      const auto i = static_cast<std::size_t>(s);
      stages.push_back({devices_[i], layout_.layers[i], layout_.parameters[i], stage_seconds_[i]});
    }
    return stages;
  }

  std::vector<Model*> training_models() override {
    std::vector<Model*> models;
    for (auto& slot : slots_) models.push_back(slot.model.get());
    return models;
  }

  // The host model's weights may be new tensors (a checkpoint loaded): share them again.
  void push() override { share_host_weights(); }

 private:
  // A micro-batch's model copy and its working state.
  struct Slot {
    std::unique_ptr<Model> model;
    ObjectiveScratch scratch;
    std::unique_ptr<backend::Sums> sums = backend::cpu_backend().sums();
    std::unique_ptr<backend::Sums> activity_sums = backend::cpu_backend().sums();
  };

  // One train(): its inputs, each micro-batch's rows and results, and the schedule's progress.
  struct Step : MicroBatches {
    Step(const Tensor& x_, const Tensor& y_, std::int64_t offset, float scale, const Objective& o)
        : x(x_), y(y_), sample_offset(offset), loss_scale(scale), objective(&o) {}
    const Tensor& x;
    const Tensor& y;
    std::int64_t sample_offset;
    float loss_scale;
    const Objective* objective;
    std::vector<StepSums> sums;
    std::vector<std::vector<double>> activity;
    std::vector<std::vector<std::uint64_t>> random_states;  // per layer, at the step's start
  };

  Slot make_slot() {
    Slot slot;
    slot.model = model_.clone();
    for (std::size_t l = 0; l < model_.layer_count(); ++l)
      slot.model->layer(l).set_backend(model_.layer(l).ops());
    auto params = slot.model->trainable_parameters();
    std::int64_t offset = 0;
    for (Parameter* p : params) {
      p->grad = Tensor::view(scratch_arena_, offset, p->value.shape());
      offset += p->value.size();
    }
    return slot;
  }

  void share_host_weights() {
    const auto host = model_.parameters();
    for (Slot& slot : slots_) {
      const auto copy = slot.model->parameters();
      for (std::size_t j = 0; j < host.size(); ++j) {
        // The same storage, but for the moving state: the slot's own (see the header).
        copy[j]->value =
            is_moving_state(moving_, host[j]) ? host[j]->value.clone() : host[j]->value;
        copy[j]->trainable = host[j]->trainable;
      }
      for (std::size_t l = 0; l < model_.layer_count(); ++l)
        slot.model->layer(l).set_trainable(model_.layer(l).trainable());
    }
  }

  // Per stage, the arena ranges of its layers' trainable parameters.
  std::vector<std::vector<ArenaRange>> arena_ranges() {
    const auto trainable = model_.trainable_parameters();
    std::vector<std::vector<ArenaRange>> ranges(static_cast<std::size_t>(layout_.stage_count()));
    for (std::size_t s = 0; s < ranges.size(); ++s)
      for (std::size_t l : layout_.layers[s])
        for (Parameter* p : model_.layer(l).parameters()) {
          std::int64_t offset = 0;
          for (Parameter* t : trainable) {
            if (t == p) {
              ranges[s].push_back({offset, p->value.size()});
              break;
            }
            offset += t->value.size();
          }
        }
    return ranges;
  }

  Slot& slot_of(int m) { return slots_[static_cast<std::size_t>(m) % slots_.size()]; }

  void forward(int s, int m, Step& step) {
    Slot& slot = slot_of(m);
    Model& model = *slot.model;
    const auto i = static_cast<std::size_t>(m);
    const std::int64_t offset = step.sample_offset + step.starts[i];
    // Every micro-batch draws as the whole batch's forward does for its rows (contract 1).
    for (std::size_t l : layout_.layers[static_cast<std::size_t>(s)])
      if (!step.random_states[l].empty()) model.layer(l).set_random_state(step.random_states[l]);
    if (s == 0) model.start_forward(rows_of(step.x, step.starts[i], step.rows[i]));
    for (const PipelineMovingState& state : moving_)
      if (state.stage() == s) state.reset(model);
    model.forward_calls(layout_.calls[static_cast<std::size_t>(s)], true, offset);
    for (PipelineMovingState& state : moving_)
      if (state.stage() == s) state.add(model, step.rows[i]);
    if (s + 1 < layout_.stage_count()) return;
    const auto& outputs = model.forward_results();
    model.enqueue_activity_penalties(*slot.activity_sums, step.loss_scale);
    step.objective->enqueue(backend::cpu_backend(), model, outputs,
                            rows_of(step.y, step.starts[i], step.rows[i]), step.loss_scale, true,
                            slot.scratch, *slot.sums);
    step.sums[i] = step.objective->read(*slot.sums, step.rows[i]);
    if (model.has_activity_regularizers()) step.activity[i] = slot.activity_sums->read();
  }

  void backward(int s, int m) {
    Slot& slot = slot_of(m);
    if (s + 1 == layout_.stage_count()) slot.model->start_backward(slot.scratch.grad_views);
    slot.model->backward_calls(layout_.calls[static_cast<std::size_t>(s)], [](std::size_t) {});
    // This stage's gradients into the arena, in micro-batch order.
    float* sum = arena_.data();
    const float* part = scratch_arena_.data();
    for (const ArenaRange& r : stage_ranges_[static_cast<std::size_t>(s)]) {
      if (m == 0)
        std::copy(part + r.offset, part + r.offset + r.size, sum + r.offset);
      else
        for (std::int64_t k = r.offset; k < r.offset + r.size; ++k) sum[k] += part[k];
    }
  }

  std::vector<DeviceSpec> devices_;
  PipelineLayout layout_;
  int microbatches_;
  Tensor scratch_arena_;  // every slot's gradients of its last backward, flat as arena_
  std::vector<Slot> slots_;
  std::vector<std::vector<ArenaRange>> stage_ranges_;
  std::vector<PipelineMovingState> moving_;  // every layer's with a moving state, in layer order
  std::vector<double> stage_seconds_;  // per stage, its compute time in the last train()
  // Last: its workers start once everything above exists, and stop before it goes.
  PipelineScheduler scheduler_;
};

}  // namespace

std::unique_ptr<Replica> make_cpu_pipeline_replica(Model& model, Optimizer& optimizer,
                                                   std::vector<DeviceSpec> devices,
                                                   std::vector<int> threads, PipelineLayout layout,
                                                   int microbatches, PipelineSchedule schedule) {
  return std::make_unique<CpuPipelineReplica>(model, optimizer, std::move(devices),
                                              std::move(threads), std::move(layout), microbatches,
                                              schedule);
}

}  // namespace tandem::detail
