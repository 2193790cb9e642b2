// lr_scheduler: sets the learning rate from a closed-form schedule (Keras LearningRateScheduler
// with the schedule given as data instead of a Python function).
//
// t counts epochs (interval "epoch": the 0-based epoch, set in on_epoch_begin) or optimizer steps
// (interval "step": set in on_train_batch_begin). With lr0 = initial_lr:
//   step           lr = lr0 * factor^floor(t / drop_every)
//   exponential    lr = lr0 * decay_rate^t
//   cosine         lr = min_lr + (lr0 - min_lr) * (1 + cos(pi * min(t, T) / T)) / 2,
//                  T = total (default: the run's epochs, or its steps less the warm-up)
//   linear_warmup  lr = lr0 after the warm-up (constant)
// warmup_steps W > 0 puts a linear ramp in front of any schedule, counted in optimizer steps s
// (0-based, since the run began): lr = start + (lr0 - start) * (s + 1) / W for s < W, with
// start = warmup_start_lr; the schedule then takes over, its step clock starting at 0 (t = s - W)
// and its epoch clock unchanged (t = epoch).
#include <cmath>
#include <cstdio>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

// The most epochs or steps an option may count: 2^53, every count a double holds exactly (the
// schedules compute in double), far past any run.
constexpr std::int64_t kMaxCount = std::int64_t{1} << 53;

using nlohmann::json;
using tandem::CallbackContext;
using tandem::ConfigError;
using tandem::Logs;

enum class Kind { step, exponential, cosine, linear_warmup };

struct Options {
  std::string path;  // "callbacks[i].options"
  Kind kind = Kind::step;
  bool per_step = false;
  std::optional<double> initial_lr;
  double factor = 0.1;
  std::int64_t drop_every = 1;
  double decay_rate = 1;
  double min_lr = 0;
  std::optional<std::int64_t> total;
  std::int64_t warmup_steps = 0;
  double warmup_start_lr = 0;
  int verbose = 0;
};

// The cosine clock's length for a run of `epochs` epochs of `steps_per_epoch` steps: `total`, or
// the run's length less the warm-up. Throws when min_lr is 0 and the rate would reach it before
// the run ends (the learning rate must stay > 0).
std::int64_t cosine_length(const Options& o, int epochs, std::int64_t steps_per_epoch) {
  const std::int64_t run_length =
      o.per_step ? static_cast<std::int64_t>(epochs) * steps_per_epoch - o.warmup_steps : epochs;
  const std::int64_t total = o.total ? *o.total : std::max<std::int64_t>(run_length, 1);
  if (o.min_lr == 0 && run_length - 1 >= total)
    throw ConfigError(o.path + ".total",
                      "the cosine schedule reaches min_lr = 0 after " + std::to_string(total) +
                          (o.per_step ? " steps" : " epochs") + " but the run goes on (" +
                          std::to_string(run_length) +
                          "); the learning rate must stay > 0: set min_lr > 0 or a larger total");
  return total;
}

class LrScheduler : public tandem::Callback {
 public:
  explicit LrScheduler(Options o) : o_(std::move(o)) {}
  std::string name() const override { return "lr_scheduler"; }

  void on_train_begin(CallbackContext& ctx, const Logs&) override {
    // Without initial_lr, the rate the run began with: a resumed run's optimizer holds the rate
    // the schedule had reached, so lr0 comes back from the checkpoint (restore_state).
    if (o_.initial_lr)
      lr0_ = *o_.initial_lr;
    else if (!restored_)
      lr0_ = ctx.learning_rate();
    const auto& st = ctx.state();
    if (o_.kind != Kind::cosine) return;
    // The cosine clock's length (checked already when the callback was made for a run of known
    // length), and a check that the rate starts above min_lr.
    total_ = cosine_length(o_, st.epochs, st.steps_per_epoch);
    if (lr0_ < o_.min_lr)
      throw ConfigError(o_.path + ".min_lr", "is above the initial learning rate " +
                                                 std::to_string(lr0_) +
                                                 "; a cosine schedule "
                                                 "decays towards min_lr");
  }

  json saved_state() const override { return {{"initial_lr", lr0_}}; }

  void restore_state(const json& state) override {
    const json* lr =
        state.is_object() && state.contains("initial_lr") ? &state["initial_lr"] : nullptr;
    if (!lr || !lr->is_number() || !std::isfinite(lr->get<double>()) || lr->get<double>() < 0)
      throw std::runtime_error("expected {\"initial_lr\": a finite rate >= 0}, got " +
                               state.dump());
    lr0_ = lr->get<double>();
    restored_ = true;
  }

  void on_epoch_begin(CallbackContext& ctx, int epoch, const Logs&) override {
    epoch_ = epoch;
    // Keras prints the rate every epoch; a per-step schedule's changes every step, unprinted.
    if (o_.verbose > 0 && !o_.per_step)
      std::fprintf(stderr, "Epoch %d: lr_scheduler setting learning rate to %g.\n", epoch + 1,
                   step_rate(ctx.state().step));
    if (o_.per_step || o_.warmup_steps > 0) return;  // set per batch
    ctx.set_learning_rate(rate(epoch));
  }

  void on_train_batch_begin(CallbackContext& ctx, std::int64_t, const Logs&) override {
    if (!o_.per_step && o_.warmup_steps == 0) return;  // set per epoch
    const double lr = step_rate(ctx.state().step);
    if (lr != ctx.learning_rate()) ctx.set_learning_rate(lr);
  }

 private:
  // The rate of step `s` (0-based, counted over the run): the warm-up's ramp, then the schedule
  // on its clock (steps after the warm-up, or the epoch).
  double step_rate(std::int64_t s) const {
    if (s < o_.warmup_steps)
      return o_.warmup_start_lr + (lr0_ - o_.warmup_start_lr) * static_cast<double>(s + 1) /
                                      static_cast<double>(o_.warmup_steps);
    return rate(o_.per_step ? s - o_.warmup_steps : epoch_);
  }

  double rate(std::int64_t t) const {
    const double td = static_cast<double>(t);
    switch (o_.kind) {
      case Kind::step:
        return lr0_ * std::pow(o_.factor, static_cast<double>(t / o_.drop_every));
      case Kind::exponential:
        return lr0_ * std::pow(o_.decay_rate, td);
      case Kind::cosine: {
        const double T = static_cast<double>(total_);
        const double x = std::min(td, T);
        return o_.min_lr + (lr0_ - o_.min_lr) * (1 + std::cos(std::numbers::pi * x / T)) / 2;
      }
      case Kind::linear_warmup:
        return lr0_;
    }
    return lr0_;
  }

  Options o_;
  double lr0_ = 0;
  bool restored_ = false;  // lr0_ came from a checkpoint
  std::int64_t total_ = 1;
  int epoch_ = 0;
};

class LrSchedulerPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    json props = {
        {"schedule",
         {{"type", "string"},
          {"enum", {"step", "exponential", "cosine", "linear_warmup"}},
          {"description", "the formula (see the plugin docs)"}}},
        {"interval",
         {{"type", "string"},
          {"enum", {"epoch", "step"}},
          {"default", "epoch"},
          {"description",
           "what t counts: epochs (set at each epoch begin) or optimizer steps "
           "(set before each batch)"}}},
        {"initial_lr",
         {{"type", json::array({"number", "null"})},
          {"exclusiveMinimum", 0},
          {"default", nullptr},
          {"description", "lr0; null: the optimizer's learning rate when training begins"}}},
        {"factor",
         {{"type", "number"},
          {"exclusiveMinimum", 0},
          {"maximum", 1},
          {"description", "step: the multiplier at each drop (default 0.1)"}}},
        {"drop_every",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", kMaxCount},
          {"description", "step: epochs or steps between drops (required)"}}},
        {"decay_rate",
         {{"type", "number"},
          {"exclusiveMinimum", 0},
          {"maximum", 1},
          {"description", "exponential: the multiplier per epoch or step (required)"}}},
        {"min_lr",
         {{"type", "number"},
          {"minimum", 0},
          {"description", "cosine: the rate at the end of the cosine (default 0)"}}},
        {"total",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", kMaxCount},
          {"description",
           "cosine: epochs or steps from lr0 to min_lr (default: the run's "
           "length, less the warm-up)"}}},
        {"warmup_steps",
         {{"type", "integer"},
          {"minimum", 0},
          {"maximum", kMaxCount},
          {"default", 0},
          {"description",
           "optimizer steps of linear ramp before the schedule; required (>= 1) "
           "by linear_warmup"}}},
        {"warmup_start_lr",
         {{"type", "number"},
          {"minimum", 0},
          {"default", 0},
          {"description",
           "where the ramp starts from (its first step uses start + (lr0 - "
           "start) / warmup_steps)"}}},
        {"verbose",
         {{"type", "integer"},
          {"enum", {0, 1}},
          {"default", 0},
          {"description",
           "1 prints the rate each epoch begins with (not for per-step schedules)"}}}};
    return {"lr_scheduler",
            "1.0.0",
            "Sets the learning rate from a step, exponential, cosine or linear-warmup schedule "
            "(Keras LearningRateScheduler)",
            {{"type", "object"},
             {"additionalProperties", false},
             {"required", json::array({"schedule"})},
             {"properties", props}}};
  }

  std::shared_ptr<tandem::Callback> create(const json& options,
                                           const tandem::CallbackSetup& setup) const override {
    Options o;
    o.path = setup.config_path + ".options";
    const std::string schedule = options.at("schedule").get<std::string>();
    o.kind = schedule == "step"          ? Kind::step
             : schedule == "exponential" ? Kind::exponential
             : schedule == "cosine"      ? Kind::cosine
                                         : Kind::linear_warmup;
    o.per_step = options.at("interval").get<std::string>() == "step";
    if (!options.at("initial_lr").is_null()) o.initial_lr = options.at("initial_lr").get<double>();
    o.warmup_steps = static_cast<std::int64_t>(options.at("warmup_steps").get<double>());
    o.warmup_start_lr = options.at("warmup_start_lr").get<double>();
    o.verbose = static_cast<int>(options.at("verbose").get<double>());

    // Options of one schedule are refused with another: a misplaced key is a mistake.
    const std::pair<const char*, Kind> owners[] = {{"factor", Kind::step},
                                                   {"drop_every", Kind::step},
                                                   {"decay_rate", Kind::exponential},
                                                   {"min_lr", Kind::cosine},
                                                   {"total", Kind::cosine}};
    for (const auto& [key, kind] : owners)
      if (options.contains(key) && kind != o.kind)
        throw ConfigError(o.path + "." + key,
                          "is not used by schedule \"" + schedule + "\"; remove it");
    auto required = [&](const char* key) -> const json& {
      if (!options.contains(key))
        throw ConfigError(o.path + "." + key,
                          "is required by schedule \"" + schedule + "\" (required option)");
      return options.at(key);
    };
    switch (o.kind) {
      case Kind::step:
        o.drop_every = static_cast<std::int64_t>(required("drop_every").get<double>());
        o.factor = options.value("factor", 0.1);
        break;
      case Kind::exponential:
        o.decay_rate = required("decay_rate").get<double>();
        break;
      case Kind::cosine:
        o.min_lr = options.value("min_lr", 0.0);
        if (options.contains("total"))
          o.total = static_cast<std::int64_t>(options.at("total").get<double>());
        if (o.initial_lr && *o.initial_lr < o.min_lr)
          throw ConfigError(o.path + ".min_lr",
                            "is above initial_lr; a cosine schedule decays "
                            "towards min_lr");
        // `tandem check` and `tandem train` say how long the run is: a clock too short for it
        // is refused before the run folder exists.
        if (setup.epochs > 0) cosine_length(o, setup.epochs, setup.steps_per_epoch);
        break;
      case Kind::linear_warmup:
        if (o.warmup_steps < 1)
          throw ConfigError(o.path + ".warmup_steps",
                            "must be >= 1 for schedule \"linear_warmup\"");
        break;
    }
    return std::make_shared<LrScheduler>(std::move(o));
  }
};

}  // namespace

TANDEM_PLUGIN(LrSchedulerPlugin)
