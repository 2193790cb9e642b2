// Optimizers (Keras names, arguments and update rules).
//
// apply() takes one step over a fixed list of parameters (the same list, in the same order,
// every step; state slots are created on the first step). Weight decay is decoupled, as in
// Keras 3: w -= lr * weight_decay * w before the update. The learning rate may be changed
// between steps (callbacks do), unless it follows a schedule (Keras' LearningRateSchedule as
// the config's learning_rate), which sets it from the step count alone. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optim/learning_rate_schedule.hpp"
#include "optim/loss_scale.hpp"
#include "tandem/parameter.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

namespace backend {
class Backend;
struct OptimizerDesc;
}  // namespace backend

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// "Adam"
  virtual std::string class_name() const = 0;
  /// Keras get_config(): {"name": "adam", "learning_rate": 0.001, ...}
  virtual nlohmann::json config() const = 0;

  /// The rate of the next step: the one set, or the schedule's at iterations().
  double learning_rate() const;
  /// Throws RunError when the rate follows a schedule (Keras refuses to set it too).
  void set_learning_rate(double lr);
  /// The schedule the rate follows (null: none; the rate is set).
  const LearningRateSchedule* schedule() const { return schedule_.get(); }
  void set_schedule(std::shared_ptr<const LearningRateSchedule> schedule) {
    schedule_ = std::move(schedule);
  }
  /// Keras 2's time-based decay (its legacy optimizers' `decay`): step t (1-based) uses
  /// learning_rate() / (1 + decay * (t - 1)). 0 (the default): no decay.
  double decay() const { return decay_; }
  void set_decay(double decay) { decay_ = decay; }
  /// The learning rate of the step iterations() counts (the last one, or the one under way).
  double step_learning_rate() const;
  /// Steps taken so far (Keras' `iterations` variable): calls of apply(), of which every
  /// gradient_accumulation_steps-th updates the weights when that is over 1 (kernel_math's
  /// optimizer_step); a schedule's rate follows this count, as Keras' does.
  std::int64_t iterations() const { return iterations_; }
  void set_iterations(std::int64_t n) { iterations_ = n; }

  /// One update of every parameter from its grad, on the CPU backend (host parameters).
  void apply(const std::vector<Parameter*>& params);
  /// The same on `backend`, whose device holds the parameters, gradients and slots.
  void apply(const std::vector<Parameter*>& params, backend::Backend& backend);
  /// The update rule as the backends run it (backend/kernel_math.hpp).
  virtual backend::OptimizerDesc desc() const = 0;

  /// State slots per parameter, e.g. {"m", "v"} for Adam; slot(i, s) has parameter i's shape.
  /// The value a slot starts from (Adagrad's accumulator: initial_accumulator_value; 0 else).
  virtual float slot_initial_value(std::size_t /*slot*/) const { return 0.0f; }
  virtual std::vector<std::string> slot_names() const = 0;
  std::vector<Tensor>& slots(std::size_t param_index) { return slots_.at(param_index); }
  std::size_t slotted_params() const { return slots_.size(); }
  /// Creates zeroed slots for `params` (apply() does this on its first call).
  void create_slots(const std::vector<Parameter*>& params);

  /// Keras' finalize_variable_values at the end of fit: with use_ema (desc().use_ema), each of
  /// `params` (the host parameters the slots were made for, in apply()'s order) takes its moving
  /// average (the slot after the rule's). Returns whether they did: false without use_ema or before
  /// the first step (no averages yet). When the averages are in the weights already
  /// (averages_in_weights()), the averages take the weights instead — Keras' SwapEMAWeights at
  /// the last epoch — and the weights and averages are both the averages after.
  bool use_moving_averages(const std::vector<Parameter*>& params);
  /// Keras 3's SwapEMAWeights: with use_ema, puts the moving averages into `params`' values and
  /// their values into the averages (in_weights true), or swaps them back (false). Returns
  /// averages_in_weights() after the call: a no-op when it already says `in_weights`, false
  /// without use_ema or before the first step (no averages yet).
  bool swap_moving_averages(const std::vector<Parameter*>& params, bool in_weights);
  /// Whether the weights hold the moving averages and the average slots the weights (above).
  /// Kept in checkpoints; set_averages_in_weights restores it with the slots.
  bool averages_in_weights() const { return averages_in_weights_; }
  void set_averages_in_weights(bool in_weights) { averages_in_weights_ = in_weights; }

  /// Keras' LossScaleOptimizer around this optimizer (optim/loss_scale.hpp): the loss is scaled
  /// by loss_scale_factor() before the backward pass, unscale_gradients() undoes it. Null when
  /// the optimizer is not loss-scaled.
  const LossScale* loss_scale() const { return loss_scale_ ? &*loss_scale_ : nullptr; }
  LossScale* loss_scale() { return loss_scale_ ? &*loss_scale_ : nullptr; }
  void set_loss_scale(const LossScaleConfig& config) { loss_scale_.emplace(config); }
  /// What the loss gradient is multiplied by: the current loss scale, or 1.
  float loss_scale_factor() const;
  /// Divides `grads` (the step's gradients, flat, on `backend`'s device) by the loss scale and
  /// records whether they were finite; returns whether the step is to be applied (false: a
  /// dynamic loss scale skips it, and apply() must not be called). True, with `grads`
  /// untouched, for an optimizer that is not loss-scaled. Throws LossScale::record's RunError.
  bool unscale_gradients(Tensor& grads, backend::Backend& backend);
  /// The class name and get_config() Keras would write for the whole optimizer:
  /// "LossScaleOptimizer" around class_name()/config() when loss-scaled, else those two (also
  /// for Keras 3's loss_scale_factor, which config() carries).
  std::string keras_class_name() const;
  nlohmann::json keras_config() const;

 protected:
  Optimizer(double learning_rate, double weight_decay, double clipnorm, double clipvalue,
            double global_clipnorm);
  nlohmann::json base_config(const std::string& name) const;

  double learning_rate_;
  double weight_decay_;

 private:
  // The index of the moving averages' slot for `params`, or none: no use_ema, or no step yet.
  std::optional<std::size_t> average_slot(const std::vector<Parameter*>& params) const;

  double clipnorm_, clipvalue_, global_clipnorm_;
  double decay_ = 0;
  std::shared_ptr<const LearningRateSchedule> schedule_;  // shared with clones: immutable
  std::int64_t iterations_ = 0;
  std::vector<std::vector<Tensor>> slots_;
  std::optional<LossScale> loss_scale_;
  bool averages_in_weights_ = false;
};

/// "adam" or {"class_name": "Adam", "config": {"learning_rate": 1e-3, ...}}. Known: SGD, Adam,
/// AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam, Lion, and Keras' LossScaleOptimizer
/// around one of them ({"inner_optimizer": ..., "initial_scale", "dynamic_growth_steps", and
/// Keras 2's "dynamic"}: the inner optimizer with set_loss_scale()). Keras 2's legacy `lr` is
/// read as `learning_rate` and its `decay` as set_decay(), each with a warning naming Keras 3's
/// way. Throws ConfigError naming the JSON path.
std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& spec, const std::string& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
