// Trainer::View: the ModelView a callback sees for its target (private to the trainer).
#pragma once

#include "train/trainer.hpp"

namespace tandem {

class Trainer::View : public ModelView {
 public:
  View(Trainer& trainer, Target target) : trainer_(trainer), target_(target) {}
  Target target() const override { return target_; }
  Model& model() override { return trainer_.meta_.lend_template(); }
  const DevicePlan& plan() const override { return trainer_.meta_.plan(); }
  std::vector<ReplicaFacts> replicas() const override {
    std::vector<ReplicaFacts> out;
    if (target_ != Target::meta) return out;
    const auto& last = trainer_.meta_.last_step();
    for (std::size_t r = 0; r < last.size(); ++r) {
      ReplicaFacts facts{static_cast<int>(r), last[r].device.name(), last[r].samples,
                         last[r].seconds, last[r].rank, {}};
      const Model& model = trainer_.meta_.template_model();
      for (const StageStep& stage : last[r].stages) {
        StageFacts s{stage.device.name(), stage.device.index, {}, stage.parameters, stage.seconds};
        for (std::size_t l : stage.layers) s.layers.push_back(model.layer(l).name());
        facts.stages.push_back(std::move(s));
      }
      out.push_back(std::move(facts));
    }
    return out;
  }
  CheckpointData checkpoint(bool with_training_state) override {
    CheckpointData data = trainer_.checkpoint(target_);
    if (!with_training_state) data.training.reset();
    return data;
  }
  // Lent, as any change a hook makes: before the next forward the template reaches every
  // replica and, from rank 0, every rank.
  void load_weights(const CheckpointData& data, const std::string& source) override {
    trainer_.meta_.lend_template().load_weights(data, source);
  }

 private:
  Trainer& trainer_;
  Target target_;
};

}  // namespace tandem
