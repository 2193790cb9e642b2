#include "app/export_command.hpp"

#include <filesystem>
#include <map>
#include <memory>
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
#include "train/run_config.hpp"

namespace tandem::app {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string file;
  std::string output;
  std::string config;
  std::vector<std::string> class_names;
};

// The class names for the metadata: --class-names, else the checkpoint's (its training state's
// "class_names", written for image-folder datasets), else none. Their number must be the
// output's width.
std::vector<std::string> class_names_of(const ExportOptions& o, const CheckpointData& data,
                                        const Model& model) {
  std::vector<std::string> names = o.class_names;
  if (names.empty() && data.training) {
    const auto it = data.training->state.find("class_names");
    if (it != data.training->state.end() && it->is_array())
      for (const auto& n : *it)
        if (n.is_string()) names.push_back(n.get<std::string>());
  }
  if (names.empty()) return names;
  const Shape& out = model.output_shape(0);
  if (model.output_count() != 1 || out.size() != 1 ||
      out[0] != static_cast<std::int64_t>(names.size()))
    throw ConfigError("--class-names",
                      std::to_string(names.size()) + " class names for a model whose output is " +
                          shape_to_string(model.output_shape(), true) +
                          "; give one name per output unit of a single-output model");
  return names;
}

int run_export(const ExportOptions& o) {
  const std::string output =
      o.output.empty() ? fs::path(o.file).replace_extension(".onnx").string() : o.output;
  refuse_output_over_input(output, {o.file, o.config}, "--output");
  const CheckpointData data = read_checkpoint_file(o.file);
  nlohmann::json model_config = nn::with_file_keras_version(data.model_config, data.keras_version);
  std::string config_path = "model_config";
  if (!o.config.empty()) {
    model_config = parse_run_config(load_json_file(o.config),
                                    fs::absolute(o.config).parent_path()).model;
    config_path = "model";
  } else if (model_config.is_null()) {
    throw DataError(o.file + " holds no model_config (a weights-only file); give the run config "
                             "the weights were trained with: --config RUN.json");
  }
  auto model = Model::from_config(model_config, config_path, 0);
  model->load_weights(data, o.file);

  std::map<std::string, std::string> metadata{{"tandem_source", fs::path(o.file).filename()}};
  const std::vector<std::string> names = class_names_of(o, data, *model);
  if (!names.empty()) metadata["class_names"] = nlohmann::json(names).dump();
  if (data.training && data.training->state.contains("epoch"))
    metadata["tandem_epoch"] = data.training->state["epoch"].dump();

  std::string bytes;
  try {
    bytes = onnx_export::export_onnx(*model, metadata);
  } catch (const Error& e) {
    if (e.code() != ExitCode::bad_input) throw;
    throw DataError(o.file + ": " + e.what());  // a layer with no ONNX form
  }
  write_file_atomically(output, bytes);
  std::string ins, outs;
  for (std::size_t i = 0; i < model->input_count(); ++i)
    ins += (ins.empty() ? "" : ", ") + shape_to_string(model->input_shape(i), true);
  for (std::size_t j = 0; j < model->output_count(); ++j)
    outs += (outs.empty() ? "" : ", ") + model->output_name(j) + " " +
            shape_to_string(model->output_shape(j), true);
  spdlog::info("{} -> {} (ONNX opset {}, {} bytes): inputs {}; outputs {}", o.file, output,
               onnx_export::kOpset, bytes.size(), ins, outs);
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
      "See docs/export.md.\nExit codes: 0 written; 2 for a file Tandem cannot read or a layer "
      "with no ONNX form (nothing is written).");
  cmd->add_option("model", o->file, "Checkpoint or Keras .h5 model file")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o->output, "The ONNX file to write (default: MODEL.onnx)");
  cmd->add_option("--config", o->config,
                  "Run config whose model to use (for a weights-only .h5 file)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--class-names", o->class_names,
                  "One name per output unit, for the metadata (default: the checkpoint's)")
      ->delimiter(',');
  cmd->callback([o, &selected] {
    selected = [o] { return run_export(*o); };
  });
}

}  // namespace tandem::app
