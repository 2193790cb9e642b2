#include "app/import_command.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/output_over_input.hpp"
#include "data/dataset.hpp"
#include "tandem/atomic_file.hpp"
#include "tandem/error.hpp"
#include "train/keras_import.hpp"
#include "train/run_config.hpp"

namespace tandem::app {

namespace {

struct ImportOptions {
  std::string file;
  std::string output;
  std::vector<std::string> overrides;
};

// Whether `path` (a.b.c) is set in `config`.
bool has_key(const nlohmann::json& config, const std::string& path) {
  const nlohmann::json* at = &config;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!at->is_object() || !at->contains(key)) return false;
    at = &(*at)[key];
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
  return true;
}

// `config` with each of the `missing` keys standing in as a placeholder any model takes, so that
// the rest can be checked now as `tandem train` will check it (only these keys are missing).
nlohmann::json with_placeholders(nlohmann::json config, const std::vector<std::string>& missing) {
  for (const auto& key : missing) {
    if (key == "optimizer") config["optimizer"] = "adam";
    if (key == "loss") config["loss"] = "mse";
    if (key == "data.train")
      config["data"]["train"] = {{"type", "synthetic"}, {"samples", 1}, {"x_shape", {1}}};
  }
  return config;
}

// The lengths a model's inputs leave to the data (Keras' None) are the training data's, which
// only --set data.train=... can give an import; asked for only for such a model.
Model::DataInputShapes given_training_shapes(const ImportOptions& o) {
  nlohmann::json given = nlohmann::json::object();
  for (const auto& assignment : o.overrides) apply_override(given, assignment);
  return [given, file = o.file](const std::vector<Shape>&) -> std::vector<Shape> {
    if (!has_key(given, "data.train"))
      throw DataError(file +
                      ": the model's inputs leave lengths to the data (None in Keras), which "
                      "Tandem takes from the training data: give it, --set data.train=...");
    return make_dataset(given["data"]["train"], "data.train",
                        std::filesystem::current_path().string())
        ->x_parts();
  };
}

int run_import(const ImportOptions& o) {
  const bool to_stdout = o.output == "-";
  if (!to_stdout) refuse_bad_output(o.output, {o.file}, "--output");
  KerasImport made = import_keras_file(o.file, given_training_shapes(o));
  if (!made.unwrapped.empty()) spdlog::warn("{}: {}", o.file, made.unwrapped);
  for (const auto& assignment : o.overrides) apply_override(made.config, assignment);
  std::vector<std::string> still_missing;
  for (const auto& key : made.missing)
    if (!has_key(made.config, key)) still_missing.push_back(key);
  // The whole config must read as `tandem train` reads it, the keys still missing aside.
  parse_run_config(with_placeholders(made.config, still_missing), std::filesystem::current_path());
  if (to_stdout)
    std::cout << made.config.dump(2) << std::endl;
  else
    write_file_atomically(o.output, made.config.dump(2) + "\n");
  const std::string written = to_stdout ? "stdout" : o.output;
  std::string next =
      "tandem train " + (to_stdout ? std::string("RUN.json") : o.output) + " --weights " + o.file;
  if (still_missing.empty()) {
    spdlog::info("{}: {} -> {}; train it with: {}", o.file, made.model_summary, written, next);
  } else {
    std::string keys;
    for (const auto& k : still_missing) keys += (keys.empty() ? "" : ", ") + k;
    spdlog::warn(
        "{}: {} -> {}; the file does not say {}: add them (--set KEY=VALUE, or edit "
        "the file) before: {}",
        o.file, made.model_summary, written, keys, next);
  }
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_import_command(CLI::App& app, std::function<int()>& selected) {
  auto o = std::make_shared<ImportOptions>();
  auto* cmd = app.add_subcommand("import", "Make a run config from a Keras model file");
  cmd->footer(
      "Reads the file's model_config (the model) and training_config (what Keras' compile() "
      "was given: optimizer, loss, loss_weights, metrics) — a Keras 3 .keras file's config.json "
      "and its compile_config — and writes a run config. The data "
      "is not in the file: add it with --set data.train=... (or edit the file) and train with "
      "--weights MODEL.h5 to start from the file's weights. Everything imported is checked "
      "as `tandem train` checks it.\nExit codes: 0 written; 1 when the output cannot be "
      "written; 2 for a file or config Tandem cannot read (nothing is written).");
  cmd->add_option("model", o->file, "Keras model file (.h5 with a model_config, or .keras)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("-o,--output", o->output, "The run config to write (JSON); '-' = stdout")
      ->required();
  cmd->add_option("--set", o->overrides, "Set a config value: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->callback([o, &selected] {
    selected = [o] { return run_import(*o); };
  });
}

}  // namespace tandem::app
