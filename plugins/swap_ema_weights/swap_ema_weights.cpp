// swap_ema_weights: Keras 3's SwapEMAWeights. With the optimizer's use_ema, evaluation — the
// validation after each epoch, `evaluate`, `predict` — runs on the moving averages of the
// weights: they swap places with the weights when it begins and swap back when it ends, so
// training goes on from its own weights. With swap_on_epoch the averages are also in the weights
// from each epoch's end to the next epoch's beginning, so that the callbacks listed after this
// one (checkpoint, its best-model choice) see and save them. The swaps themselves, and what
// checkpoints and the end of the run do with swapped averages, are the trainer's
// (CallbackContext::swap_moving_averages).
#include <string>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

class SwapEmaWeights : public tandem::Callback {
 public:
  SwapEmaWeights(bool swap_on_epoch, std::string config_path)
      : swap_on_epoch_(swap_on_epoch), config_path_(std::move(config_path)) {}
  std::string name() const override { return "swap_ema_weights"; }

  // Keras raises the same: without use_ema there are no averages to swap.
  void on_train_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    if (!ctx.has_moving_averages())
      throw tandem::ConfigError(config_path_,
                                "swap_ema_weights swaps the weights with the optimizer's moving "
                                "averages, and the optimizer keeps none: set "
                                "\"use_ema\": true in optimizer.config");
  }
  void on_epoch_begin(tandem::CallbackContext& ctx, int, const tandem::Logs&) override {
    if (swap_on_epoch_) ctx.swap_moving_averages(false);
  }
  void on_epoch_end(tandem::CallbackContext& ctx, int, const tandem::Logs&) override {
    if (swap_on_epoch_) ctx.swap_moving_averages(true);
  }
  void on_test_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    ctx.swap_moving_averages(true);
  }
  void on_test_end(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    ctx.swap_moving_averages(false);
  }
  void on_predict_begin(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    ctx.swap_moving_averages(true);
  }
  void on_predict_end(tandem::CallbackContext& ctx, const tandem::Logs&) override {
    ctx.swap_moving_averages(false);
  }

 private:
  bool swap_on_epoch_;
  std::string config_path_;
};

class SwapEmaWeightsPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"swap_ema_weights",
            "1.0.0",
            "Evaluates on the optimizer's moving averages of the weights (Keras SwapEMAWeights)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"swap_on_epoch",
                {{"type", "boolean"},
                 {"default", false},
                 {"description",
                  "also hold the averages in the weights from each epoch's end to the next "
                  "epoch's beginning, for the callbacks after this one (checkpoint)"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup& setup) const override {
    return std::make_shared<SwapEmaWeights>(options.at("swap_on_epoch").get<bool>(),
                                            setup.config_path);
  }
};

}  // namespace

TANDEM_PLUGIN(SwapEmaWeightsPlugin)
