// Callback: code that runs at the Keras hooks of fit / evaluate / predict.
//
// Hooks receive a CallbackContext (the model, the training state, stop requests, the learning
// rate, event publishing, the run folder) and Keras-style logs. Epoch numbers are 0-based, as
// Keras passes them. Hooks run on the training thread, one callback after another in config
// order; an exception from a hook stops the run with an error naming the callback.
//
// Ownership: the trainer owns the callbacks (a plugin's factory makes them; the plugin's library
// stays loaded while any lives) and the CallbackContext; a hook may keep nothing it borrowed from
// the context beyond the call. Thread-safety: hooks are called from the training thread only,
// one at a time; a callback that starts threads of its own joins them before it is destroyed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/export.hpp"
#include "tandem/logs.hpp"
#include "tandem/model_view.hpp"
#include "tandem/training_state.hpp"

namespace tandem {

/// What a callback can see and do. Owned by the trainer; valid during the hook call.
class TANDEM_EXPORT CallbackContext {
 public:
  virtual ~CallbackContext() = default;
  /// This callback's target: the template or the meta-model (from its config's "target").
  virtual ModelView& target() = 0;
  /// The template model (device-agnostic; current whenever looked at) = target().model().
  virtual Model& model() = 0;
  virtual const TrainingState& state() const = 0;
  /// Asks training to stop at the next batch boundary (after finishing the epoch's bookkeeping).
  virtual void request_stop(const std::string& reason) = 0;
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(double lr) = 0;
  /// Adds an event to the run's event stream.
  virtual void publish(const std::string& event, const nlohmann::json& fields) = 0;
  /// The run folder (empty when the trainer runs without one).
  virtual std::filesystem::path run_dir() const = 0;
  virtual int rank() const { return 0; }
  /// Restores a resumable checkpoint (target().checkpoint(true): weights, optimizer slots,
  /// epoch/batch/step, history, RNG states) into the running fit. Only from on_train_begin:
  /// training then continues from the restored epoch and batch, exactly as `--resume` would.
  /// Throws DataError naming `source` when it does not fit this run, RunError from other hooks
  /// (and from contexts that cannot restore: the default).
  virtual void restore(const CheckpointData& data, const std::string& source);
  /// Called by the CallbackBus before each callback's hook: which target() it sees.
  virtual void select_target(Target target) = 0;
  /// Whether the optimizer keeps moving averages of the weights (its config's use_ema).
  virtual bool has_moving_averages() const { return false; }
  /// Keras 3's SwapEMAWeights (the swap_ema_weights plugin): the model's trainable weights —
  /// the template's and every replica's — and the optimizer's moving averages swap places
  /// (in_weights true: the averages in the weights), or swap back (false). Returns whether the
  /// averages are in the weights after the call: false without use_ema or before the first
  /// step (no averages yet); nothing changes when they already are where asked. Checkpoints
  /// taken meanwhile hold them swapped and say so, and resume so; the next training step swaps
  /// them back first; a fit that ends with the averages in the weights keeps them there
  /// (Keras' finalize_variable_values). Throws RunError from contexts without an optimizer
  /// (the default).
  virtual bool swap_moving_averages(bool in_weights);
};

class TANDEM_EXPORT Callback {
 public:
  virtual ~Callback() = default;
  virtual std::string name() const = 0;

  virtual void on_train_begin(CallbackContext&, const Logs&) {}
  virtual void on_train_end(CallbackContext&, const Logs&) {}
  virtual void on_epoch_begin(CallbackContext&, int /*epoch*/, const Logs&) {}
  virtual void on_epoch_end(CallbackContext&, int /*epoch*/, const Logs&) {}
  virtual void on_train_batch_begin(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  virtual void on_train_batch_end(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  virtual void on_test_begin(CallbackContext&, const Logs&) {}
  virtual void on_test_end(CallbackContext&, const Logs&) {}
  virtual void on_test_batch_begin(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  virtual void on_test_batch_end(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  virtual void on_predict_begin(CallbackContext&, const Logs&) {}
  virtual void on_predict_end(CallbackContext&, const Logs&) {}
  virtual void on_predict_batch_begin(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  virtual void on_predict_batch_end(CallbackContext&, std::int64_t /*batch*/, const Logs&) {}
  /// Every event of the run's stream (run_started, batch_ended, checkpoint_saved, ...), as the
  /// engine or another callback published it: `fields` without schema/event/time. The built-in
  /// "events" plugin writes them to events.jsonl.
  virtual void on_event(CallbackContext&, const std::string& /*event*/,
                        const nlohmann::json& /*fields*/) {}

  /// What this callback must carry across a `--resume` (a schedule's base rate, a plateau's best
  /// value and wait): saved in every checkpoint that holds a training state, and handed back to
  /// the callback of the resumed run with the same name and the same place among the callbacks
  /// of that name, through restore_state(), before its on_train_begin (or when a callback
  /// restores a checkpoint, e.g. a backup, during on_train_begin). null (the default): nothing.
  /// Called on the training thread.
  virtual nlohmann::json saved_state() const { return nullptr; }
  /// Takes back what saved_state() returned in the run that wrote the checkpoint; a state it
  /// cannot read is an exception (the run stops naming the callback and the checkpoint).
  virtual void restore_state(const nlohmann::json& /*state*/) {}
};

/// Calls every hook on each callback in order; wraps a callback's exception in a RunError that
/// names the callback and the hook. Shares ownership of its callbacks.
class TANDEM_EXPORT CallbackBus {
 public:
  void add(std::shared_ptr<Callback> callback, Target target = Target::template_model) {
    callbacks_.push_back(std::move(callback));
    targets_.push_back(target);
  }
  bool empty() const { return callbacks_.empty(); }
  const std::vector<std::shared_ptr<Callback>>& callbacks() const { return callbacks_; }

  void train_begin(CallbackContext& c, const Logs& l);
  void train_end(CallbackContext& c, const Logs& l);
  void epoch_begin(CallbackContext& c, int epoch, const Logs& l);
  void epoch_end(CallbackContext& c, int epoch, const Logs& l);
  void train_batch_begin(CallbackContext& c, std::int64_t batch, const Logs& l);
  void train_batch_end(CallbackContext& c, std::int64_t batch, const Logs& l);
  void test_begin(CallbackContext& c, const Logs& l);
  void test_end(CallbackContext& c, const Logs& l);
  void test_batch_begin(CallbackContext& c, std::int64_t batch, const Logs& l);
  void test_batch_end(CallbackContext& c, std::int64_t batch, const Logs& l);
  void predict_begin(CallbackContext& c, const Logs& l);
  void predict_end(CallbackContext& c, const Logs& l);
  void predict_batch_begin(CallbackContext& c, std::int64_t batch, const Logs& l);
  void predict_batch_end(CallbackContext& c, std::int64_t batch, const Logs& l);
  void event(CallbackContext& c, const std::string& name, const nlohmann::json& fields);

  /// Every callback's non-null saved_state(), keyed by its name, "#2", "#3"... appended to the
  /// second and later callbacks of one name: {"lr_scheduler": {...}}.
  nlohmann::json saved_states() const;
  /// Hands each callback its entry of `states` (as saved_states() made it; a callback without
  /// one is left as it is). A callback's failure is a DataError naming it and `source`.
  void restore_states(const nlohmann::json& states, const std::string& source);
  /// The keys of `states` that name no callback of this bus (a callback left out of the config
  /// since the checkpoint was saved), in the states' order.
  std::vector<std::string> states_of_no_callback(const nlohmann::json& states) const;

 private:
  // Calls f on every callback in order; the first failure stops there and is thrown as a
  // RunError naming the callback, or with `reach_every_callback` is thrown after the others ran.
  template <class F>
  void each(CallbackContext& c, const char* hook, F&& f, bool reach_every_callback = false);
  void select(CallbackContext& c, Target target);
  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::vector<Target> targets_;
  // The target selected for the hook running now: a hook that publishes an event runs the
  // other callbacks' on_event inside it, and gets its own target back after them.
  Target selected_ = Target::template_model;
};

}  // namespace tandem
