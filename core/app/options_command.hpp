// `tandem check-options`: checks plugin options against an options schema with the engine's own
// validator (tandem/options_schema.hpp) — tandem-gui's option forms ask it rather than keeping a
// validator of their own.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `check-options` subcommand to `app`. When it is parsed, `selected` is set to the
/// function that runs it (returning the exit code). The subcommand's options live as long as
/// `app`.
void add_check_options_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
