#include "app/export_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "app/output_over_input.hpp"
#include "nn/keras_generation.hpp"
#include "onnx/onnx_export.hpp"
#include "tandem/atomic_file.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "tandem/model.hpp"
#include "train/run.hpp"
#include "train/run_config.hpp"

namespace tandem::app {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string file;
  std::string output;
  std::string config;
  std::string class_names;  // as given: comma-separated
};

// --class-names split at commas, empty names refused (a doubled comma is a slip, not a class).
std::vector<std::string> given_class_names(const std::string& text) {
  std::vector<std::string> names;
  if (text.empty()) return names;
  for (std::size_t at = 0;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    names.push_back(text.substr(at, comma - at));
    if (names.back().empty())
      throw ConfigError("--class-names",
                        "name " + std::to_string(names.size()) + " of \"" + text + "\" is empty");
    if (comma == text.size()) return names;
    at = comma + 1;
  }
}

// Whether `count` class names describe the model's output: one name per unit of its single
// output, or two names for a single unit (a binary classifier, whose output is the second's
// probability or logit, as Keras' label_mode "binary" has it).
bool names_fit(const Model& model, std::size_t count) {
  if (model.output_count() != 1) return false;
  const Shape& out = model.output_shape(0);
  if (out.size() != 1) return false;
  return out[0] == static_cast<std::int64_t>(count) || (out[0] == 1 && count == 2);
}

std::string outputs_text(const Model& model) {
  if (model.output_count() == 1)
    return "whose output is " + shape_to_string(model.output_shape(0), true);
  std::string shapes;
  for (std::size_t j = 0; j < model.output_count(); ++j)
    shapes += (j ? ", " : "") + shape_to_string(model.output_shape(j), true);
  return "of " + std::to_string(model.output_count()) + " outputs (" + shapes + ")";
}

// The class names for the metadata: --class-names, else the checkpoint's (its training state's
// "class_names", written for image-folder datasets), else none. Given names that do not fit the
// output are an error; the checkpoint's are left out with a warning.
std::vector<std::string> class_names_of(const ExportOptions& o, const CheckpointData& data,
                                        const Model& model) {
  std::vector<std::string> names = given_class_names(o.class_names);
  if (!names.empty()) {
    if (!names_fit(model, names.size()))
      throw ConfigError("--class-names",
                        std::to_string(names.size()) + " class names for a model " +
                            outputs_text(model) +
                            "; give one name per output unit of a single-output model (or two "
                            "for a single sigmoid unit)");
    return names;
  }
  if (!data.training) return names;
  const auto it = data.training->state.find("class_names");
  if (it != data.training->state.end() && it->is_array())
    for (const auto& n : *it)
      if (n.is_string()) names.push_back(n.get<std::string>());
  if (names.empty() || names_fit(model, names.size())) return names;
  spdlog::warn(
      "the checkpoint's {} class names do not fit a model {}: the ONNX file gets none "
      "(give --class-names)",
      names.size(), outputs_text(model));
  return {};
}

// A checkpoint's input_shapes (its training state's): a list of per-sample shapes, each a list of
// positive dimensions. Throws DataError naming `file` for anything else.
std::vector<Shape> stored_input_shapes(const nlohmann::json& stored, const std::string& file) {
  const auto refuse = [&] {
    return DataError(file +
                     ": its training state's input_shapes is not a list of shapes "
                     "(lists of positive dimensions): " +
                     stored.dump().substr(0, 200));
  };
  if (!stored.is_array()) throw refuse();
  std::vector<Shape> shapes;
  for (const auto& shape : stored) {
    if (!shape.is_array()) throw refuse();
    Shape s;
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() <= 0) throw refuse();
      s.push_back(d.get<std::int64_t>());
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// The lengths of a model whose config leaves them to the data (nn/input_lengths.hpp): those the
// checkpoint's model was trained on (its training state's input_shapes), else those of the
// training data of --config's run config (null: none given).
Model::DataInputShapes lengths_for_export(const std::string& file, const CheckpointData& data,
                                          const RunConfig* run_config) {
  const nlohmann::json* stored = nullptr;
  if (data.training)
    if (const auto it = data.training->state.find("input_shapes"); it != data.training->state.end())
      stored = &*it;
  return [file, stored, run_config](const std::vector<Shape>& declared) -> std::vector<Shape> {
    if (stored) return stored_input_shapes(*stored, file);
    if (run_config) return training_input_shapes(*run_config)(declared);
    throw ConfigError("--config", "the model's inputs leave lengths to the data and " + file +
                                      " does not say which it was trained on (a Tandem "
                                      "checkpoint does); give the run config whose training "
                                      "data has them: --config RUN.json");
  };
}

// Where the ONNX bytes go: standard output for '-' (refused when it is a terminal, which the
// bytes would garble), else the file, replaced atomically.
void write_onnx(const std::string& output, const std::string& bytes) {
  if (output != "-") return write_file_atomically(output, bytes);
  std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout.flush();
  if (!std::cout) throw RunError("cannot write the ONNX model to standard output");
}

int run_export(const ExportOptions& o) {
  const std::string output =
      o.output.empty() ? fs::path(o.file).replace_extension(".onnx").string() : o.output;
  if (output != "-")
    refuse_bad_output(output, {o.file, o.config}, "--output");
  else if (::isatty(STDOUT_FILENO))
    throw ConfigError("--output",
                      "'-' is standard output, a terminal here: the ONNX model is "
                      "binary; redirect it (> model.onnx) or give a file name");
  const CheckpointData data = read_checkpoint_file(o.file);
  nlohmann::json model_config = nn::with_file_keras_version(data.model_config, data.keras_version);
  std::string config_path = "model_config";
  std::optional<RunConfig> run_config;
  if (!o.config.empty()) {
    run_config = parse_run_config(load_json_file(o.config), fs::absolute(o.config).parent_path());
    model_config = run_config->model;
    config_path = "model";
  } else if (model_config.is_null()) {
    throw DataError(o.file + " holds no model_config (a weights-only file); give the run config "
                             "the weights were trained with: --config RUN.json");
  }
  auto model =
      Model::from_config(model_config, config_path, 0,
                         lengths_for_export(o.file, data, run_config ? &*run_config : nullptr));
  if (const std::string how = model->load_weights(data, o.file); !how.empty())
    spdlog::warn("{}: {}", o.file, how);

  std::map<std::string, std::string> metadata{{"tandem_source", fs::path(o.file).filename()}};
  const std::vector<std::string> names = class_names_of(o, data, *model);
  if (!names.empty()) metadata["class_names"] = nlohmann::json(names).dump();
  if (data.training && data.training->state.contains("epoch"))
    metadata["tandem_epoch"] = data.training->state["epoch"].dump();

  onnx_export::OnnxModel onnx;
  try {
    onnx = onnx_export::export_onnx(*model, metadata);
  } catch (const Error& e) {
    if (e.code() != ExitCode::bad_input) throw;
    throw DataError(o.file + ": " + e.what());  // a layer with no ONNX form
  }
  write_onnx(output, onnx.bytes);
  std::string ins, outs;
  for (std::size_t i = 0; i < model->input_count(); ++i)
    ins += (ins.empty() ? "" : ", ") + onnx.input_names[i] + " " +
           shape_to_string(model->input_shape(i), true);
  for (std::size_t j = 0; j < model->output_count(); ++j)
    outs += (outs.empty() ? "" : ", ") + onnx.output_names[j] + " " +
            shape_to_string(model->output_shape(j), true);
  spdlog::info("{} -> {} (ONNX opset {}, {} bytes): inputs {}; outputs {}", o.file,
               output == "-" ? "standard output" : output, onnx_export::kOpset, onnx.bytes.size(),
               ins, outs);
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_export_command(CLI::App& app, std::function<int()>& selected) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint's model as ONNX for serving");
  cmd->footer(
      "Writes the model with its weights as an ONNX model (opset 13) in inference behaviour: "
      "Dropout, noise and augmentation layers left out, BatchNormalization with its moving "
      "statistics. Inputs and outputs keep the model's layer names and shapes (channels last) "
      "with a dynamic batch dimension; the class names go into the metadata (class_names). "
      "See docs/export.md.\nExit codes: 0 written; 2 for a file Tandem cannot read, a run "
      "config with an error, class names that do not fit the output or a layer with no ONNX "
      "form (nothing is written); 1 when the file cannot be written.");
  cmd->add_option("model", o->file, "Checkpoint, or Keras model file (.h5, Keras 3 .keras)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("-o,--output", o->output,
                  "The ONNX file to write (default: MODEL.onnx); '-' = stdout");
  cmd->add_option("--config", o->config,
                  "Run config whose model to use (for a weights-only .h5 file)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--class-names", o->class_names,
                  "One name per output unit, comma-separated, for the metadata (two for a single "
                  "sigmoid unit; default: the checkpoint's)");
  cmd->callback([o, &selected] {
    selected = [o] { return run_export(*o); };
  });
}

}  // namespace tandem::app
