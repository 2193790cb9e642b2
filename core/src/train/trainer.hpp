// Trainer: fit / evaluate / predict, with Keras callbacks and logs.
//
// Human progress output is the "progress" plugin's job; the trainer only publishes events.
// The trainer always works through the meta-model (a ReplicaModel; one replica included), so
// there is one loop for every device layout. It borrows the meta-model, loss and loaders (they
// must outlive it) and owns the training state. Between batches it checks an optional external stop
// flag (set by a signal handler): training then stops at once, without validation, leaving a
// resumable state. One thread drives a trainer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/data_loader.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "parallel/replica_model.hpp"
#include "tandem/callback.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/event_sink.hpp"
#include "tandem/logs.hpp"
#include "tandem/model.hpp"
#include "tandem/training_state.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct FitOptions {
  int epochs = 1;  // train up to this epoch count (a restored state continues towards it)
  /// Batches per epoch (Keras' steps_per_epoch): the first N of each epoch's shuffled order;
  /// 0 = every batch of the data.
  std::int64_t steps_per_epoch = 0;
};

/// What fit() throws when the loss became NaN or infinite and no callback stopped the run for it
/// (terminate_on_nan): after on_train_end, as a stopped run ends (backups are written), the bad
/// step skipped, so the weights are the step before's and the state is positioned at the step
/// that diverged: a checkpoint taken now resumes there.
class DivergedRun : public RunError {
 public:
  /// `where`: "the loss became NaN at epoch E, batch B (step S)".
  explicit DivergedRun(const std::string& where);
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

/// A callback failed in on_train_end: the training itself had ended, so its weights are the
/// run's result (a caller saves them, then reports the failure). what(): the callback's error.
class FailedAfterTraining : public RunError {
 public:
  using RunError::RunError;
};

class Trainer : public CallbackContext {
 public:
  Trainer(ReplicaModel& meta, Objective objective);
  ~Trainer() override;

  /// The run's callbacks. A checkpoint restored before (restore()) hands them their saved states.
  void set_callbacks(CallbackBus bus);
  void set_event_sink(EventSink* sink) { events_ = sink; }
  void set_run_dir(std::filesystem::path dir) { run_dir_ = std::move(dir); }
  /// A flag that, once true, interrupts training at the next batch boundary.
  void set_interrupt_flag(const std::atomic<bool>* flag) { interrupt_ = flag; }
  /// Stored as "run_config" in the training state of every checkpoint() (the resolved run
  /// config), so a checkpoint written by any callback resumes with `tandem train --resume CKPT`
  /// without the config file. Null (the default) stores nothing.
  void set_run_config(nlohmann::json config) { run_config_ = std::move(config); }
  /// Stored as "class_names" in the training state of every checkpoint(): what the model's class
  /// indices stand for (image folders' sub-folder names), for tandem inspect, export and
  /// predict. Empty (the default) stores nothing.
  void set_class_names(std::vector<std::string> names) { class_names_ = std::move(names); }

  /// Trains until `options.epochs` epochs are done (continuing from a restored state), a callback
  /// asks to stop, or the interrupt flag is raised. Returns the history (one Logs per epoch).
  /// Throws DivergedRun on a non-finite loss, naming the epoch and step; FailedAfterTraining
  /// when a callback fails in on_train_end; any other failure as it came (see
  /// failed_between_steps()).
  const std::vector<Logs>& fit(DataLoader& train, DataLoader* validation,
                               const FitOptions& options);
  /// After fit() threw an Error other than those two: whether it failed between two steps of one
  /// process (a batch of bad data, a callback's error, the validation data), so that the weights
  /// are those of the last step done and the state is positioned where it stopped (a failed
  /// on_epoch_end counts its epoch as done): a checkpoint taken now resumes there.
  bool failed_between_steps() const { return failed_between_steps_; }
  /// Throws ShapeError when the data does not fit the model's inputs and outputs (fit() checks
  /// it too; run() asks before it creates the run folder).
  void check_fit_data(const DataLoader& train, const DataLoader* validation) const;
  /// The same check for one dataset `d` of `role` ("training", "validation"), before any
  /// trainer exists (`tandem check`).
  static void check_data_fits(const Model& model, const Objective& objective, const Dataset& d,
                              const std::string& role);
  /// The batches each epoch trains: options.steps_per_epoch, or every batch of `train`.
  /// Throws ConfigError ("steps_per_epoch") when the data has fewer.
  static std::int64_t steps_per_epoch(const DataLoader& train, const FitOptions& options);
  /// Loss and metrics over one pass of `data` (test hooks), without the `val_` prefix.
  Logs evaluate(DataLoader& data);
  /// Model outputs for every sample of `data`, in loader order: (samples, output_shape...).
  Tensor predict(DataLoader& data);

  /// True when the last fit() ended because the interrupt flag was raised.
  bool interrupted() const { return interrupted_; }

  /// Everything needed to resume exactly: weights, optimizer slots, state, RNG streams.
  /// Taken in on_epoch_end (the epoch's logs already in the history), it resumes at the start
  /// of the next epoch. Syncs the template first (contract 2). A meta checkpoint records the
  /// device plan and is refused by restore() on another plan; a template checkpoint loads on any
  /// plan. With Snapshot::shared its tensors are the template's and the optimizer's own, valid
  /// until the next step or restore (the final checkpoint, written at once).
  CheckpointData checkpoint(Target target = Target::template_model,
                            Snapshot snapshot = Snapshot::copy);
  /// Restores what checkpoint() saved into the template and replica 0's optimizer, then copies
  /// them to every replica. Throws DataError naming `source` when it does not fit. Outside fit(),
  /// or from a callback's on_train_begin (CallbackContext::restore); RunError from other hooks.
  void restore(const CheckpointData& data, const std::string& source) override;

  // CallbackContext
  Model& model() override { return meta_.lend_template(); }
  ModelView& target() override;
  void select_target(Target target) override { current_target_ = target; }
  ReplicaModel& meta() { return meta_; }
  const TrainingState& state() const override { return state_; }
  void request_stop(const std::string& reason) override;
  double learning_rate() const override { return meta_.learning_rate(); }
  void set_learning_rate(double lr) override;
  bool has_moving_averages() const override { return meta_.keeps_moving_averages(); }
  bool swap_moving_averages(bool in_weights) override;
  /// A callback's event (CallbackContext::publish): RunError when `event` is empty or one of
  /// the run's own (run_started, epoch_started, batch_ended, epoch_ended, stopped, run_finished,
  /// run_failed), or `fields` is neither an object nor null or holds schema, event or time.
  void publish(const std::string& event, const nlohmann::json& fields) override;
  /// The run's own events, published by the code that runs the trainer (train/run.cpp):
  /// run_started, run_finished, run_failed, its checkpoint_saved.
  void publish_run_event(const std::string& event, const nlohmann::json& fields) {
    emit(event, fields);
  }
  std::filesystem::path run_dir() const override { return run_dir_; }
  int rank() const override { return meta_.world().rank(); }

 private:
  // DataError when `state` is a meta-model checkpoint's state of another device plan than this
  // run's; json::exception when its target or device_plan has the wrong type.
  void refuse_other_plan(const nlohmann::json& state, const std::string& source) const;
  void restore_averages_in_weights(const nlohmann::json& optimizer_state,
                                   const std::string& source);
  struct EpochTotals {
    MetricSum loss;
    std::vector<MetricSum> metrics;
  };
  /// One step; false when the loss was not finite and a callback stopped the run (no update).
  /// `next`: the batch of the following step when known (copied to the devices meanwhile).
  bool train_batch(const Batch& batch, EpochTotals& totals, const Batch* next);
  // fit()'s epochs from the current position; the last finished epoch's logs.
  Logs fit_epochs(DataLoader& train, DataLoader* validation);
  /// Across the ranks of an MPI job: rank 0's learning rate and stop decision everywhere; true
  /// when any rank was interrupted (a signal). In one process: whether it was interrupted.
  bool sync_ranks();
  void check_data(const DataLoader& data, const std::string& role) const;
  Logs logs_of(const EpochTotals& totals) const;
  EpochTotals empty_totals() const;
  void emit(const std::string& event, const nlohmann::json& fields);
  /// `fields` with the optimizer's loss_scale and skipped_steps when it is loss-scaled.
  nlohmann::json with_loss_scale(nlohmann::json fields);

  class View;
  ReplicaModel& meta_;
  Objective objective_;
  std::vector<std::string> metric_names_;  // objective_'s
  std::unique_ptr<View> template_view_, meta_view_;
  Target current_target_ = Target::template_model;
  CallbackBus callbacks_;
  // The callbacks' states of the checkpoint restored last, and where it came from (given to the
  // callbacks when they are set, or at once when they already are).
  nlohmann::json callback_states_;
  std::string callback_states_source_;
  bool callbacks_set_ = false;  // set_callbacks() was called
  // Hands the callbacks their states (once both are known); on rank 0, warns of states that
  // no callback takes.
  void restore_callback_states();
  EventSink* events_ = nullptr;
  std::filesystem::path run_dir_;
  nlohmann::json run_config_;
  std::vector<std::string> class_names_;
  const std::atomic<bool>* interrupt_ = nullptr;
  TrainingState state_;
  EpochTotals partial_;  // totals of the current, unfinished epoch (saved on interrupt)
  bool interrupted_ = false;
  std::string divergence_;       // why the fit stopped on a non-finite loss: thrown as DivergedRun
  bool between_steps_ = true;  // false while an update is applied: a failure then is not resumable
  bool failed_between_steps_ = false;
  bool restore_locked_ = false;  // inside fit(), past on_train_begin: restore() is refused
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
