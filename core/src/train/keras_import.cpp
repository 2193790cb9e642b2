#include "train/keras_import.hpp"

#include "nn/functional_config.hpp"
#include "nn/keras_generation.hpp"
#include "nn/objective.hpp"
#include "optim/optimizer.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem {

namespace {

using nlohmann::json;

// Keras' serialized metrics as a run config takes them: names stay; TensorFlow 2's
// {"class_name": "MeanMetricWrapper", "config": {"name": "accuracy", "fn": ...}}, what
// compile(metrics=["accuracy"]) saves, becomes its name (the one its logs carry); a metric class
// stays in its class form, whose config holds its settings (k, thresholds, num_classes); lists
// keep their nesting (per output).
json metric_names(const json& metrics) {
  if (metrics.is_array()) {
    json out = json::array();
    for (const json& m : metrics) out.push_back(metric_names(m));
    return out;
  }
  if (metrics.is_object() && metrics.contains("class_name") &&
      metrics["class_name"] == "MeanMetricWrapper" && metrics.contains("config") &&
      metrics["config"].is_object()) {
    const json& c = metrics["config"];
    if (c.contains("name")) return c["name"];
  }
  if (metrics.is_object() && metrics.contains("class_name")) return metrics;
  if (metrics.is_object()) {  // by output name
    json out = json::object();
    for (const auto& [k, v] : metrics.items()) out[k] = metric_names(v);
    return out;
  }
  return metrics;
}

// Keras 2 saves the metric objects of a multi-output model compiled and fitted, which it renamed
// for its logs: "out1_mae" (Functional's _set_metric_names: the output's name and "_", a
// weighted metric's "_weighted_" where the plain name is taken). Tandem prefixes the names of a
// per-output metric itself, so the saved names lose the prefix again: metrics listed per output,
// [[...], [...]], in output order; names given as plain strings are the user's and stay.
json without_output_prefixes(json metrics, const Model& model, bool weighted) {
  if (model.output_count() < 2 || !metrics.is_array() || metrics.size() != model.output_count())
    return metrics;
  for (std::size_t j = 0; j < metrics.size(); ++j) {
    if (!metrics[j].is_array()) continue;
    std::vector<std::string> prefixes{model.output_name(j) + "_"};  // the longest first
    if (weighted) prefixes.insert(prefixes.begin(), model.output_name(j) + "_weighted_");
    for (json& m : metrics[j]) {
      if (!m.is_object() || !m.contains("config") || !m["config"].is_object() ||
          !m["config"].contains("name") || !m["config"]["name"].is_string())
        continue;
      const std::string name = m["config"]["name"].get<std::string>();
      for (const std::string& prefix : prefixes)
        if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
          m["config"]["name"] = name.substr(prefix.size());
          break;
        }
    }
  }
  return metrics;
}

// A model with one output: Keras 2 lists its metrics per output, [[...]].
json for_outputs(json metrics, std::size_t outputs) {
  if (outputs == 1 && metrics.is_array() && metrics.size() == 1 && metrics[0].is_array())
    return metrics[0];
  return metrics;
}

std::string with_commas(std::int64_t v) {
  std::string digits = std::to_string(v), s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

// The compile() settings into `config`, checked against `model`.
void import_training(const json& training, const Model& model, KerasImport& out) {
  json& config = out.config;
  if (!training.is_object())
    throw ConfigError("training_config", "expected Keras' compile settings (an object), got " +
                                             training.dump());
  // Keras 2's training_config holds "optimizer_config"; Keras 3's compile_config (a .keras
  // file's) "optimizer".
  const char* optimizer_key =
      training.contains("optimizer_config") ? "optimizer_config" : "optimizer";
  if (training.contains(optimizer_key) && !training[optimizer_key].is_null()) {
    config["optimizer"] = training[optimizer_key];
    // An optimizer saved as a registered object carries its package: "Custom>Adam".
    json& optimizer = config["optimizer"];
    const std::string registered = "Custom>";
    if (optimizer.is_object() && optimizer.contains("class_name") &&
        optimizer["class_name"].is_string() &&
        optimizer["class_name"].get<std::string>().rfind(registered, 0) == 0)
      optimizer["class_name"] = optimizer["class_name"].get<std::string>().substr(registered.size());
    make_optimizer(config["optimizer"], "optimizer");
  } else {
    out.missing.push_back("optimizer");
  }
  if (!training.contains("loss") || training["loss"].is_null()) {
    out.missing.push_back("loss");
    return;
  }
  config["loss"] = training["loss"];
  if (training.contains("loss_weights") && !training["loss_weights"].is_null())
    config["loss_weights"] = training["loss_weights"];
  json metrics = json::array();
  if (training.contains("metrics") && !training["metrics"].is_null())
    metrics = for_outputs(metric_names(without_output_prefixes(training["metrics"], model, false)),
                          model.output_count());
  config["metrics"] = metrics;
  if (training.contains("weighted_metrics") && !training["weighted_metrics"].is_null())
    config["weighted_metrics"] = for_outputs(
        metric_names(without_output_prefixes(training["weighted_metrics"], model, true)),
        model.output_count());
  make_objective(config["loss"], config.value("loss_weights", json()), config["metrics"], model,
                 config.value("weighted_metrics", json()));
}

// The template of a model saved from Keras 2's multi_gpu_model, whose config is the wrapper:
// InputLayers, Lambda layers slicing them, the template nested once (called once per slice) and
// Concatenate layers on axis 0 joining its outputs. Null when `model_config` is no such wrapper.
// `replicas`: the template's calls, one per GPU the wrapper split each batch across.
json multi_gpu_template(const json& model_config, std::size_t& replicas) {
  const std::string cls = string_field(model_config, "class_name");
  if ((cls != "Functional" && cls != "Model") || !model_config.contains("config") ||
      !model_config["config"].is_object() || !model_config["config"].contains("layers") ||
      !model_config["config"]["layers"].is_array())
    return json();
  const json* nested = nullptr;
  std::size_t lambdas = 0;
  for (const json& entry : model_config["config"]["layers"]) {
    const std::string layer = string_field(entry, "class_name");
    const json* config = entry.is_object() && entry.contains("config") ? &entry["config"] : nullptr;
    if (nn::is_model_entry(entry)) {
      if (nested) return json();
      nested = &entry;
    } else if (layer == "Lambda") {
      ++lambdas;
    } else if (layer == "Concatenate") {
      if (!config || !config->is_object() || config->value("axis", json()) != json(0))
        return json();
    } else if (layer != "InputLayer") {
      return json();
    }
  }
  if (!nested || lambdas == 0 || !nested->contains("inbound_nodes") ||
      !(*nested)["inbound_nodes"].is_array() || !nested->contains("config"))
    return json();
  replicas = (*nested)["inbound_nodes"].size();
  json out = {{"class_name", (*nested)["class_name"]}, {"config", (*nested)["config"]}};
  if (model_config.contains(nn::kKerasVersionKey))
    out[nn::kKerasVersionKey] = model_config[nn::kKerasVersionKey];
  return out;
}

}  // namespace

KerasImport import_keras_configs(const json& file_model_config, const json& training_config,
                                 const std::string& name,
                                 const Model::DataInputShapes& data_shapes) {
  KerasImport out;
  std::size_t replicas = 0;
  const json unwrapped = multi_gpu_template(file_model_config, replicas);
  const json& model_config = unwrapped.is_null() ? file_model_config : unwrapped;
  if (!unwrapped.is_null())
    out.unwrapped = "a multi_gpu_model file: imported its template model '" +
                    string_field(unwrapped["config"], "name") + "', which the wrapper called on " +
                    std::to_string(replicas) +
                    " slices of each batch (one per GPU); Tandem splits batches across devices "
                    "itself (\"devices\")";
  out.config = {{"name", name}, {"model", model_config}};
  const auto model = Model::from_config(model_config, "model", 0, data_shapes);
  out.model_summary = std::string(model->functional() ? "Functional" : "Sequential") +
                      " model '" + model->name() + "', " + with_commas(model->count_params()) +
                      " parameters";
  if (training_config.is_null())
    out.missing.insert(out.missing.end(), {"optimizer", "loss"});
  else
    import_training(training_config, *model, out);
  out.missing.push_back("data.train");
  return out;
}

KerasImport import_keras_file(const std::filesystem::path& file,
                              const Model::DataInputShapes& data_shapes) {
  const CheckpointData data = read_checkpoint_configs(file);
  if (data.model_config.is_null())
    throw DataError(file.string() +
                    ": holds weights but no model_config (saved with save_weights, not "
                    "save): there is no model to import");
  try {
    return import_keras_configs(nn::with_file_keras_version(data.model_config, data.keras_version),
                                data.training_config, file.stem().string(), data_shapes);
  } catch (const ConfigError& e) {
    // The path is the run config's being made; the file's attribute is what the user has.
    const bool model = e.path() == "model" || e.path().starts_with("model.");
    // A .keras archive (the one Keras 3 file with configs) keeps them in its config.json.
    const bool archive = data.layout == WeightsLayout::keras3;
    const std::string what = model ? (archive ? "config.json" : "model_config")
                                   : (archive ? "config.json's compile_config" : "training_config");
    throw DataError(file.string() + ": its " + what + " does not import: " + e.what());
  }
}

}  // namespace tandem
