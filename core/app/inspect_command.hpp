// `tandem inspect CKPT`: what a checkpoint holds — layers, weight shapes, parameter count and the
// training state (epoch, step, target, device plan, optimizer and slots, history) — as text or,
// with --json, as one JSON object (docs/checkpoint-format.md "tandem inspect").
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `inspect` subcommand to `app`. When it is parsed, `selected` is set to the function
/// that runs it (returning the exit code: 0, or 2 through a DataError for a missing, truncated or
/// foreign file). The subcommand's options live as long as `app`.
void add_inspect_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
