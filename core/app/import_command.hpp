// `tandem import MODEL.h5 -o RUN.json`: a run config from a Keras HDF5 model file (its
// model_config and training_config; train/keras_import.hpp), with --set for what the file does
// not hold (the data, epochs).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `import` subcommand to `app`; when parsed, `selected` is set to the function that
/// runs it (returning the exit code). The subcommand's options live as long as `app`.
void add_import_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
