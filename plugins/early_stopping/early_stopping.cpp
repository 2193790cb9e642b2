// early_stopping: Keras EarlyStopping (monitor, min_delta, patience, mode, baseline,
// restore_best_weights, start_from_epoch, verbose) with Lightning's check_finite,
// stopping_threshold and divergence_threshold.
//
// At each epoch end, from start_from_epoch on, the monitored value goes through Lightning's checks
// in Lightning's order: non-finite -> stopping threshold -> divergence threshold -> improvement ->
// patience. Improvement and patience follow Keras 3 exactly: `wait` grows every checked epoch and
// goes back to 0 on an improvement that also beats `baseline`; the run stops when
// wait >= patience (never on the first epoch). A stop publishes an "early_stopping" event with the
// reason and asks the trainer to stop, which then emits "stopped" with the same reason text.
//
// restore_best_weights follows Keras 3: the best epoch's weights are put back in on_train_end
// whenever a best epoch was seen, whether or not training stopped early. The snapshot is a copy of
// the target's template weights (Model::save_weights: weights only, no optimizer slots) and it is
// written back with target().load_weights, which also updates every replica.
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

using nlohmann::json;
using tandem::CallbackContext;
using tandem::Logs;

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

json value_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

struct Options {
  std::string monitor;
  double min_delta = 0;
  int patience = 0;
  int verbose = 0;
  bool maximize = false;
  std::optional<double> baseline, stopping_threshold, divergence_threshold;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
  bool check_finite = true;
};

std::optional<double> optional_number(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}

class EarlyStopping : public tandem::Callback {
 public:
  explicit EarlyStopping(Options o) : o_(std::move(o)) {}
  std::string name() const override { return "early_stopping"; }

  void on_train_begin(CallbackContext&, const Logs&) override {
    wait_ = 0;
    best_ = o_.maximize ? -inf() : inf();
    best_epoch_ = -1;
    stopped_epoch_ = -1;
    best_weights_.reset();
    warned_missing_ = false;
  }

  void on_epoch_end(CallbackContext& ctx, int epoch, const Logs& logs) override {
    const auto value = logs.get(o_.monitor);
    if (!value) {
      warn_missing(logs);
      return;
    }
    if (epoch < o_.start_from_epoch) return;
    const double current = *value;
    // Keras: before any best epoch, the current weights are the best ones.
    if (o_.restore_best_weights && !best_weights_) snapshot(ctx, epoch);

    ++wait_;
    if (o_.check_finite && !std::isfinite(current)) {
      stop(ctx, epoch, current, "non_finite_metric",
           "monitored metric " + o_.monitor + " = " + num(current) +
               " is not finite; the previous best value was " + best_text());
      return;
    }
    if (o_.stopping_threshold && better(current, *o_.stopping_threshold)) {
      // A value past the stopping threshold is also a best value when it improves on the best,
      // so restore_best_weights keeps this epoch.
      if (improves(current, best_)) record_best(ctx, epoch, current);
      stop(ctx, epoch, current, "stopping_threshold",
           "stopping threshold reached: " + o_.monitor + " = " + num(current) +
               (o_.maximize ? " > " : " < ") + num(*o_.stopping_threshold));
      return;
    }
    if (o_.divergence_threshold && better(*o_.divergence_threshold, current)) {
      stop(ctx, epoch, current, "divergence_threshold",
           "divergence threshold reached: " + o_.monitor + " = " + num(current) +
               (o_.maximize ? " < " : " > ") + num(*o_.divergence_threshold));
      return;
    }
    if (improves(current, best_)) {
      record_best(ctx, epoch, current);
      // Only restart the wait when the value beats both the previous best and the baseline.
      if (!o_.baseline || improves(current, *o_.baseline)) wait_ = 0;
      return;
    }
    // With a baseline, what ran out may be epochs that improved without beating it: say so.
    const bool short_of_baseline = o_.baseline && !improves(best_, *o_.baseline);
    if (wait_ >= o_.patience && epoch > 0)
      stop(ctx, epoch, current, "patience_exhausted",
           o_.monitor +
               (short_of_baseline ? " did not beat the baseline " + num(*o_.baseline) + " for "
                                  : " did not improve for ") +
               std::to_string(wait_) + (wait_ == 1 ? " epoch" : " epochs") +
               "; the best value was " + best_text());
  }

  void on_train_end(CallbackContext& ctx, const Logs&) override {
    if (stopped_epoch_ >= 0 && o_.verbose > 0)
      std::fprintf(stderr, "Epoch %d: early stopping\n", stopped_epoch_ + 1);
    if (!o_.restore_best_weights || !best_weights_) return;
    // A run cut in the middle of an epoch (a signal, a non-finite loss) is left as it is: it is
    // meant to be resumed, and its resumable checkpoint must hold the current weights.
    if (ctx.state().batch > 0) return;
    if (o_.verbose > 0)
      std::fprintf(stderr, "Restoring model weights from the end of the best epoch: %d.\n",
                   best_weights_epoch_ + 1);
    ctx.target().load_weights(*best_weights_, "early_stopping: the weights of epoch " +
                                                  std::to_string(best_weights_epoch_ + 1));
    ctx.publish("early_stopping", {{"action", "restore_best_weights"},
                                   {"monitor", o_.monitor},
                                   {"best", value_or_null(best_)},
                                   {"best_epoch", best_weights_epoch_ + 1}});
  }

 private:
  static double inf() { return std::numeric_limits<double>::infinity(); }

  /// a is strictly better than b in this mode.
  bool better(double a, double b) const { return o_.maximize ? a > b : a < b; }
  /// Keras: monitor_op(current - min_delta, reference), min_delta signed towards "better".
  bool improves(double current, double reference) const {
    return o_.maximize ? current - o_.min_delta > reference : current + o_.min_delta < reference;
  }

  std::string best_text() const {
    if (best_epoch_ < 0) return "none yet";
    return num(best_) + " at epoch " + std::to_string(best_epoch_ + 1);
  }

  void snapshot(CallbackContext& ctx, int epoch) {
    tandem::CheckpointData data;
    ctx.target().model().save_weights(data);
    best_weights_ = std::move(data);
    best_weights_epoch_ = epoch;
  }

  void record_best(CallbackContext& ctx, int epoch, double current) {
    best_ = current;
    best_epoch_ = epoch;
    if (o_.restore_best_weights) snapshot(ctx, epoch);
  }

  void stop(CallbackContext& ctx, int epoch, double current, const std::string& reason,
            const std::string& message) {
    stopped_epoch_ = epoch;
    ctx.publish("early_stopping",
                {{"action", "stop"},
                 {"reason", reason},
                 {"message", message},
                 {"epoch", epoch + 1},
                 {"monitor", o_.monitor},
                 {"value", value_or_null(current)},
                 {"best", best_epoch_ >= 0 ? value_or_null(best_) : json()},
                 {"best_epoch", best_epoch_ >= 0 ? json(best_epoch_ + 1) : json()},
                 {"wait", wait_},
                 {"patience", o_.patience}});
    ctx.request_stop("early_stopping: " + message);
  }

  void warn_missing(const Logs& logs) {
    if (warned_missing_) return;
    warned_missing_ = true;
    std::string keys;
    for (const auto& [k, v] : logs.items()) keys += (keys.empty() ? "" : ", ") + k;
    std::fprintf(stderr,
                 "early_stopping: the monitored metric '%s' is not in the logs (available: %s); "
                 "early stopping is inactive\n",
                 o_.monitor.c_str(), keys.c_str());
  }

  Options o_;
  int wait_ = 0;
  double best_ = 0;
  int best_epoch_ = -1, stopped_epoch_ = -1, best_weights_epoch_ = -1;
  std::optional<tandem::CheckpointData> best_weights_;
  bool warned_missing_ = false;
};

json number_or_null(const char* description) {
  return {{"type", json::array({"number", "null"})},
          {"default", nullptr},
          {"description", description}};
}

class EarlyStoppingPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {
        {"monitor",
         {{"type", "string"},
          {"minLength", 1},
          {"default", "val_loss"},
          {"description", "the logs key to watch"}}},
        {"min_delta",
         {{"type", "number"},
          {"minimum", 0},
          {"default", 0},
          {"description", "an improvement must be larger than this"}}},
        {"patience",
         {{"type", "integer"},
          {"minimum", 0},
          {"maximum", 2147483647},  // read as an int
          {"default", 0},
          {"description", "epochs without improvement after which training stops"}}},
        {"verbose",
         {{"type", "integer"},
          {"enum", {0, 1}},
          {"default", 0},
          {"description", "1 prints a line on stderr when the callback acts"}}},
        {"mode",
         {{"type", "string"},
          {"enum", {"auto", "min", "max"}},
          {"default", "auto"},
          {"description",
           "min: lower is better; max: higher is better; auto: max for accuracies, auc, "
           "precision, recall and IoU, else min (Keras 3's metric directions)"}}},
        {"baseline",
         number_or_null("the wait restarts only on values that also beat this baseline")},
        {"restore_best_weights",
         {{"type", "boolean"},
          {"default", false},
          {"description", "at the end of training, put back the weights of the best epoch"}}},
        {"start_from_epoch",
         {{"type", "integer"},
          {"minimum", 0},
          {"maximum", 2147483647},  // read as an int
          {"default", 0},
          {"description", "epochs (0-based) before this one are not monitored (warm-up)"}}},
        {"check_finite",
         {{"type", "boolean"},
          {"default", true},
          {"description", "stop when the monitored value is NaN or infinite (Lightning)"}}},
        {"stopping_threshold",
         number_or_null("stop as soon as the value is better than this (Lightning)")},
        {"divergence_threshold",
         number_or_null("stop as soon as the value is worse than this (Lightning)")}};
    return {"early_stopping",
            "1.0.0",
            "Stops training when a monitored metric stops improving (Keras EarlyStopping, with "
            "Lightning's thresholds and finiteness check)",
            {{"type", "object"}, {"additionalProperties", false}, {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    Options o;
    o.monitor = options.at("monitor").get<std::string>();
    o.min_delta = options.at("min_delta").get<double>();
    o.patience = static_cast<int>(options.at("patience").get<double>());
    o.verbose = static_cast<int>(options.at("verbose").get<double>());
    const std::string mode = options.at("mode").get<std::string>();
    o.maximize = mode == "max" || (mode == "auto" && tandem::higher_is_better(o.monitor));
    o.baseline = optional_number(options.at("baseline"));
    o.restore_best_weights = options.at("restore_best_weights").get<bool>();
    o.start_from_epoch = static_cast<int>(options.at("start_from_epoch").get<double>());
    o.check_finite = options.at("check_finite").get<bool>();
    o.stopping_threshold = optional_number(options.at("stopping_threshold"));
    o.divergence_threshold = optional_number(options.at("divergence_threshold"));
    // Stopping as good and as diverged at once: a value between them would end the run either
    // way, and which reason it gives would depend on the order of the checks.
    if (o.stopping_threshold && o.divergence_threshold &&
        (o.maximize ? *o.stopping_threshold <= *o.divergence_threshold
                    : *o.stopping_threshold >= *o.divergence_threshold))
      throw tandem::ConfigError(setup.config_path + ".options.divergence_threshold",
                                "must be " + std::string(o.maximize ? "below" : "above") +
                                    " stopping_threshold (" +
                                    options.at("stopping_threshold").dump() + ") when " +
                                    o.monitor + " is " + (o.maximize ? "maximised" : "minimised") +
                                    ", got " + options.at("divergence_threshold").dump());
    return std::make_shared<EarlyStopping>(std::move(o));
  }
};

}  // namespace

TANDEM_PLUGIN(EarlyStoppingPlugin)
