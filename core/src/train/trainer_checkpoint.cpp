// Trainer::checkpoint / restore: the complete state needed to resume a run exactly.
#include "tandem/error.hpp"
#include "tandem/trainer.hpp"

namespace tandem {

using nlohmann::json;

CheckpointData Trainer::checkpoint() const {
  CheckpointData data;
  model_.save_weights(data);
  TrainingStateData t;
  json history = json::array();
  for (const auto& logs : state_.history) history.push_back(logs.to_json());
  json partial_metrics = json::array();
  for (const auto& m : partial_.metrics) partial_metrics.push_back({m.sum, m.count});
  t.state = {{"epoch", state_.epoch},
             {"batch", state_.batch},
             {"step", state_.step},
             {"epochs", state_.epochs},
             {"steps_per_epoch", state_.steps_per_epoch},
             {"history", history},
             {"partial",
              {{"loss", {partial_.loss.sum, partial_.loss.count}}, {"metrics", partial_metrics}}},
             {"optimizer",
              {{"class_name", optimizer_.class_name()},
               {"config", optimizer_.config()},
               {"iterations", optimizer_.iterations()}}}};
  // Optimizer slots, named "<layer>/<weight>/<slot>" after the trainable parameters they serve.
  auto& self = const_cast<Trainer&>(*this);
  auto params = self.model_.trainable_parameters();
  std::vector<std::string> param_names;
  for (std::size_t li = 0; li < model_.layer_count(); ++li) {
    const Layer& layer = model_.layer(li);
    if (!layer.trainable()) continue;
    for (Parameter* p : self.model_.layer(li).parameters())
      if (p->trainable) param_names.push_back(layer.name() + "/" + p->name);
  }
  const auto slot_names = optimizer_.slot_names();
  if (optimizer_.slotted_params() == params.size()) {
    for (std::size_t i = 0; i < params.size(); ++i)
      for (std::size_t s = 0; s < slot_names.size(); ++s)
        t.optimizer_slots.push_back(
            {param_names[i] + "/" + slot_names[s], self.optimizer_.slots(i)[s].clone()});
  }
  for (std::size_t li = 0; li < model_.layer_count(); ++li) {
    if (Rng* rng = self.model_.layer(li).rng()) {
      auto st = rng->state();
      t.rng_states[model_.layer(li).name()] = std::vector<std::uint64_t>(st.begin(), st.end());
    }
  }
  data.training = std::move(t);
  return data;
}

namespace {

MetricSum sum_of(const json& pair) {
  return {pair.at(0).get<double>(), pair.at(1).get<double>()};
}

Logs logs_from_json(const json& j) {
  Logs logs;
  for (auto it = j.begin(); it != j.end(); ++it)
    logs.set(it.key(), it.value().is_number() ? it.value().get<double>() : std::nan(""));
  return logs;
}

}  // namespace

void Trainer::restore(const CheckpointData& data, const std::string& source) {
  if (!data.training)
    throw DataError(source +
                    ": holds weights only, no training state to resume from; load it "
                    "with --weights to start a new run from these weights");
  model_.load_weights(data, source);
  const TrainingStateData& t = *data.training;
  try {
    const json& s = t.state;
    const json& opt = s.at("optimizer");
    const std::string cls = opt.at("class_name").get<std::string>();
    if (cls != optimizer_.class_name())
      throw DataError(source + ": was trained with optimizer " + cls + ", the config now says " +
                      optimizer_.class_name() + "; resume with the same optimizer");
    auto params = model_.trainable_parameters();
    const auto slot_names = optimizer_.slot_names();
    optimizer_.create_slots(params);
    if (!t.optimizer_slots.empty() ||
        (!slot_names.empty() && opt.at("iterations").get<std::int64_t>() > 0)) {
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
          optimizer_.slots(i)[j].copy_from(v);
        }
    }
    optimizer_.set_iterations(opt.at("iterations").get<std::int64_t>());
    optimizer_.set_learning_rate(opt.at("config").at("learning_rate").get<double>());
    state_.epoch = s.at("epoch").get<int>();
    state_.batch = s.at("batch").get<std::int64_t>();
    state_.step = s.at("step").get<std::int64_t>();
    state_.steps_per_epoch = s.at("steps_per_epoch").get<std::int64_t>();
    state_.history.clear();
    for (const auto& h : s.at("history")) state_.history.push_back(logs_from_json(h));
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
  for (std::size_t li = 0; li < model_.layer_count(); ++li) {
    if (Rng* rng = model_.layer(li).rng()) {
      auto it = t.rng_states.find(model_.layer(li).name());
      if (it == t.rng_states.end() || it->second.size() != Rng::State{}.size())
        throw DataError(source + ": has no random state for layer '" + model_.layer(li).name() +
                        "'");
      Rng::State st;
      std::copy(it->second.begin(), it->second.end(), st.begin());
      rng->set_state(st);
    }
  }
}

}  // namespace tandem
