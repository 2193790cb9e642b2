// Trainer::checkpoint / restore: the complete state needed to resume a run exactly.
#include <cstdint>

#include <spdlog/spdlog.h>

#include "tandem/error.hpp"
#include "train/trainer.hpp"

namespace tandem {

using nlohmann::json;

namespace {

// "<layer>/<weight>" for each trainable parameter, in Model::trainable_parameters() order.
std::vector<std::string> trainable_names(Model& model) {
  std::vector<std::string> names;
  for (std::size_t li = 0; li < model.layer_count(); ++li) {
    Layer& layer = model.layer(li);
    if (!layer.trainable()) continue;
    for (Parameter* p : layer.parameters())
      if (p->trainable) names.push_back(layer.name() + "/" + p->name);
  }
  return names;
}

MetricSum sum_of(const json& pair) {
  return {pair.at(0).get<double>(), pair.at(1).get<double>()};
}

Logs logs_from_json(const json& j) {
  Logs logs;
  for (auto it = j.begin(); it != j.end(); ++it)
    logs.set(it.key(), it.value().is_number() ? it.value().get<double>() : std::nan(""));
  return logs;
}

// Keras' training_config attribute, what compile() was given, from the run config: Keras'
// load_model compiles the model from it, and `tandem import` reads it back. Null without a run
// config (a trainer driven from code).
json training_config_of(const json& run_config, const Optimizer& optimizer) {
  if (!run_config.is_object() || !run_config.contains("loss")) return json();
  const auto value = [&](const char* key, const json& fallback) {
    return run_config.contains(key) ? run_config.at(key) : fallback;
  };
  return {{"loss", run_config.at("loss")},
          {"metrics", value("metrics", json::array())},
          {"weighted_metrics", value("weighted_metrics", json())},
          {"loss_weights", value("loss_weights", json())},
          {"optimizer_config",
           {{"class_name", optimizer.keras_class_name()}, {"config", optimizer.keras_config()}}}};
}

}  // namespace

CheckpointData Trainer::checkpoint(Target target, Snapshot snapshot) {
  Model& model = meta_.template_model();
  Optimizer& optimizer = meta_.optimizer();
  CheckpointData data;
  model.save_weights(data, snapshot);
  TrainingStateData t;
  json history = json::array();
  for (const auto& logs : state_.history) history.push_back(logs.to_json());
  // In on_epoch_end the epoch is complete (its logs are in the history) while state_.epoch still
  // names it: such a checkpoint resumes at the start of the next epoch, not by redoing the end of
  // this one (which would validate again and add its logs to the history twice).
  const bool epoch_done = state_.history.size() > static_cast<std::size_t>(state_.epoch);
  const EpochTotals partial = epoch_done ? empty_totals() : partial_;
  json partial_metrics = json::array();
  for (const auto& m : partial.metrics) partial_metrics.push_back({m.sum, m.count});
  t.state = {
      {"epoch", epoch_done ? state_.epoch + 1 : state_.epoch},
      {"batch", epoch_done ? std::int64_t{0} : state_.batch},
      {"step", state_.step},
      {"epochs", state_.epochs},
      {"steps_per_epoch", state_.steps_per_epoch},
      {"history", history},
      {"target", target_name(target)},
      {"device_plan",
       [&] {
         json plan = meta_.plan().to_json();
         plan["plan"] = meta_.plan_text();  // "2x(cpu:1)" across two processes
         plan["world_size"] = meta_.world().size();
         plan["replicas_total"] = meta_.total_size();  // of every rank
         return plan;
       }()},
      {"partial", {{"loss", {partial.loss.sum, partial.loss.count}}, {"metrics", partial_metrics}}},
      {"optimizer",
       {{"class_name", optimizer.keras_class_name()},
        {"config", optimizer.keras_config()},
        {"learning_rate", optimizer.learning_rate()},
        {"iterations", optimizer.iterations()}}}};
  if (const LossScale* scale = optimizer.loss_scale())
    t.state["optimizer"]["loss_scale"] = scale->state();
  if (optimizer.averages_in_weights()) t.state["optimizer"]["averages_in_weights"] = true;
  if (!run_config_.is_null()) t.state["run_config"] = run_config_;
  // The lengths the model was built for where its config leaves them to the data (the
  // model_config keeps Keras' nulls): what tandem export builds the model for.
  if (model.has_lengths_from_data()) {
    json shapes = json::array();
    for (std::size_t i = 0; i < model.input_count(); ++i) shapes.push_back(model.input_shape(i));
    t.state["input_shapes"] = shapes;
  }
  data.training_config = training_config_of(run_config_, optimizer);
  if (!class_names_.empty()) t.state["class_names"] = class_names_;
  if (json states = callbacks_.saved_states(); !states.empty()) t.state["callbacks"] = states;
  // Optimizer slots, named "<layer>/<weight>/<slot>" after the parameters they serve.
  const auto params = model.trainable_parameters();
  const auto names = trainable_names(model);
  const auto slot_names = optimizer.slot_names();
  if (optimizer.slotted_params() == params.size()) {
    for (std::size_t i = 0; i < params.size(); ++i)
      for (std::size_t s = 0; s < slot_names.size(); ++s)
        t.optimizer_slots.push_back(
            {names[i] + "/" + slot_names[s],
             snapshot == Snapshot::copy ? optimizer.slots(i)[s].clone() : optimizer.slots(i)[s]});
  }
  for (std::size_t li = 0; li < model.layer_count(); ++li) {
    auto state = model.layer(li).random_state();
    if (!state.empty()) t.rng_states[model.layer(li).name()] = std::move(state);
  }
  data.training = std::move(t);
  return data;
}

void Trainer::refuse_other_plan(const json& state, const std::string& source) const {
  if (!state.is_object() || !state.contains("target") || state.at("target") != "meta" ||
      !state.contains("device_plan"))
    return;
  const std::string saved = state.at("device_plan").value("plan", std::string("?"));
  if (saved != meta_.plan_text())
    throw DataError(source + ": is a checkpoint of the meta-model on device plan '" + saved +
                    "', and this run's plan is '" + meta_.plan_text() + "'. Resume it on '" +
                    saved +
                    "', or load its template part (the same weights) on any plan with "
                    "--weights, or checkpoint with target \"template\".");
}

// A checkpoint taken while a callback had the moving averages in the weights (swap_ema_weights)
// holds them swapped: the optimizer takes the flag with the slots, to swap them back.
void Trainer::restore_averages_in_weights(const json& optimizer_state, const std::string& source) {
  const json in_weights = optimizer_state.value("averages_in_weights", json(false));
  if (!in_weights.is_boolean())
    throw DataError(source + ": the optimizer's averages_in_weights is " + in_weights.dump() +
                    ", not true or false");
  if (in_weights.get<bool>() && !meta_.keeps_moving_averages())
    throw DataError(source +
                    ": holds the optimizer's moving averages in the weights (swapped by "
                    "swap_ema_weights), but the optimizer config has no use_ema; resume with "
                    "the same optimizer");
  meta_.optimizer().set_averages_in_weights(in_weights.get<bool>());
}

void Trainer::restore(const CheckpointData& data, const std::string& source) {
  if (restore_locked_)
    throw RunError(source +
                   ": a checkpoint can be restored into a running fit only from "
                   "on_train_begin, before the first batch");
  if (!data.training)
    throw DataError(source +
                    ": holds weights only, no training state to resume from; load it "
                    "with --weights to start a new run from these weights");
  try {
    refuse_other_plan(data.training->state, source);
  } catch (const json::exception& e) {
    throw DataError(source + ": the training state's target or device_plan is malformed (" +
                    std::string(e.what()) + ")");
  }
  const TrainingStateData& t = *data.training;
  if (const auto it = t.state.find("callbacks"); it != t.state.end() && !it->is_object())
    throw DataError(source + ": the training state's callbacks are " + it->dump() +
                    ", not an object of callback states");
  Model& model = meta_.template_model();
  Optimizer& optimizer = meta_.optimizer();
  model.load_weights(data, source);
  try {
    const json& s = t.state;
    const json& opt = s.at("optimizer");
    const std::string cls = opt.at("class_name").get<std::string>();
    if (cls != optimizer.keras_class_name())
      throw DataError(source + ": was trained with optimizer " + cls + ", the config now says " +
                      optimizer.keras_class_name() + "; resume with the same optimizer");
    const auto params = model.trainable_parameters();
    const auto slot_names = optimizer.slot_names();
    const auto iterations = opt.at("iterations").get<std::int64_t>();
    if (iterations < 0)
      throw DataError(source + ": the optimizer's iterations is " + std::to_string(iterations));
    optimizer.create_slots(params);
    if (!t.optimizer_slots.empty() || (!slot_names.empty() && iterations > 0)) {
      if (t.optimizer_slots.size() != params.size() * slot_names.size())
        throw DataError(source + ": has " + std::to_string(t.optimizer_slots.size()) +
                        " optimizer slots, the model and optimizer need " +
                        std::to_string(params.size() * slot_names.size()));
      std::size_t k = 0;
      for (std::size_t i = 0; i < params.size(); ++i)
        for (std::size_t j = 0; j < slot_names.size(); ++j, ++k) {
          const Tensor& v = t.optimizer_slots[k].value;
          if (v.shape() != params[i]->value.shape())
            throw DataError(source + ": optimizer slot '" + t.optimizer_slots[k].name +
                            "' has the wrong shape " + shape_to_string(v.shape()));
          optimizer.slots(i)[j].copy_from(v);
        }
    }
    optimizer.set_iterations(iterations);
    // Format 1 files before the loss scale kept the rate in the config only. A rate that
    // follows a schedule follows it from the restored step count.
    if (!optimizer.schedule())
      optimizer.set_learning_rate(opt.contains("learning_rate")
                                      ? opt.at("learning_rate").get<double>()
                                      : opt.at("config").at("learning_rate").get<double>());
    if (LossScale* scale = optimizer.loss_scale()) 
      scale->restore(opt.contains("loss_scale") ? opt.at("loss_scale") : json(), source);
    restore_averages_in_weights(opt, source);
    // Every counter in the range the engine runs in, before any is used.
    const auto counter = [&](const char* key, std::int64_t hi) {
      const json& v = s.at(key);
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi)) ||
          v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > hi)
        throw DataError(source + ": the training state's " + key + " is " + v.dump() +
                        ", not an integer from 0 to " + std::to_string(hi));
      return v.get<std::int64_t>();
    };
    state_.epoch = static_cast<int>(counter("epoch", INT32_MAX));
    // Steps are counted on and kept in doubles elsewhere (events, schedules): at most 2^53, far
    // beyond any run, and no count of them can overflow (INT64_MAX wrapped to negative steps).
    constexpr std::int64_t kMaxSteps = std::int64_t{1} << 53;
    state_.steps_per_epoch = counter("steps_per_epoch", kMaxSteps);
    state_.batch = counter("batch", state_.steps_per_epoch);
    state_.step = counter("step", kMaxSteps);
    state_.history.clear();
    for (const auto& h : s.at("history")) state_.history.push_back(logs_from_json(h));
    if (state_.history.size() > static_cast<std::size_t>(state_.epoch) + 1)
      throw DataError(source + ": the training state has the logs of " +
                      std::to_string(state_.history.size()) + " epochs at epoch " +
                      std::to_string(state_.epoch));
    partial_ = empty_totals();
    const json& partial = s.at("partial");
    partial_.loss = sum_of(partial.at("loss"));
    const json& pm = partial.at("metrics");
    if (pm.size() == partial_.metrics.size())
      for (std::size_t i = 0; i < pm.size(); ++i) partial_.metrics[i] = sum_of(pm[i]);
    else if (state_.batch > 0)
      throw DataError(source + ": was saved mid-epoch with " + std::to_string(pm.size()) +
                      " metrics, the config now has " + std::to_string(partial_.metrics.size()));
  } catch (const json::exception& e) {
    throw DataError(source + ": the training state is malformed (" + std::string(e.what()) + ")");
  }
  for (std::size_t li = 0; li < model.layer_count(); ++li) {
    Layer& layer = model.layer(li);
    if (layer.random_state().empty()) continue;
    auto it = t.rng_states.find(layer.name());
    if (it == t.rng_states.end())
      throw DataError(source + ": has no random state for layer '" + layer.name() + "'");
    try {
      layer.set_random_state(it->second);
    } catch (const DataError& e) {
      throw DataError(source + ": /tandem/rng/" + layer.name() + ": " + e.what());
    }
  }
  meta_.broadcast_from_template();
  callback_states_ = t.state.value("callbacks", json::object());
  callback_states_source_ = source;
  restore_callback_states();
}

void Trainer::set_callbacks(CallbackBus bus) {
  callbacks_ = std::move(bus);
  callbacks_set_ = true;
  restore_callback_states();
}

void Trainer::restore_callback_states() {
  if (!callbacks_set_ || callback_states_.empty()) return;
  callbacks_.restore_states(callback_states_, callback_states_source_);
  if (meta_.world().rank() != 0) return;  // other ranks run only some of the callbacks
  for (const std::string& key : callbacks_.states_of_no_callback(callback_states_))
    spdlog::warn(
        "{} holds the saved state of callback '{}', which this run does not have: "
        "left unused",
        callback_states_source_, key);
}

}  // namespace tandem
