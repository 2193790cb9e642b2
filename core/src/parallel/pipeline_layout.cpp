#include "parallel/pipeline_layout.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "tandem/error.hpp"
#include "util/config_object.hpp"

namespace tandem {

namespace {

std::string stage_path(std::size_t s) { return "pipeline.stages[" + std::to_string(s) + "]"; }

std::string quoted_list(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", '" : "'") + names[i] + "'";
  return text;
}

std::vector<std::string> layer_names(const Model& model) {
  std::vector<std::string> names;
  for (std::size_t l = 0; l < model.layer_count(); ++l) names.push_back(model.layer(l).name());
  return names;
}

std::int64_t layer_parameter_count(const Model& model, std::size_t l) {
  std::int64_t n = 0;
  for (Parameter* p : const_cast<Layer&>(model.layer(l)).parameters()) n += p->value.size();
  return n;
}

std::vector<std::vector<std::string>> read_named_stages(const nlohmann::json& list,
                                                        const std::string& path) {
  std::vector<std::vector<std::string>> stages;
  for (std::size_t s = 0; s < list.size(); ++s) {
    const std::string at = path + "[" + std::to_string(s) + "]";
    if (!list[s].is_array() || list[s].empty())
      throw ConfigError(at, "expected a non-empty list of layer names, got " +
                                (list[s].is_array() ? std::string("an empty list")
                                                    : json_type_name(list[s])));
    std::vector<std::string> names;
    for (std::size_t i = 0; i < list[s].size(); ++i) {
      if (!list[s][i].is_string())
        throw ConfigError(at + "[" + std::to_string(i) + "]",
                          "expected a layer name, got " + json_type_name(list[s][i]));
      names.push_back(list[s][i].get<std::string>());
    }
    stages.push_back(std::move(names));
  }
  return stages;
}

// Which stage each layer of `model` is in, from named stages.
std::vector<int> stages_of_named_layers(const Model& model, const PipelineConfig& config) {
  const auto names = layer_names(model);
  std::vector<int> stage_of(names.size(), -1);
  std::vector<std::string> where(names.size());
  for (std::size_t s = 0; s < config.stage_layers.size(); ++s)
    for (std::size_t i = 0; i < config.stage_layers[s].size(); ++i) {
      const std::string& name = config.stage_layers[s][i];
      const std::string at = stage_path(s) + "[" + std::to_string(i) + "]";
      const auto found = std::find(names.begin(), names.end(), name);
      if (found == names.end()) {
        for (std::size_t k = 0; k < model.input_count(); ++k)
          if (model.input_name(k) == name)
            throw ConfigError(at, "'" + name + "' is an InputLayer of model '" + model.name() +
                                      "': stages name the layers that compute, and each input "
                                      "goes to the stages whose layers read it; its layers are " +
                                      quoted_list(names));
        throw ConfigError(at, "model '" + model.name() + "' has no layer '" + name +
                                  "'; its layers are " + quoted_list(names));
      }
      const auto l = static_cast<std::size_t>(found - names.begin());
      if (stage_of[l] >= 0)
        throw ConfigError(at, "layer '" + name + "' is named twice (first at " + where[l] +
                                  "); each layer belongs to one stage");
      stage_of[l] = static_cast<int>(s);
      where[l] = at;
    }
  std::vector<std::string> missing;
  for (std::size_t l = 0; l < names.size(); ++l)
    if (stage_of[l] < 0) missing.push_back(names[l]);
  if (!missing.empty())
    throw ConfigError("pipeline.stages", "names no stage for " + quoted_list(missing) +
                                             "; every layer of model '" + model.name() +
                                             "' belongs to one stage");
  return stage_of;
}

// Where counted stages may end: after call k when no layer has calls on both sides (a shared
// layer's weights live on one device).
std::vector<bool> cut_points(const Model& model) {
  const std::size_t n = model.call_count();
  std::vector<std::size_t> last_call(model.layer_count(), 0), first_call(model.layer_count(), n);
  for (std::size_t k = 0; k < n; ++k) {
    first_call[model.call_layer(k)] = std::min(first_call[model.call_layer(k)], k);
    last_call[model.call_layer(k)] = k;
  }
  std::vector<bool> can_cut(n, true);  // can_cut[k]: a stage may end after call k
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    for (std::size_t k = first_call[l]; k < last_call[l]; ++k) can_cut[k] = false;
  can_cut[n - 1] = false;
  return can_cut;
}

// Contiguous stages of calls minimising the largest stage cost (linear partition by dynamic
// programming). Returns each call's stage.
std::vector<int> balanced_stages(const std::vector<double>& cost, const std::vector<bool>& can_cut,
                                 int stages, const std::string& model_name) {
  const std::size_t n = cost.size();
  std::size_t cuts = 0;
  for (bool c : can_cut) cuts += c ? 1 : 0;
  if (static_cast<std::size_t>(stages) > cuts + 1)
    throw ConfigError("pipeline.stages",
                      std::to_string(stages) + " stages for model '" + model_name + "', which " +
                          "can be cut in at most " + std::to_string(cuts + 1) +
                          " (a stage holds at least one layer, and a shared layer's calls stay "
                          "in one stage)");
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + cost[k];
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // best[s][k]: the smallest largest-stage cost of calls [0, k) in s stages; from[s][k] the
  // start of the last of them.
  const auto S = static_cast<std::size_t>(stages);
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(n + 1, kNone));
  std::vector<std::vector<std::size_t>> from(S + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t k = 1; k <= n; ++k) {
      if (k < n && !can_cut[k - 1]) continue;  // a stage must end where a cut is allowed
      for (std::size_t j = s - 1; j < k; ++j) {
        if (best[s - 1][j] == kNone || (j > 0 && !can_cut[j - 1])) continue;
        const double worst = std::max(best[s - 1][j], prefix[k] - prefix[j]);
        if (worst < best[s][k]) {
          best[s][k] = worst;
          from[s][k] = j;
        }
      }
    }
  std::vector<int> stage_of_call(n, 0);
  for (std::size_t s = S, k = n; s > 0; --s) {
    const std::size_t j = from[s][k];
    for (std::size_t c = j; c < k; ++c) stage_of_call[c] = static_cast<int>(s - 1);
    k = j;
  }
  return stage_of_call;
}

// Checks that every call reads calls of its own or earlier stages, and collects the layout.
PipelineLayout layout_of(const Model& model, const std::vector<int>& stage_of_call, int stages,
                         bool named) {
  PipelineLayout layout;
  layout.calls.resize(static_cast<std::size_t>(stages));
  layout.layers.resize(static_cast<std::size_t>(stages));
  layout.parameters.assign(static_cast<std::size_t>(stages), 0);
  for (std::size_t k = 0; k < model.call_count(); ++k) {
    const int s = stage_of_call[k];
    for (int in : model.call_inputs(k)) {
      if (in < 0 || stage_of_call[static_cast<std::size_t>(in)] <= s) continue;
      const auto& reader = model.layer(model.call_layer(k)).name();
      const auto& source = model.layer(model.call_layer(static_cast<std::size_t>(in))).name();
      throw ConfigError(named ? stage_path(static_cast<std::size_t>(s)) : "pipeline.stages",
                        "layer '" + reader + "' (stage " + std::to_string(s) + ") reads '" +
                            source + "' of the later stage " +
                            std::to_string(stage_of_call[static_cast<std::size_t>(in)]) +
                            ": a stage may only read the stages before it; move one of them");
    }
    layout.calls[static_cast<std::size_t>(s)].push_back(k);
    // A shared layer's later calls are in its first call's stage (named stages place layers;
    // counted ones never cut between its calls): its weights live on one device.
    if (model.call_number(k) == 0) {
      const std::size_t l = model.call_layer(k);
      layout.layers[static_cast<std::size_t>(s)].push_back(l);
      layout.parameters[static_cast<std::size_t>(s)] += layer_parameter_count(model, l);
    }
  }
  return layout;
}

}  // namespace

std::string schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

std::string balance_name(PipelineBalance balance) {
  return balance == PipelineBalance::time ? "time" : "parameters";
}

PipelineConfig parse_pipeline_config(const nlohmann::json& value, const std::string& path) {
  ConfigObject c(value, path);
  PipelineConfig config;
  if (const nlohmann::json* stages = c.find("stages")) {
    if (stages->is_array()) {
      config.stage_layers = read_named_stages(*stages, c.path_of("stages"));
      if (config.stage_layers.empty())
        throw ConfigError(c.path_of("stages"), "expected a stage count or a non-empty list of "
                                               "stages (each a list of layer names)");
      config.stages = static_cast<int>(config.stage_layers.size());
    } else if (stages->is_number_integer()) {
      config.stages = static_cast<int>(c.int_in("stages", 1, 1, 4096));
    } else {
      throw ConfigError(c.path_of("stages"),
                        "expected a stage count or a list of stages (each a list of layer "
                        "names), got " + json_type_name(*stages));
    }
  }
  config.microbatches = static_cast<int>(c.int_in("microbatches", 1, 1, 65536));
  config.schedule = c.one_of("schedule", "1f1b", {"1f1b", "gpipe"}) == "gpipe"
                        ? PipelineSchedule::gpipe
                        : PipelineSchedule::one_f_one_b;
  if (c.has("balance") && !config.stage_layers.empty())
    throw ConfigError(c.path_of("balance"),
                      "balances counted stages (\"stages\": 2); named stages stay as listed");
  config.balance = c.one_of("balance", "parameters", {"parameters", "time"}) == "time"
                       ? PipelineBalance::time
                       : PipelineBalance::parameters;
  c.finish();
  return config;
}

nlohmann::json pipeline_config_json(const PipelineConfig& config) {
  nlohmann::json out = {{"microbatches", config.microbatches},
                        {"schedule", schedule_name(config.schedule)}};
  if (config.stage_layers.empty()) {
    out["stages"] = config.stages;
    out["balance"] = balance_name(config.balance);
  } else {
    out["stages"] = config.stage_layers;
  }
  return out;
}

PipelineLayout PipelineLayout::whole(const Model& model) {
  return layout_of(model, std::vector<int>(model.call_count(), 0), 1, false);
}

PipelineLayout cut_into_stages(const Model& model, const PipelineConfig& config,
                               const std::vector<double>& call_seconds) {
  const std::size_t n = model.call_count();
  if (!config.stage_layers.empty()) {
    const std::vector<int> stage_of_layer = stages_of_named_layers(model, config);
    std::vector<int> stage_of_call(n);
    for (std::size_t k = 0; k < n; ++k) stage_of_call[k] = stage_of_layer[model.call_layer(k)];
    PipelineLayout layout = layout_of(model, stage_of_call, config.stages, true);
    for (std::size_t s = 0; s < layout.calls.size(); ++s)
      if (layout.calls[s].empty())
        throw ConfigError(stage_path(s), "holds no layer");
    return layout;
  }
  if (config.stages == 1) return PipelineLayout::whole(model);
  std::vector<double> cost(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    if (call_seconds.size() == n) {
      cost[k] = call_seconds[k];
    } else if (model.call_number(k) == 0) {
      // Parameters, plus one for the call itself: layers without weights still cost something.
      cost[k] = static_cast<double>(layer_parameter_count(model, model.call_layer(k))) + 1.0;
    }
  }
  return layout_of(model, balanced_stages(cost, cut_points(model), config.stages, model.name()),
                   config.stages, false);
}

namespace {

// Per call, its stage.
std::vector<int> stage_of_calls(const Model& model, const PipelineLayout& layout) {
  std::vector<int> stage(model.call_count(), 0);
  for (std::size_t s = 0; s < layout.calls.size(); ++s)
    for (std::size_t k : layout.calls[s]) stage[k] = static_cast<int>(s);
  return stage;
}

}  // namespace

std::vector<std::vector<std::size_t>> stage_hand_offs(const Model& model,
                                                      const PipelineLayout& layout) {
  const std::vector<int> stage = stage_of_calls(model, layout);
  std::vector<std::vector<std::size_t>> hand_offs(
      static_cast<std::size_t>(std::max(layout.stage_count() - 1, 0)));
  for (std::size_t k = 0; k < model.call_count(); ++k)
    for (int in : model.call_inputs(k)) {
      if (in < 0) continue;
      const int from = stage[static_cast<std::size_t>(in)];
      if (from + 1 != stage[k]) continue;
      auto& calls = hand_offs[static_cast<std::size_t>(from)];
      if (std::find(calls.begin(), calls.end(), static_cast<std::size_t>(in)) == calls.end())
        calls.push_back(static_cast<std::size_t>(in));
    }
  for (auto& calls : hand_offs) std::sort(calls.begin(), calls.end());
  return hand_offs;
}

void require_device_hand_offs(const Model& model, const PipelineLayout& layout,
                              const std::string& plan) {
  const std::vector<int> stage = stage_of_calls(model, layout);
  const auto name = [&](std::size_t k) { return model.layer(model.call_layer(k)).name(); };
  const std::string why = " on plan '" + plan +
                          "': stages on separate devices hand tensors only to the next stage; "
                          "move the cut";
  for (std::size_t k = 0; k < model.call_count(); ++k)
    for (int in : model.call_inputs(k)) {
      const int s = stage[k];
      if (in < 0 && s > 0)
        throw ConfigError("pipeline.stages", "layer '" + name(k) + "' (stage " +
                                                 std::to_string(s) + ") reads a model input" +
                                                 why);
      if (in >= 0 && stage[static_cast<std::size_t>(in)] + 1 < s)
        throw ConfigError("pipeline.stages",
                          "layer '" + name(k) + "' (stage " + std::to_string(s) + ") reads '" +
                              name(static_cast<std::size_t>(in)) + "' of stage " +
                              std::to_string(stage[static_cast<std::size_t>(in)]) + why);
    }
  for (std::size_t j = 0; j < model.output_count(); ++j) {
    const std::size_t k = model.output_call(j);
    if (stage[k] + 1 < layout.stage_count())
      throw ConfigError("pipeline.stages", "the model's output '" + name(k) +
                                               "' comes from stage " + std::to_string(stage[k]) +
                                               ", not the last" + why);
  }
  // Readers per call, in its own stage and in the next.
  std::vector<int> own(model.call_count(), 0), next(model.call_count(), 0);
  for (std::size_t k = 0; k < model.call_count(); ++k)
    for (int in : model.call_inputs(k)) {
      if (in < 0) continue;
      const auto i = static_cast<std::size_t>(in);
      ++(stage[i] == stage[k] ? own : next)[i];
    }
  for (std::size_t k = 0; k < model.call_count(); ++k)
    if (own[k] > 0 && next[k] > 1)
      throw ConfigError("pipeline.stages",
                        "'" + name(k) + "' (stage " + std::to_string(stage[k]) + ") is read by " +
                            std::to_string(next[k]) +
                            " layers of the next stage and by its own: its gradient would be "
                            "summed on two GPUs" + why);
}

int pipeline_replicas(const DevicePlan& plan, int stages) {
  if (plan.size() % stages != 0)
    throw ConfigError("pipeline.stages",
                      std::to_string(stages) + " stages do not divide device plan '" + plan.text +
                          "' (" + std::to_string(plan.size()) + " devices); give " +
                          std::to_string(stages) +
                          " devices per replica, or --set pipeline=null to run the model "
                          "unstaged (a pipelined run's checkpoint loads either way)");
  return plan.size() / stages;
}

}  // namespace tandem
