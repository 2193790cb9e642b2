// `tandem optimizers`: the optimizers a run config can name, with their default configs (a table,
// or --json for tandem-gui and scripts).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `optimizers` subcommand to `app`. When it is parsed, `selected` is set to the
/// function that runs it (returning the exit code). The subcommand's options live as long as
/// `app`.
void add_optimizers_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
