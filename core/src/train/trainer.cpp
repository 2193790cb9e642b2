#include "train/trainer.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "tandem/error.hpp"
#include "train/trainer_view.hpp"

namespace tandem {

DivergedRun::DivergedRun(const std::string& where)
    : RunError(where +
               "; the weights of the previous step are kept. Lower the learning rate, check the "
               "data for NaN or extreme values, or clip gradients (clipnorm)."),
      where_(where) {}

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The training loader, one batch ahead: the step in flight can copy the next batch to its
// devices meanwhile (ReplicaModel::forward_backward's `next`). An error reading ahead is held
// back until that batch's turn, so a bad batch fails the run exactly where it would without the
// look-ahead, after the steps before it.
class LookaheadLoader {
 public:
  explicit LookaheadLoader(DataLoader& loader) : loader_(loader) { fetch(); }

  /// The batch for this step (false at the end of the epoch); reads the one after it.
  bool next(Batch& out) {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if (!has_ahead_) return false;
    out = std::move(ahead_);
    ahead_ = Batch();
    fetch();
    return true;
  }
  /// The batch the following next() returns, if it is known and readable.
  const Batch* peek() const { return has_ahead_ ? &ahead_ : nullptr; }

 private:
  void fetch() {
    try {
      has_ahead_ = loader_.next(ahead_);
    } catch (...) {
      has_ahead_ = false;
      error_ = std::current_exception();
    }
  }

  DataLoader& loader_;
  Batch ahead_;
  bool has_ahead_ = false;
  std::exception_ptr error_;
};

}  // namespace

Trainer::Trainer(ReplicaModel& meta, Objective objective)
    : meta_(meta), objective_(std::move(objective)), metric_names_(objective_.metric_names()) {
  partial_ = empty_totals();
}

namespace {

// The data's samples against the model's inputs: one array per input, or the inputs packed.
void check_inputs(const Model& model, const Dataset& d, const std::string& role) {
  const std::vector<Shape> parts = d.x_parts();
  const std::string where = " (" + d.describe() + ")";
  if (parts.size() == 1 || model.input_count() == 1) {
    if (d.x_shape() != model.input_shape())
      throw ShapeError("the " + role + " data has samples of shape " +
                       shape_to_string(d.x_shape(), true) + " but model '" + model.name() +
                       "' expects " + shape_to_string(model.input_shape(), true) +
                       (model.input_count() > 1 ? " (its " + std::to_string(model.input_count()) +
                                                      " inputs packed)"
                                                : "") +
                       where);
    return;
  }
  if (parts.size() != model.input_count())
    throw ShapeError("the " + role + " data has " + std::to_string(parts.size()) +
                     " input arrays, but model '" + model.name() + "' has " +
                     std::to_string(model.input_count()) + " inputs" + where);
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (parts[i] != model.input_shape(i))
      throw ShapeError("the " + role + " data's input array " + std::to_string(i) +
                       " has samples of shape " + shape_to_string(parts[i], true) +
                       " but input '" + model.input_name(i) + "' expects " +
                       shape_to_string(model.input_shape(i), true) + where);
}

}  // namespace

void Trainer::check_data(const DataLoader& data, const std::string& role) const {
  check_data_fits(meta_.template_model(), objective_, data.dataset(), role);
}

void Trainer::check_data_fits(const Model& model, const Objective& objective, const Dataset& d,
                              const std::string& role) {
  check_inputs(model, d, role);
  if (!d.labeled())
    throw DataError("the " + role +
                    " data has no targets (no \"y\"): data without them can be "
                    "predicted (tandem predict), not used for " +
                    role + " (" + d.describe() + ")");
  try {
    objective.check_targets(model, d.y_parts(), d.weight_count());
  } catch (const ShapeError& e) {
    throw ShapeError("the " + role + " data does not fit the model: " + e.what() + " (" +
                     d.describe() + ")");
  }
}

std::int64_t Trainer::steps_per_epoch(const DataLoader& train, const FitOptions& options) {
  const std::int64_t batches = train.batches_per_epoch();
  if (options.steps_per_epoch <= 0) return batches;
  if (options.steps_per_epoch > batches)
    throw ConfigError("steps_per_epoch",
                      std::to_string(options.steps_per_epoch) + " steps, but the data gives " +
                          std::to_string(batches) + " batches of " +
                          std::to_string(train.options().batch_size) +
                          " per epoch; give at most " + std::to_string(batches) +
                          " (each epoch takes the first steps of its own shuffled order)");
  return options.steps_per_epoch;
}

void Trainer::check_fit_data(const DataLoader& train, const DataLoader* validation) const {
  check_data(train, "training");
  if (validation) check_data(*validation, "validation");
}

Trainer::EpochTotals Trainer::empty_totals() const {
  EpochTotals t;
  t.metrics.resize(objective_.part_count());
  return t;
}

Logs Trainer::logs_of(const EpochTotals& totals) const {
  Logs logs;
  logs.set("loss", totals.loss.mean());
  const std::vector<double> values = objective_.values(totals.metrics);
  for (std::size_t i = 0; i < metric_names_.size(); ++i) logs.set(metric_names_[i], values[i]);
  return logs;
}

void Trainer::emit(const std::string& event, const json& fields) {
  if (events_) events_->emit(event, fields);
  callbacks_.event(*this, event, fields);
}

json Trainer::with_loss_scale(json fields) {
  if (const LossScale* scale = meta_.loss_scale()) {
    fields["loss_scale"] = scale->scale();
    fields["skipped_steps"] = scale->skipped_steps();
  }
  return fields;
}

void Trainer::publish(const std::string& event, const json& fields) {
  static const std::set<std::string> runs_own = {"run_started", "epoch_started", "batch_ended",
                                                 "epoch_ended", "stopped",       "run_finished",
                                                 "run_failed"};
  if (event.empty()) throw RunError("publish: the event needs a name");
  if (runs_own.count(event))
    throw RunError("publish: '" + event +
                   "' is one of the run's own events; give yours a name that says it is yours");
  if (!fields.is_object() && !fields.is_null())
    throw RunError("publish: the fields of '" + event + "' must be a JSON object, got " +
                   std::string(fields.type_name()));
  for (const char* key : {"schema", "event", "time"})
    if (fields.is_object() && fields.contains(key))
      throw RunError("publish: '" + event + "' has a field named '" + key +
                     "', which every event line sets itself (docs/events.md)");
  emit(event, fields.is_null() ? json::object() : fields);
}

void Trainer::request_stop(const std::string& reason) {
  if (!state_.stop_requested) state_.stop_reason = reason;
  state_.stop_requested = true;
}

bool Trainer::swap_moving_averages(bool in_weights) {
  return meta_.swap_moving_averages(in_weights);
}

void Trainer::set_learning_rate(double lr) {
  if (!(lr > 0) || !std::isfinite(lr)) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", lr);  // 0, -1, nan, 1e-30: as written
    throw RunError(std::string("learning rate must be a positive finite number, got ") + text);
  }
  meta_.set_learning_rate(lr);
}

bool Trainer::sync_ranks() {
  World& world = meta_.world();
  const bool interrupted_here = interrupt_ && interrupt_->load();
  if (world.size() == 1) return interrupted_here;
  // Callbacks run on rank 0 (unless they ask for every rank): its learning rate and its stop
  // decision hold everywhere; an interrupt on any rank (a signal) stops every rank at this batch.
  const double mine[3] = {learning_rate(), state_.stop_requested ? 1.0 : 0.0,
                          interrupted_here ? 1.0 : 0.0};
  const std::vector<double> all = world.all_gather(mine, 3);
  bool interrupted = false;
  for (int r = 0; r < world.size(); ++r) interrupted = interrupted || all[3 * r + 2] != 0;
  if (all[0] != learning_rate()) meta_.set_learning_rate(all[0]);
  const bool stop = all[1] != 0;
  if (stop) {
    const std::string reason = world.all_gather_bytes(state_.stop_reason).front();
    state_.stop_requested = true;
    state_.stop_reason = reason;
  } else {
    state_.stop_requested = false;
  }
  return interrupted;
}

bool Trainer::train_batch(const Batch& batch, EpochTotals& totals, const Batch* next) {
  const StepSums sums = meta_.forward_backward(batch, objective_, next);
  const double loss_sum = sums.loss.sum;
  if (!std::isfinite(loss_sum)) {
    // Callbacks see the bad batch (Keras passes the NaN loss to on_train_batch_end): one of them
    // (terminate_on_nan) may stop the run cleanly. Otherwise the run fails. The update is skipped
    // either way, so the weights are those of the previous step.
    Logs logs = logs_of(totals);
    logs.set("loss", loss_sum);
    callbacks_.train_batch_end(*this, state_.batch, logs);
    sync_ranks();
    if (state_.stop_requested) return false;
    divergence_ = "the loss became " + std::string(std::isnan(loss_sum) ? "NaN" : "infinite") +
                  " at epoch " + std::to_string(state_.epoch + 1) + ", batch " +
                  std::to_string(state_.batch + 1) + " (step " + std::to_string(state_.step + 1) +
                  ")";
    request_stop(divergence_);
    return false;
  }
  totals.loss.add(sums.loss);
  for (std::size_t i = 0; i < totals.metrics.size(); ++i) totals.metrics[i].add(sums.metrics[i]);
  between_steps_ = false;  // until the step is counted (fit)
  meta_.apply_update();
  return true;
}

const std::vector<Logs>& Trainer::fit(DataLoader& train, DataLoader* validation,
                                      const FitOptions& options) {
  failed_between_steps_ = false;
  check_fit_data(train, validation);
  const std::int64_t steps = steps_per_epoch(train, options);
  const bool limited = options.steps_per_epoch > 0;
  const auto check_resume_position = [&] {
    if (state_.batch > 0 && state_.steps_per_epoch != steps)
      throw ConfigError(limited ? "steps_per_epoch" : "batch_size",
                        "the run was saved in the middle of an epoch of " +
                            std::to_string(state_.steps_per_epoch) + " batches, but this " +
                            (limited ? "data, batch size and steps_per_epoch give "
                                     : "data and batch size give ") +
                            std::to_string(steps) + "; resume with the same " +
                            (limited ? "data, batch_size and steps_per_epoch"
                                     : "data and batch_size"));
    state_.steps_per_epoch = steps;
  };
  check_resume_position();
  state_.epochs = options.epochs;
  state_.stop_requested = false;
  state_.stop_reason.clear();
  interrupted_ = false;
  divergence_.clear();
  // A callback may restore a checkpoint in on_train_begin (backup_and_restore); from then on the
  // position is fixed until fit() returns or throws.
  struct Unlock {
    bool& locked;
    ~Unlock() { locked = false; }
  } unlock{restore_locked_};
  callbacks_.train_begin(*this, Logs{});
  restore_locked_ = true;
  if (meta_.world().size() > 1) {
    // A callback on rank 0 may have restored a backup: its weights and position hold everywhere.
    meta_.broadcast_from_rank0();
    std::int64_t position[3] = {state_.epoch, state_.batch, state_.step};
    meta_.world().broadcast(position, sizeof position, 0);
    state_.epoch = static_cast<int>(position[0]);
    state_.batch = position[1];
    state_.step = position[2];
    sync_ranks();
  }
  check_resume_position();
  Logs last_logs;
  try {
    between_steps_ = true;
    last_logs = fit_epochs(train, validation);
  } catch (const Error&) {
    // A failure between steps leaves a state a checkpoint resumes exactly (the weights of the
    // last step): the caller may save it. Under MPI the other ranks are stopped by the abort.
    failed_between_steps_ = between_steps_ && meta_.world().size() == 1;
    throw;
  }
  // Keras' fit ends so (finalize_variable_values, before on_train_end); an interrupted or
  // diverged run keeps its own weights, to resume from.
  // Averages a callback swapped into the weights stay there (the optimizer knows).
  if (!interrupted_ && divergence_.empty() && meta_.use_moving_averages())
    spdlog::info(
        "optimizer.use_ema: the trained weights take their moving averages, as Keras' "
        "fit ends");
  try {
    callbacks_.train_end(*this, last_logs);
  } catch (const RunError& e) {
    throw FailedAfterTraining(e.what());
  }
  if (!divergence_.empty()) throw DivergedRun(divergence_);
  return state_.history;
}

Logs Trainer::fit_epochs(DataLoader& train, DataLoader* validation) {
  Logs last_logs;
  bool nan_stop = false;
  while (state_.epoch < state_.epochs) {
    const int epoch = state_.epoch;
    const bool resumed = state_.batch > 0;
    if (!resumed) partial_ = empty_totals();
    callbacks_.epoch_begin(*this, epoch, Logs{});
    sync_ranks();
    emit("epoch_started", {{"epoch", epoch + 1},
                           {"epochs", state_.epochs},
                           {"steps", state_.steps_per_epoch},
                           {"resumed_at_batch", state_.batch}});
    train.start_epoch(epoch, state_.batch);
    const auto epoch_start = Clock::now();
    std::int64_t samples = 0;
    Batch batch;
    LookaheadLoader batches(train);
    while (state_.batch < state_.steps_per_epoch && batches.next(batch)) {
      callbacks_.train_batch_begin(*this, state_.batch, Logs{});
      if (meta_.world().size() > 1) sync_ranks();  // the learning rate a scheduler just set
      if (meta_.averages_in_weights()) swap_moving_averages(false);  // steps train the weights
      if (!train_batch(batch, partial_, batches.peek())) {
        emit("stopped", {{"reason", state_.stop_reason},
                         {"epoch", epoch + 1},
                         {"batch", state_.batch},
                         {"step", state_.step}});
        nan_stop = true;
        break;
      }
      samples += batch.whole_size();
      ++state_.batch;
      ++state_.step;
      between_steps_ = true;
      Logs logs = logs_of(partial_);
      callbacks_.train_batch_end(*this, state_.batch - 1, logs);
      const double secs = std::chrono::duration<double>(Clock::now() - epoch_start).count();
      emit("batch_ended", with_loss_scale({{"epoch", epoch + 1},
                                           {"batch", state_.batch},
                                           {"step", state_.step},
                                           {"size", batch.whole_size()},
                                           {"logs", logs.to_json()},
                                           {"lr", learning_rate()},
                                           {"samples_per_sec", secs > 0 ? samples / secs : 0.0}}));
      if (sync_ranks()) {
        interrupted_ = true;
        break;
      }
      if (state_.stop_requested) break;
    }
    if (nan_stop) break;
    if (interrupted_) {
      request_stop("interrupted by a signal");
      emit("stopped", {{"reason", state_.stop_reason},
                       {"epoch", epoch + 1},
                       {"batch", state_.batch},
                       {"step", state_.step}});
      break;
    }
    const double train_secs = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    Logs epoch_logs = logs_of(partial_);
    if (validation) epoch_logs.merge(evaluate(*validation), "val_");
    state_.history.push_back(epoch_logs);
    json fields = {{"epoch", epoch + 1},
                   {"logs", epoch_logs.to_json()},
                   {"lr", learning_rate()},
                   {"seconds", std::chrono::duration<double>(Clock::now() - epoch_start).count()},
                   {"samples_per_sec", train_secs > 0 ? samples / train_secs : 0.0},
                   {"data_wait_seconds", train.wait_seconds()},
                   {"skipped_files", train.dataset().skipped_files()}};
    emit("epoch_ended", with_loss_scale(std::move(fields)));
    const std::int64_t batches_done = state_.batch;
    const auto end_epoch = [&] {
      state_.epoch = epoch + 1;
      state_.batch = 0;
      partial_ = empty_totals();
    };
    try {
      callbacks_.epoch_end(*this, epoch, epoch_logs);
    } catch (const Error&) {
      end_epoch();  // its history is written: a resume goes on with the next epoch
      throw;
    }
    sync_ranks();
    last_logs = epoch_logs;
    end_epoch();
    if (state_.stop_requested) {
      emit("stopped", {{"reason", state_.stop_reason},
                       {"epoch", epoch + 1},
                       {"batch", batches_done},
                       {"step", state_.step}});
      break;
    }
  }
  return last_logs;
}

Logs Trainer::evaluate(DataLoader& data) {
  check_data(data, "evaluation");
  EpochTotals totals = empty_totals();
  callbacks_.test_begin(*this, Logs{});
  data.start_epoch(0);
  Batch batch;
  std::int64_t i = 0;
  while (data.next(batch)) {
    callbacks_.test_batch_begin(*this, i, Logs{});
    const StepSums sums = meta_.evaluate(batch, objective_);
    totals.loss.add(sums.loss);
    for (std::size_t m = 0; m < totals.metrics.size(); ++m) totals.metrics[m].add(sums.metrics[m]);
    Logs logs = logs_of(totals);
    callbacks_.test_batch_end(*this, i, logs);
    ++i;
  }
  Logs logs = logs_of(totals);
  callbacks_.test_end(*this, logs);
  return logs;
}

Tensor Trainer::predict(DataLoader& data) {
  check_inputs(meta_.template_model(), data.dataset(), "prediction");
  Shape shape{data.dataset().size()};
  for (auto d : meta_.template_model().output_shape()) shape.push_back(d);
  Tensor out(shape);
  const std::int64_t row = shape_size(meta_.template_model().output_shape());
  callbacks_.predict_begin(*this, Logs{});
  data.start_epoch(0);
  Batch batch;
  std::int64_t i = 0, offset = 0;
  while (data.next(batch)) {
    callbacks_.predict_batch_begin(*this, i, Logs{});
    meta_.predict(batch.x, out.data() + offset * row);
    offset += batch.size();
    callbacks_.predict_batch_end(*this, i++, Logs{});
  }
  callbacks_.predict_end(*this, Logs{});
  return out;
}

}  // namespace tandem
