#include "tandem/callback.hpp"

#include <optional>
#include <set>
#include <string_view>

#include "tandem/error.hpp"
#include "train/hook_crash_report.hpp"

namespace tandem {

void CallbackContext::restore(const CheckpointData&, const std::string& source) {
  throw RunError(source + ": this callback context cannot restore a checkpoint");
}

bool CallbackContext::swap_moving_averages(bool) {
  throw RunError("this callback context has no optimizer whose moving averages it could swap");
}

namespace {

// The RunError for `name`'s failure in `hook`, from inside the catch.
RunError failure_of(const std::string& name, const char* hook) {
  try {
    throw;
  } catch (const std::exception& e) {
    return RunError("callback '" + name + "' failed in " + hook + ": " + e.what());
  } catch (...) {
    return RunError("callback '" + name + "' failed in " + hook +
                    ": it threw something that is not a std::exception");
  }
}

// Inside a catch of `name`'s failure in `hook`: a ConfigError in on_train_begin, before the first
// step, is the run's config error (exit code 2, as when the plugin was made: a schedule that
// cannot fit the run's length, say), rethrown naming its callback. Any other failure returns.
void rethrow_config_error_before_training(const std::string& name, const char* hook) {
  if (std::string_view(hook) != "on_train_begin") return;
  try {
    throw;
  } catch (const ConfigError& e) {
    const std::string prefix = "config error at '" + e.path() + "': ";
    std::string message = e.what();
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
    throw ConfigError(e.path(), message + " (callback '" + name + "', at train begin)");
  } catch (...) {
  }
}

// The key of callback i among `callbacks` in saved states: its name, numbered from its second.
std::string state_key(const std::vector<std::shared_ptr<Callback>>& callbacks, std::size_t i) {
  const std::string name = callbacks[i]->name();
  int same = 0;
  for (std::size_t j = 0; j < i; ++j) same += callbacks[j]->name() == name ? 1 : 0;
  return same == 0 ? name : name + "#" + std::to_string(same + 1);
}

}  // namespace

nlohmann::json CallbackBus::saved_states() const {
  nlohmann::json states = nlohmann::json::object();
  for (std::size_t i = 0; i < callbacks_.size(); ++i) {
    nlohmann::json state;
    try {
      const HookInProgress running(callbacks_[i]->name(), "saved_state");
      state = callbacks_[i]->saved_state();
    } catch (...) {
      throw failure_of(callbacks_[i]->name(), "saved_state");
    }
    if (!state.is_null()) states[state_key(callbacks_, i)] = std::move(state);
  }
  return states;
}

void CallbackBus::restore_states(const nlohmann::json& states, const std::string& source) {
  for (std::size_t i = 0; i < callbacks_.size(); ++i) {
    const auto it = states.find(state_key(callbacks_, i));
    if (it == states.end()) continue;
    try {
      const HookInProgress running(callbacks_[i]->name(), "restore_state");
      callbacks_[i]->restore_state(*it);
    } catch (...) {
      // The checkpoint holds a state its callback cannot take: bad input, as any other part of
      // a checkpoint that does not fit (exit code 2).
      const RunError e = failure_of(callbacks_[i]->name(), "restore_state");
      throw DataError(std::string(e.what()) + " (the state saved in " + source + ")");
    }
  }
}

std::vector<std::string> CallbackBus::states_of_no_callback(const nlohmann::json& states) const {
  std::set<std::string> keys;
  for (std::size_t i = 0; i < callbacks_.size(); ++i) keys.insert(state_key(callbacks_, i));
  std::vector<std::string> orphans;
  if (states.is_object())
    for (const auto& [key, value] : states.items())
      if (!keys.count(key)) orphans.push_back(key);
  return orphans;
}

template <class F>
void CallbackBus::each(CallbackContext& c, const char* hook, F&& f, bool reach_every_callback) {
  // Called from inside a hook (an event it published), the hook's own target comes back after.
  struct Reselect {
    CallbackBus& bus;
    CallbackContext& context;
    const Target outer;
    ~Reselect() { bus.select(context, outer); }
  } reselect{*this, c, selected_};
  std::optional<RunError> first;
  for (std::size_t i = 0; i < callbacks_.size(); ++i) {
    const auto& cb = callbacks_[i];
    try {
      select(c, targets_[i]);
      const HookInProgress running(cb->name(), hook);
      f(*cb);
    } catch (...) {
      rethrow_config_error_before_training(cb->name(), hook);
      if (!reach_every_callback) throw failure_of(cb->name(), hook);
      if (!first) first = failure_of(cb->name(), hook);
    }
  }
  if (first) throw *first;
}

void CallbackBus::select(CallbackContext& c, Target target) {
  selected_ = target;
  c.select_target(target);
}

// clang-format off
void CallbackBus::train_begin(CallbackContext& c, const Logs& l) { each(c, "on_train_begin", [&](Callback& cb) { cb.on_train_begin(c, l); }); }
void CallbackBus::train_end(CallbackContext& c, const Logs& l) { each(c, "on_train_end", [&](Callback& cb) { cb.on_train_end(c, l); }); }
void CallbackBus::epoch_begin(CallbackContext& c, int e, const Logs& l) { each(c, "on_epoch_begin", [&](Callback& cb) { cb.on_epoch_begin(c, e, l); }); }
void CallbackBus::epoch_end(CallbackContext& c, int e, const Logs& l) { each(c, "on_epoch_end", [&](Callback& cb) { cb.on_epoch_end(c, e, l); }); }
void CallbackBus::train_batch_begin(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_train_batch_begin", [&](Callback& cb) { cb.on_train_batch_begin(c, b, l); }); }
void CallbackBus::train_batch_end(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_train_batch_end", [&](Callback& cb) { cb.on_train_batch_end(c, b, l); }); }
void CallbackBus::test_begin(CallbackContext& c, const Logs& l) { each(c, "on_test_begin", [&](Callback& cb) { cb.on_test_begin(c, l); }); }
void CallbackBus::test_end(CallbackContext& c, const Logs& l) { each(c, "on_test_end", [&](Callback& cb) { cb.on_test_end(c, l); }); }
void CallbackBus::test_batch_begin(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_test_batch_begin", [&](Callback& cb) { cb.on_test_batch_begin(c, b, l); }); }
void CallbackBus::test_batch_end(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_test_batch_end", [&](Callback& cb) { cb.on_test_batch_end(c, b, l); }); }
void CallbackBus::predict_begin(CallbackContext& c, const Logs& l) { each(c, "on_predict_begin", [&](Callback& cb) { cb.on_predict_begin(c, l); }); }
void CallbackBus::predict_end(CallbackContext& c, const Logs& l) { each(c, "on_predict_end", [&](Callback& cb) { cb.on_predict_end(c, l); }); }
void CallbackBus::predict_batch_begin(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_predict_batch_begin", [&](Callback& cb) { cb.on_predict_batch_begin(c, b, l); }); }
void CallbackBus::predict_batch_end(CallbackContext& c, std::int64_t b, const Logs& l) { each(c, "on_predict_batch_end", [&](Callback& cb) { cb.on_predict_batch_end(c, b, l); }); }
// An event reaches every callback, also after one failed: the stream writer records it.
void CallbackBus::event(CallbackContext& c, const std::string& name, const nlohmann::json& fields) { each(c, "on_event", [&](Callback& cb) { cb.on_event(c, name, fields); }, true); }
// clang-format on

}  // namespace tandem
