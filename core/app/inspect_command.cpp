#include "app/inspect_command.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"

namespace tandem::app {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct InspectOptions {
  std::string path;
  bool json = false;
  bool verify = false;
};

json shape_json(const Shape& shape) {
  json s = json::array();
  for (auto d : shape) s.push_back(d);
  return s;
}

std::string shape_text(const json& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i].get<std::int64_t>());
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The layer class names of the stored Keras model_config, by layer name.
std::string class_of(const json& model_config, const std::string& layer) {
  if (!model_config.is_object()) return "?";
  const json* layers = nullptr;
  if (model_config.contains("config") && model_config["config"].is_object() &&
      model_config["config"].contains("layers"))
    layers = &model_config["config"]["layers"];
  if (!layers || !layers->is_array()) return "?";
  for (const auto& l : *layers)
    if (l.is_object() && l.contains("config") && l["config"].is_object() &&
        l["config"].value("name", "") == layer)
      return l.value("class_name", "?");
  return "?";
}

// A file's size; a folder's (a .keras archive Keras wrote unzipped): its files'.
std::uintmax_t bytes_of(const fs::path& path) {
  if (!fs::is_directory(path)) return fs::file_size(path);
  std::uintmax_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file()) total += entry.file_size();
  return total;
}

// A Keras 3 file's groups with the layers they hold, by Keras 3's rule, when the file has a model
// (a .keras archive) that builds; none otherwise (a .weights.h5 file, a model Tandem refuses).
// Which layer a group holds follows from the layers' order and classes alone, so where the
// config leaves an input's length to the data (Keras' None) the model is built for 32 steps.
std::map<std::string, Model::Keras3Group> keras3_layers(const json& model_config) {
  std::map<std::string, Model::Keras3Group> out;
  if (model_config.is_null()) return out;
  const Model::DataInputShapes any_lengths = [](const std::vector<Shape>& declared) {
    std::vector<Shape> shapes = declared;
    for (Shape& shape : shapes)
      for (std::int64_t& d : shape)
        if (d == kAnyLength) d = 32;
    return shapes;
  };
  try {
    for (const auto& g :
         Model::from_config(model_config, "model_config", 0, any_lengths)->keras3_groups())
      out[g.group] = g;
  } catch (const Error&) {
  }
  return out;
}

// Everything inspect shows, as JSON: the text form is printed from it.
json describe(const fs::path& path, const CheckpointData& data) {
  json out;
  out["path"] = path.string();
  out["bytes"] = bytes_of(path);
  // Keras 3's files name a layer's group after its class and place, not the layer's name.
  const bool keras3 = data.layout == WeightsLayout::keras3;
  out["layout"] = keras3 ? "keras3" : "keras2";
  out["model_config"] = data.model_config;
  if (data.model_config.is_object()) {
    out["model"] = {
        {"class_name", data.model_config.value("class_name", "?")},
        {"name", data.model_config.contains("config") && data.model_config["config"].is_object()
                     ? data.model_config["config"].value("name", "")
                     : ""}};
  } else {
    out["model"] = nullptr;
  }
  json layers = json::array();
  const auto held =
      keras3 ? keras3_layers(data.model_config) : std::map<std::string, Model::Keras3Group>{};
  std::int64_t total = 0;
  for (const auto& lw : data.layers) {
    json weights = json::array();
    std::int64_t params = 0;
    for (const auto& w : lw.weights) {
      const std::int64_t n = shape_size(w.value.shape());
      weights.push_back({{"name", w.name}, {"shape", shape_json(w.value.shape())}, {"params", n}});
      params += n;
    }
    json layer = {{"name", lw.layer},
                  {"class_name", keras3 ? "?" : class_of(data.model_config, lw.layer)},
                  {"weights", weights},
                  {"params", params}};
    if (keras3) {  // the group's name is not the layer's
      const auto it = held.find(lw.layer);
      layer["layer"] = it == held.end() ? json(nullptr) : json(it->second.layer);
      if (it != held.end()) layer["class_name"] = it->second.class_name;
    }
    layers.push_back(std::move(layer));
    total += params;
  }
  out["layers"] = layers;
  out["parameters"] = total;
  out["resumable"] = data.training.has_value();
  if (!data.training) {
    out["training"] = nullptr;
    return out;
  }
  const json& s = data.training->state;
  json t;
  for (const char* key : {"epoch", "batch", "step", "epochs", "steps_per_epoch", "target"})
    t[key] = s.contains(key) ? s[key] : json(nullptr);
  t["device_plan"] = s.contains("device_plan") ? s["device_plan"] : json(nullptr);
  t["class_names"] = s.contains("class_names") ? s["class_names"] : json(nullptr);
  json optimizer =
      s.contains("optimizer") && s["optimizer"].is_object() ? s["optimizer"] : json::object();
  json slots = json::array();
  for (const auto& slot : data.training->optimizer_slots)
    slots.push_back({{"name", slot.name}, {"shape", shape_json(slot.value.shape())}});
  optimizer["slots"] = slots;
  t["optimizer"] = optimizer;
  json rng = json::array();
  for (const auto& [name, words] : data.training->rng_states) rng.push_back(name);
  t["rng"] = rng;
  t["history"] = s.contains("history") && s["history"].is_array() ? s["history"] : json::array();
  t["has_run_config"] = s.contains("run_config");
  out["training"] = t;
  return out;
}

// The string at `key` of object `o`, or "?" where the file holds none (a checkpoint is data).
std::string string_at(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : "?";
}

std::string number(const json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) {
    // Four decimals as Keras prints logs; in e-notation where they would hide the value (a
    // diverging loss of 1e30, a loss scale of 2^120, a learning rate of 1e-6).
    const double x = v.get<double>();
    const double magnitude = std::fabs(x);
    const bool fixed = !std::isfinite(x) || x == 0 || (magnitude >= 1e-3 && magnitude < 1e9);
    char buf[64];
    std::snprintf(buf, sizeof buf, fixed ? "%.4f" : "%.4e", x);
    return buf;
  }
  return v.is_null() ? "?" : v.dump();
}

std::string to_text(const json& d) {
  std::ostringstream o;
  o << d["path"].get<std::string>() << " (" << grouped(d["bytes"].get<std::int64_t>())
    << " bytes)\n";
  if (d.contains("verified")) {
    const auto n = d["verified"]["checksummed"].get<std::size_t>();
    o << "verified: " << d["verified"]["datasets"].get<std::size_t>() << " datasets read, "
      << (n == 0 ? std::string("none with a checksum (an older Tandem or Keras file)")
                 : std::to_string(n) + " checksums match")
      << "\n";
  }
  if (d["model"].is_object())
    o << "model: " << d["model"]["name"].get<std::string>() << " ("
      << d["model"]["class_name"].get<std::string>() << ")\n";
  else
    o << "model: no model_config (a weights file)\n";
  const bool keras3 = d.value("layout", "") == "keras3";
  if (keras3)
    o << "layout: Keras 3 (save_weights, .keras): a group per layer, named after its class and "
         "its place among the model's layers of that class (dense, dense_1, ...)\n";
  // A Keras 3 file's rows are its groups, each with the layer it holds (when the file has a model).
  const auto layer_of = [](const json& l) {
    return l.contains("layer") && l["layer"].is_string() ? l["layer"].get<std::string>()
                                                         : std::string("?");
  };
  std::size_t name_w = 5, layer_w = 5, class_w = 5;
  for (const auto& l : d["layers"]) {
    name_w = std::max(name_w, l["name"].get<std::string>().size());
    layer_w = std::max(layer_w, layer_of(l).size());
    class_w = std::max(class_w, l["class_name"].get<std::string>().size());
  }
  auto pad = [](std::string s, std::size_t w) {
    s.resize(std::max(s.size(), w), ' ');
    return s;
  };
  o << "  " << (keras3 ? pad("group", name_w) + "  " + pad("layer", layer_w) : pad("layer", name_w))
    << "  " << pad("class", class_w) << "  weights\n";
  for (const auto& l : d["layers"]) {
    std::string weights;
    for (const auto& w : l["weights"])
      weights += (weights.empty() ? "" : ", ") + w["name"].get<std::string>() + " " +
                 shape_text(w["shape"]);
    if (weights.empty())
      weights = "-";
    else
      weights += "  = " + grouped(l["params"].get<std::int64_t>());
    o << "  " << pad(l["name"].get<std::string>(), name_w) << "  "
      << (keras3 ? pad(layer_of(l), layer_w) + "  " : "")
      << pad(l["class_name"].get<std::string>(), class_w) << "  " << weights << "\n";
  }
  o << "parameters: " << grouped(d["parameters"].get<std::int64_t>()) << "\n";
  const json& t = d["training"];
  if (t.is_null()) {
    o << "training state: none (weights only; load with --weights, not resumable)\n";
    return o.str();
  }
  o << "training state:\n";
  o << "  position: " << number(t["epoch"]) << " of " << number(t["epochs"])
    << " epochs done, batch " << number(t["batch"]) << " of " << number(t["steps_per_epoch"])
    << " in the next; step " << number(t["step"]) << "\n";
  o << "  target: " << (t["target"].is_string() ? t["target"].get<std::string>() : "?") << "\n";
  if (t["class_names"].is_array()) {
    o << "  classes: " << t["class_names"].size();
    std::string names;
    for (const json& n : t["class_names"])
      names += (names.empty() ? "" : ", ") + (n.is_string() ? n.get<std::string>() : "?");
    o << " (" << names << ")\n";
  }
  if (t["device_plan"].is_object()) {
    const json& plan = t["device_plan"];
    o << "  device plan: " << string_at(plan, "plan");
    // "replicas" are one rank's; "replicas_total" (since 0.1) every rank's.
    const std::int64_t processes =
        plan.contains("world_size") && plan["world_size"].is_number_integer()
            ? plan["world_size"].get<std::int64_t>()
            : 1;
    std::int64_t replicas = -1;
    if (plan.contains("replicas_total") && plan["replicas_total"].is_number_integer())
      replicas = plan["replicas_total"].get<std::int64_t>();
    else if (plan.contains("replicas") && plan["replicas"].is_array() && processes == 1)
      replicas = static_cast<std::int64_t>(plan["replicas"].size());
    if (replicas >= 0)
      o << " (" << replicas << " replica" << (replicas == 1 ? "" : "s")
        << (processes > 1 ? " in " + std::to_string(processes) + " processes" : "") << ")";
    o << "\n";
  }
  const json& opt = t["optimizer"];
  o << "  optimizer: " << string_at(opt, "class_name");
  if (opt.contains("iterations")) o << ", iterations " << number(opt["iterations"]);
  if (opt.contains("config")) o << ", config " << opt["config"].dump();
  if (opt.contains("loss_scale") && opt["loss_scale"].is_object()) {
    const json& ls = opt["loss_scale"];
    o << "\n  loss scale: " << number(ls.value("scale", json(nullptr))) << " ("
      << number(ls.value("good_steps", json(nullptr))) << " good steps since it last changed, "
      << number(ls.value("skipped_steps", json(nullptr))) << " steps skipped)";
  }
  o << "\n  optimizer slots: " << opt["slots"].size() << "\n";
  for (const auto& s : opt["slots"])
    o << "    " << s["name"].get<std::string>() << " " << shape_text(s["shape"]) << "\n";
  if (!t["rng"].empty()) {
    o << "  random states:";
    for (const auto& r : t["rng"]) o << " " << r.get<std::string>();
    o << "\n";
  }
  o << "  history: " << t["history"].size() << " epoch" << (t["history"].size() == 1 ? "" : "s")
    << "\n";
  for (std::size_t i = 0; i < t["history"].size(); ++i) {
    o << "    epoch " << i + 1 << ":";
    const json& h = t["history"][i];
    if (!h.is_object()) {
      o << " " << h.dump() << "\n";
      continue;
    }
    bool first = true;
    for (auto it = h.begin(); it != h.end(); ++it) {
      o << (first ? " " : " - ") << it.key() << " " << number(it.value());
      first = false;
    }
    o << "\n";
  }
  return o.str();
}

int run_inspect(const InspectOptions& opt) {
  const CheckpointData data = read_checkpoint_file(opt.path);
  json d = describe(opt.path, data);
  if (opt.verify) {
    const CheckpointVerification v = verify_checkpoint_file(opt.path);
    d["verified"] = {{"datasets", v.datasets}, {"checksummed", v.checksummed}};
  }
  const std::string text = opt.json ? d.dump(2) + "\n" : to_text(d);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (std::ferror(stdout)) throw RunError("cannot write to standard output");
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_inspect_command(CLI::App& app, std::function<int()>& selected) {
  auto opt = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand("inspect", "Show what a checkpoint holds");
  cmd->footer(
      "Prints the layers, weight shapes, parameter count and training state (epoch, step, "
      "target, device plan, optimizer and its slots, history) of a Tandem or Keras .h5 file. "
      "--verify also reads every dataset and checks its checksum.\n"
      "Exit codes: 0 done, 2 missing, truncated or not a checkpoint.");
  cmd->add_option("checkpoint", opt->path, "Checkpoint (.h5), or Keras .weights.h5 or .keras")
      ->required();
  cmd->add_flag("--json", opt->json, "Print one JSON object instead of text");
  cmd->add_flag("--verify", opt->verify,
                "Read every dataset and verify its checksum (exit 2 naming a damaged one)");
  cmd->callback([opt, &selected] { selected = [opt] { return run_inspect(*opt); }; });
}

}  // namespace tandem::app
