#include "train/run_config.hpp"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/config_object.hpp"
#include "util/json_text.hpp"
#include "util/regular_file.hpp"
#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

json load_json_file(const std::filesystem::path& path) {
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw ConfigError(path.string(), "cannot read the config (" + why + ")");
  std::error_code ec;
  constexpr std::uintmax_t kMaxConfigBytes = std::uintmax_t{64} << 20;
  if (const auto bytes = std::filesystem::file_size(path, ec); !ec && bytes > kMaxConfigBytes)
    throw ConfigError(path.string(), "a config of " + std::to_string(bytes) +
                                         " bytes, more than 64 MiB: not a config");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path.string(),
                      "cannot open the config file (does it exist and is it readable?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // A model file given where a run config goes (`tandem summary model.keras`): say what to do.
  const bool hdf5 = text.starts_with("\x89HDF\r\n\x1a\n"), zip = text.starts_with("PK\x03\x04");
  if (hdf5 || zip)
    throw ConfigError(path.string(),
                      std::string(hdf5 ? "an HDF5 file (a Keras or Tandem model file?)"
                                       : "a zip archive (a Keras 3 .keras file?)") +
                          ", not a run config (JSON): make one of a model file with `tandem "
                          "import " +
                          path.string() + " -o run.json`, or give its weights with --weights");
  try {
    return parse_json_text(text);
  } catch (const JsonTextRefused& e) {
    throw ConfigError(path.string(), std::string("not a config: ") + e.what());
  } catch (const json::parse_error& e) {
    // Turn the byte offset into a line and column.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    // The library's text repeats the place ("[json.exception.parse_error.101] parse error at
    // line 1, column 1: syntax error ..."): its reason alone.
    std::string why = e.what();
    if (const std::size_t at = why.find("parse error"); at != std::string::npos)
      if (const std::size_t colon = why.find(": ", at); colon != std::string::npos)
        why = why.substr(colon + 2);
    throw ConfigError(path.string(), "invalid JSON at line " + std::to_string(line) + ", column " +
                                         std::to_string(col) + ": " + why);
  }
}

namespace {

// Every string of the resolved config is UTF-8: it is written as JSON (the run folder's
// config.json, every checkpoint). A path made absolute from a folder whose name is not UTF-8 is
// the way one gets in (a config file's own text is checked when it is read).
void require_utf8_strings(const json& node, const std::string& path) {
  if (node.is_string()) {
    const std::string& text = node.get_ref<const std::string&>();
    if (const std::size_t bad = invalid_utf8_at(text); bad != std::string::npos)
      throw ConfigError(path, json(text).dump(-1, ' ', false, json::error_handler_t::replace) +
                                  " is not valid UTF-8 (byte " + std::to_string(bad) +
                                  "), and a run config is kept as JSON text: rename the folder "
                                  "or file, or give a path that is UTF-8");
  } else if (node.is_object()) {
    for (const auto& [key, value] : node.items()) require_utf8_strings(value, json_path_join(path, key));
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      require_utf8_strings(node[i], path + "[" + std::to_string(i) + "]");
  }
}

}  // namespace

void apply_override(json& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment, "expected key.path=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  if (const std::size_t bad = invalid_utf8_at(assignment); bad != std::string::npos)
    throw ConfigError(bad < eq ? std::string("--set") : "--set " + assignment.substr(0, eq),
                      std::string("the ") + (bad < eq ? "key" : "value") +
                          " is not valid UTF-8 (byte " + std::to_string(bad < eq ? bad : bad - eq - 1) + ")");
  json value;
  try {
    value = parse_json_text(text);
  } catch (const JsonTextRefused& e) {
    throw ConfigError("--set " + key, std::string("the value: ") + e.what());
  } catch (const json::parse_error& e) {
    // Plain text is a string (--set name=run2); what opens as an object, a list or a quoted
    // string was meant as JSON, so a typo there is an error, not a string.
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && std::string("{[\"").find(text[first]) != std::string::npos) {
      const std::string what = e.what();
      const std::size_t at = what.find("parse error");
      throw ConfigError("--set " + key, "the value is not valid JSON (" +
                                            (at == std::string::npos ? what : what.substr(at)) +
                                            ")");
    }
    value = text;
  }
  json* node = &config;
  std::string walked;
  std::size_t pos = 0;
  while (pos <= key.size()) {
    std::size_t end = key.find_first_of(".[", pos);
    std::string part = key.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (part.empty()) throw ConfigError("--set " + key, "empty key segment");
    if (!node->is_object()) {
      if (!node->is_null()) {
        std::string why = "is " + node->dump() + ", not an object: --set " + key + " has no '" +
                          part + "' to set in it";
        if (node->is_string())  // "optimizer": "adam", "loss": "mse"
          why +=
              " (write it in Keras' object form, {\"class_name\": \"...\", \"config\": "
              "{...}}, to set its settings)";
        throw ConfigError(walked.empty() ? "--set " + key : walked, why);
      }
      *node = json::object();
    }
    walked = json_path_join(walked, part);
    node = &(*node)[part];
    pos = end == std::string::npos ? key.size() + 1 : end;
    // list indices: [3][0]...
    while (pos < key.size() && key[pos] == '[') {
      const auto close = key.find(']', pos);
      if (close == std::string::npos) throw ConfigError("--set " + key, "missing ']'");
      const std::string idx = key.substr(pos + 1, close - pos - 1);
      std::size_t i = 0;
      try {
        i = std::stoul(idx);
      } catch (const std::exception&) {
        throw ConfigError("--set " + key, "bad list index '" + idx + "'");
      }
      walked += "[" + idx + "]";
      if (!node->is_array() || i >= node->size())
        throw ConfigError(walked, "no such list item to override");
      node = &(*node)[i];
      pos = close + 1;
    }
    if (pos < key.size() && key[pos] == '.')
      ++pos;
    else if (pos >= key.size())
      break;
    else  // "layers[1]config": a dot forgotten after the index
      throw ConfigError("--set " + key, "expected '.' or '[' after '" + walked + "', got '" +
                                            key.substr(pos) + "'");
  }
  *node = value;
}

namespace {

json resolve_path(const json& spec, const std::filesystem::path& base_dir) {
  if (!spec.is_object()) return spec;
  json out = spec;
  for (const char* key : {"x", "y", "path", "list"}) {
    if (!out.contains(key) || !out[key].is_string()) continue;
    // hdf5 and npz name arrays inside the file with x and y, csv its columns.
    const std::string type =
        out.contains("type") && out["type"].is_string() ? out["type"].get<std::string>() : "";
    if (std::string(key) != "path" && (type == "hdf5" || type == "npz" || type == "csv")) continue;
    std::filesystem::path p = out[key].get<std::string>();
    if (p.is_relative() && !base_dir.empty()) out[key] = (base_dir / p).lexically_normal().string();
  }
  return out;
}

// "mixup": {"alpha": 0.2, "probability": 1.0} or "cutmix": {...} (not both).
MixOptions parse_mix(ConfigObject& data) {
  MixOptions mix;
  for (const auto& [key, kind] : {std::pair{"mixup", MixOptions::Kind::mixup},
                                  std::pair{"cutmix", MixOptions::Kind::cutmix}}) {
    if (!data.find(key)) {
      data.ignore({key});
      continue;
    }
    if (mix.kind != MixOptions::Kind::none)
      throw ConfigError("data.cutmix", "give either data.mixup or data.cutmix, not both");
    ConfigObject m = data.get_object(key);
    mix.kind = kind;
    mix.alpha = m.number_in("alpha", 1.0, 0.0, 1e6, true);
    mix.probability = m.number_in("probability", 1.0, 0.0, 1.0, true);
    m.finish();
  }
  return mix;
}

// "class_weight": {"0": 1.0, "3": 2.5}: class indices (JSON keys are strings) to weights.
std::map<std::int64_t, double> parse_class_weight(const json& spec) {
  if (!spec.is_object())
    throw ConfigError("class_weight", "expected an object of weights by class index ({\"0\": "
                                      "1.0, \"1\": 5.0}), got " + spec.dump());
  std::map<std::int64_t, double> weights;
  for (const auto& [key, value] : spec.items()) {
    const std::string path = "class_weight." + key;
    std::size_t used = 0;
    long long index = -1;
    try {
      index = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (key.empty() || used != key.size() || index < 0 || !std::isdigit(key[0]))
      throw ConfigError(path, "expected a class index (an integer >= 0) as the key, got '" +
                                  key + "'");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
      throw ConfigError(path, "expected a finite weight >= 0, got " + value.dump());
    if (!weights.emplace(index, value.get<double>()).second)
      throw ConfigError(path, "class " + std::to_string(index) + " is given twice");
  }
  return weights;
}

}  // namespace

std::vector<CallbackConfig> parse_callbacks(const json& callbacks) {
  if (!callbacks.is_array()) throw ConfigError("callbacks", "expected a list of callbacks");
  std::vector<CallbackConfig> out;
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    const std::string p = "callbacks[" + std::to_string(i) + "]";
    ConfigObject cb(callbacks[i], p);
    CallbackConfig cc;
    cc.path = p;
    cc.plugin = cb.get_string("plugin");
    if (cc.plugin.empty()) throw ConfigError(cb.path_of("plugin"), "must not be empty");
    cc.target = cb.one_of("target", "template", {"template", "meta"}) == "meta"
                    ? Target::meta
                    : Target::template_model;
    cc.all_ranks = cb.one_of("ranks", "zero", {"zero", "all"}) == "all";
    if (const json* o = cb.find("options")) {
      if (!o->is_object()) throw ConfigError(cb.path_of("options"), "expected an object");
      cc.options = *o;
    }
    cb.finish();
    out.push_back(std::move(cc));
  }
  return out;
}

json callbacks_json(const std::vector<CallbackConfig>& callbacks) {
  json out = json::array();
  for (const auto& cc : callbacks)
    out.push_back({{"plugin", cc.plugin},
                   {"target", cc.target == Target::meta ? "meta" : "template"},
                   {"ranks", cc.all_ranks ? "all" : "zero"},
                   {"options", cc.options}});
  return out;
}

RunConfig parse_run_config(const json& config, const std::filesystem::path& base_dir) {
  RunConfig rc;
  rc.base_dir = base_dir;
  ConfigObject c(config, "");
  rc.name = c.get_string("name", "run");
  if (rc.name.empty() || rc.name.find('/') != std::string::npos)
    throw ConfigError("name", "must be non-empty and contain no '/'");
  const std::int64_t seed = c.get_int("seed", 0);
  if (seed < 0) throw ConfigError("seed", "expected a non-negative integer");
  rc.seed = static_cast<std::uint64_t>(seed);
  // Epochs and batch sizes as the engine counts them (int epochs; a batch's rows in an int).
  rc.epochs = static_cast<int>(c.int_in("epochs", 1, 1, kMaxConfigSize));
  if (c.has("batch_size") && c.has("batch_size_per_replica"))
    throw ConfigError("batch_size_per_replica",
                      "give batch_size (the global batch) or batch_size_per_replica, not both");
  rc.batch_size = c.int_in("batch_size", 32, 1, kMaxConfigSize);
  rc.batch_size_per_replica =
      c.has("batch_size_per_replica") ? c.int_in("batch_size_per_replica", 0, 1, kMaxConfigSize) : 0;
  rc.steps_per_epoch = c.positive_int("steps_per_epoch", 0);
  rc.verbose = static_cast<int>(c.get_int("verbose", 1));
  if (rc.verbose < 0 || rc.verbose > 2) throw ConfigError("verbose", "expected 0, 1 or 2");
  rc.devices = c.get_string("devices", "cpu");
  rc.precision_given = c.has("precision");
  rc.precision = parse_precision(c.get_string("precision", "fp32"), "precision");
  rc.model = c.at("model");
  if (const json* pipeline = c.find("pipeline"))
    rc.pipeline = parse_pipeline_config(*pipeline, "pipeline");
  rc.optimizer = c.find("optimizer") ? c.at("optimizer") : json("adam");
  rc.loss = c.at("loss");
  rc.loss_weights = c.find("loss_weights") ? c.at("loss_weights") : json();
  rc.metrics = c.find("metrics") ? c.at("metrics") : json::array();
  rc.weighted_metrics = c.find("weighted_metrics") ? c.at("weighted_metrics") : json();
  if (const json* weights = c.find("class_weight")) rc.class_weight = parse_class_weight(*weights);

  if (const json* cbs = c.find("callbacks")) rc.callbacks = parse_callbacks(*cbs);
  if (const json* paths = c.find("plugin_paths")) {
    if (!paths->is_array()) throw ConfigError("plugin_paths", "expected a list of folders");
    for (std::size_t i = 0; i < paths->size(); ++i) {
      if (!(*paths)[i].is_string())
        throw ConfigError("plugin_paths[" + std::to_string(i) + "]", "expected a folder name");
      std::filesystem::path dir = (*paths)[i].get<std::string>();
      rc.plugin_paths.push_back(dir.is_relative() && !base_dir.empty() ? base_dir / dir : dir);
    }
  }
  ConfigObject d = c.get_object("data");
  rc.data.train = resolve_path(d.at("train"), base_dir);
  if (d.find("validation")) rc.data.validation = resolve_path(d.at("validation"), base_dir);
  if (d.find("test")) rc.data.test = resolve_path(d.at("test"), base_dir);
  rc.data.validation_split = d.number_in("validation_split", 0.0, 0.0, 1.0, false, true);
  if (rc.data.validation_split > 0 && !rc.data.validation.is_null())
    throw ConfigError("data.validation_split",
                      "give either data.validation or data.validation_split, not both");
  rc.data.shuffle = d.get_bool("shuffle", true);
  rc.data.prefetch = static_cast<int>(d.get_int("prefetch", 2));
  if (rc.data.prefetch < 0 || rc.data.prefetch > 64)
    throw ConfigError("data.prefetch", "expected 0..64 batches");
  rc.data.mix = parse_mix(d);
  d.finish();
  c.finish();

  rc.resolved = config;
  rc.resolved["name"] = rc.name;
  rc.resolved["seed"] = rc.seed;
  rc.resolved["epochs"] = rc.epochs;
  if (rc.batch_size_per_replica > 0)
    rc.resolved["batch_size_per_replica"] = rc.batch_size_per_replica;
  else
    rc.resolved["batch_size"] = rc.batch_size;
  if (rc.steps_per_epoch > 0) rc.resolved["steps_per_epoch"] = rc.steps_per_epoch;
  rc.resolved["verbose"] = rc.verbose;
  rc.resolved["devices"] = rc.devices;
  rc.resolved["precision"] = precision_name(rc.precision);
  if (rc.pipeline.active()) rc.resolved["pipeline"] = pipeline_config_json(rc.pipeline);
  rc.resolved["optimizer"] = rc.optimizer;
  rc.resolved["metrics"] = rc.metrics;
  if (!rc.loss_weights.is_null()) rc.resolved["loss_weights"] = rc.loss_weights;
  if (!rc.weighted_metrics.is_null()) rc.resolved["weighted_metrics"] = rc.weighted_metrics;
  rc.resolved["data"]["train"] = rc.data.train;
  if (!rc.data.validation.is_null()) rc.resolved["data"]["validation"] = rc.data.validation;
  if (!rc.data.test.is_null()) rc.resolved["data"]["test"] = rc.data.test;
  rc.resolved["data"]["validation_split"] = rc.data.validation_split;
  rc.resolved["data"]["shuffle"] = rc.data.shuffle;
  rc.resolved["data"]["prefetch"] = rc.data.prefetch;
  if (rc.data.mix.kind != MixOptions::Kind::none)
    rc.resolved["data"][rc.data.mix.kind == MixOptions::Kind::mixup ? "mixup" : "cutmix"] = {
        {"alpha", rc.data.mix.alpha}, {"probability", rc.data.mix.probability}};
  require_utf8_strings(rc.resolved, "");
  return rc;
}

}  // namespace tandem
