// reduce_lr_on_plateau: Keras ReduceLROnPlateau — multiplies the learning rate by `factor` when
// the monitored metric has not improved for `patience` epochs, then waits `cooldown` epochs
// before counting again, never going below `min_lr`.
//
// The epoch-end logic is Keras 3's, step for step: in cooldown the counter goes down and `wait`
// is cleared; an improvement (beyond min_delta) resets `wait`; otherwise, outside cooldown, `wait`
// grows and at `patience` the rate becomes max(lr * factor, min_lr) if lr > min_lr, starting a
// cooldown. Each reduction is published as a "reduce_lr_on_plateau" event; the trainer's events
// carry the new `lr` from then on.
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "renamed_option.hpp"
#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

using nlohmann::json;
using tandem::CallbackContext;
using tandem::Logs;

struct Options {
  std::string monitor;
  double factor = 0.1;
  int patience = 10;
  int verbose = 0;
  bool maximize = false;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
};

class ReduceLrOnPlateau : public tandem::Callback {
 public:
  explicit ReduceLrOnPlateau(Options o) : o_(std::move(o)) {}
  std::string name() const override { return "reduce_lr_on_plateau"; }

  void on_train_begin(CallbackContext&, const Logs&) override {
    warned_missing_ = false;
    if (restored_) return;  // a resumed run goes on from the checkpoint's best, wait and cooldown
    best_ = worst();
    wait_ = 0;
    cooldown_counter_ = 0;
  }

  // The best value (null while there is none: JSON has no infinity), wait and cooldown.
  json saved_state() const override {
    return {{"best", std::isfinite(best_) ? json(best_) : json()},
            {"wait", wait_},
            {"cooldown_counter", cooldown_counter_}};
  }

  void restore_state(const json& state) override {
    const auto count = [&](const char* key) {
      const json* v = state.is_object() && state.contains(key) ? &state[key] : nullptr;
      if (!v || !v->is_number_integer() || v->get<std::int64_t>() < 0 ||
          v->get<std::int64_t>() > std::numeric_limits<int>::max())
        throw std::runtime_error(std::string("expected \"") + key + "\": an integer >= 0, got " +
                                 state.dump());
      return static_cast<int>(v->get<std::int64_t>());
    };
    const json* best = state.is_object() && state.contains("best") ? &state["best"] : nullptr;
    if (!best || !(best->is_null() || (best->is_number() && std::isfinite(best->get<double>()))))
      throw std::runtime_error("expected \"best\": a finite number or null, got " + state.dump());
    best_ = best->is_null() ? worst() : best->get<double>();
    wait_ = count("wait");
    cooldown_counter_ = count("cooldown_counter");
    restored_ = true;
  }

  void on_epoch_end(CallbackContext& ctx, int epoch, const Logs& logs) override {
    const auto value = logs.get(o_.monitor);
    if (!value) {
      if (!warned_missing_) {
        std::string keys;
        for (const auto& [k, v] : logs.items()) keys += (keys.empty() ? "" : ", ") + k;
        std::fprintf(stderr,
                     "reduce_lr_on_plateau: the monitored metric '%s' is not in the logs "
                     "(available: %s); the learning rate is left alone\n",
                     o_.monitor.c_str(), keys.c_str());
      }
      warned_missing_ = true;
      return;
    }
    const double current = *value;
    if (in_cooldown()) {
      --cooldown_counter_;
      wait_ = 0;
    }
    if (improves(current)) {
      best_ = current;
      wait_ = 0;
    } else if (!in_cooldown()) {
      ++wait_;
      if (wait_ >= o_.patience) {
        const double old_lr = ctx.learning_rate();
        if (old_lr > o_.min_lr) {
          const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
          ctx.set_learning_rate(new_lr);
          ctx.publish("reduce_lr_on_plateau",
                      {{"epoch", epoch + 1},
                       {"monitor", o_.monitor},
                       {"value", std::isfinite(current) ? json(current) : json(nullptr)},
                       {"old_lr", old_lr},
                       {"new_lr", new_lr}});
          if (o_.verbose > 0)
            std::fprintf(stderr, "Epoch %d: ReduceLROnPlateau reducing learning rate to %g.\n",
                         epoch + 1, new_lr);
          cooldown_counter_ = o_.cooldown;
          wait_ = 0;
        }
      }
    }
  }

 private:
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  double worst() const {
    return o_.maximize ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
  }
  bool improves(double current) const {
    return o_.maximize ? current > best_ + o_.min_delta : current < best_ - o_.min_delta;
  }

  Options o_;
  double best_ = 0;
  int wait_ = 0, cooldown_counter_ = 0;
  bool restored_ = false;  // best_, wait_ and cooldown_counter_ came from a checkpoint
  bool warned_missing_ = false;
};

class ReduceLrOnPlateauPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {{"monitor",
                   {{"type", "string"},
                    {"minLength", 1},
                    {"default", "val_loss"},
                    {"description", "the logs key to watch"}}},
                  {"factor",
                   {{"type", "number"},
                    {"exclusiveMinimum", 0},
                    {"default", 0.1},
                    {"description", "new_lr = lr * factor; must be < 1"}}},
                  {"patience",
                   {{"type", "integer"},
                    {"minimum", 0},
                    {"maximum", 2147483647},  // read as an int
                    {"default", 10},
                    {"description", "epochs without improvement before the rate is reduced"}}},
                  {"verbose",
                   {{"type", "integer"},
                    {"enum", {0, 1}},
                    {"default", 0},
                    {"description", "1 prints a line on stderr at each reduction"}}},
                  {"mode",
                   {{"type", "string"},
                    {"enum", {"auto", "min", "max"}},
                    {"default", "auto"},
                    {"description",
                     "min: lower is better; max: higher is better; auto: max for accuracies, "
                     "auc, precision, recall and IoU, else min (Keras 3's metric directions)"}}},
                  {"min_delta",
                   {{"type", "number"},
                    {"minimum", 0},
                    {"default", 1e-4},
                    {"description", "an improvement must be larger than this"}}},
                  {"epsilon",
                   {{"type", json::array({"number", "null"})},
                    {"minimum", 0},
                    {"default", nullptr},
                    {"description",
                     "tf.keras 2's name for min_delta, read as it (with a warning); null = not "
                     "given"}}},
                  {"cooldown",
                   {{"type", "integer"},
                    {"minimum", 0},
                    {"maximum", 2147483647},  // read as an int
                    {"default", 0},
                    {"description", "epochs to wait after a reduction before counting again"}}},
                  {"min_lr",
                   {{"type", "number"},
                    {"minimum", 0},
                    {"default", 0},
                    {"description", "lower bound on the learning rate"}}}};
    return {"reduce_lr_on_plateau",
            "1.0.0",
            "Reduces the learning rate when a metric has stopped improving (Keras "
            "ReduceLROnPlateau)",
            {{"type", "object"}, {"additionalProperties", false}, {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    Options o;
    o.monitor = options.at("monitor").get<std::string>();
    o.factor = options.at("factor").get<double>();
    if (o.factor >= 1.0)
      throw tandem::ConfigError(setup.config_path + ".options.factor",
                                "must be < 1 (the learning rate is multiplied by it to reduce "
                                "it), got " +
                                    options.at("factor").dump());
    o.patience = static_cast<int>(options.at("patience").get<double>());
    o.verbose = static_cast<int>(options.at("verbose").get<double>());
    const std::string mode = options.at("mode").get<std::string>();
    o.maximize = mode == "max" || (mode == "auto" && tandem::higher_is_better(o.monitor));
    o.min_delta = tandem::plugins::read_renamed_option(
        options, setup.config_path + ".options.", "reduce_lr_on_plateau", "epsilon", "min_delta",
        "tf.keras 2", options.at("min_delta").get<double>(), 1e-4);
    o.cooldown = static_cast<int>(options.at("cooldown").get<double>());
    o.min_lr = options.at("min_lr").get<double>();
    return std::make_shared<ReduceLrOnPlateau>(std::move(o));
  }
};

}  // namespace

TANDEM_PLUGIN(ReduceLrOnPlateauPlugin)
