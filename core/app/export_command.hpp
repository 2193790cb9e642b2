// `tandem export MODEL.h5 [-o model.onnx]`: a checkpoint's model and weights as an ONNX model for
// serving runtimes (onnx/onnx_export.hpp, docs/export.md).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `export` subcommand to `app`; when parsed, `selected` is set to the function that
/// runs it (exit 0; 2 for a file Tandem cannot read or a layer with no ONNX form, nothing
/// written then). The subcommand's options live as long as `app`.
void add_export_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
