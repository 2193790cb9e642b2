// A valid plugin for the tests of weights a hook changes (docs/design.md contract 2): after the
// training step numbered "step" (1-based, as events count), it multiplies every trainable
// weight of the template's first layer by "factor", writing through ctx.model() as a user's
// callback would. Runs where its entry's "ranks" says (rank 0 by default).
#include <cstdint>

#include "tandem/plugin.hpp"

namespace {

class ScalesWeights : public tandem::Callback {
 public:
  ScalesWeights(std::int64_t step, float factor) : step_(step), factor_(factor) {}
  std::string name() const override { return "scales_weights"; }
  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t, const tandem::Logs&) override {
    if (ctx.state().step != step_) return;  // steps done, this one included
    tandem::Model& model = ctx.model();
    for (tandem::Parameter* p : model.layer(0).parameters())
      if (p->trainable)
        for (float& v : p->value.values()) v *= factor_;
  }

 private:
  std::int64_t step_;
  float factor_;
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
               {"factor", {{"type", "number"}, {"default", 0.5}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<ScalesWeights>(options.at("step").get<std::int64_t>(),
                                           options.at("factor").get<float>());
  }
};

}  // namespace

TANDEM_PLUGIN(ScalesWeightsPlugin)
