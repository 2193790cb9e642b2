// A valid plugin for the tests of weights a hook changes (docs/design.md contract 2): after the
// training step numbered "step" (1-based, as events count), it multiplies every trainable
// weight of the template's first layer by "factor" — in place through ctx.model() as a user's
// callback would ("how": "in_place"), or in a checkpoint of its target loaded back
// ("load_weights"; the checkpoint's first layer with weights). With "mark_rank" it also creates the
// file rank-R in the run folder when training begins, R being ctx.rank(). Runs where its entry's
// "ranks" says (rank 0 by default).
#include <cstdint>
#include <fstream>
#include <string>

#include "tandem/plugin.hpp"

namespace {

class ScalesWeights : public tandem::Callback {
 public:
  ScalesWeights(std::int64_t step, float factor, bool load_weights, bool mark_rank)
      : step_(step), factor_(factor), load_weights_(load_weights), mark_rank_(mark_rank) {}
  std::string name() const override { return "scales_weights"; }
  void on_train_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    if (mark_rank_) std::ofstream(ctx.run_dir() / ("rank-" + std::to_string(ctx.rank())));
  }
  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t,
                          const tandem::Logs&) override {
    if (ctx.state().step != step_) return;  // steps done, this one included
    if (!load_weights_) {
      tandem::Model& model = ctx.model();
      for (tandem::Parameter* p : model.layer(0).parameters())
        if (p->trainable) scale(p->value);
      return;
    }
    // Through the view alone (ctx.model() would lend the template by itself).
    tandem::CheckpointData data = ctx.target().checkpoint(false);
    for (auto& weight : data.layers.front().weights) scale(weight.value);
    ctx.target().load_weights(data, "scales_weights' checkpoint");
  }

 private:
  void scale(tandem::Tensor& t) const {
    for (float& v : t.values()) v *= factor_;
  }

  std::int64_t step_;
  float factor_;
  bool load_weights_, mark_rank_;
};

class ScalesWeightsPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"scales_weights",
            "0.0.1",
            "Test plugin: scales the first layer's weights after one step",
            {{"type", "object"},
             {"additionalProperties", false},
             {"required", {"step"}},
             {"properties",
              {{"step", {{"type", "integer"}, {"minimum", 1}}},
               {"factor", {{"type", "number"}, {"default", 0.5}}},
               {"how", {{"enum", {"in_place", "load_weights"}}, {"default", "in_place"}}},
               {"mark_rank", {{"type", "boolean"}, {"default", false}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<ScalesWeights>(options.at("step").get<std::int64_t>(),
                                           options.at("factor").get<float>(),
                                           options.at("how").get<std::string>() == "load_weights",
                                           options.at("mark_rank").get<bool>());
  }
};

}  // namespace

TANDEM_PLUGIN(ScalesWeightsPlugin)
