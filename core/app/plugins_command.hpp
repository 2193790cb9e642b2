// `tandem plugins`: the callback plugins on the search path (table or --json with option schemas).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tandem::app {

/// Adds the `plugins` subcommand to `app`. When it is parsed, `selected` is set to the function
/// that runs it (returning the exit code: 0, also when some plugins are broken — they are listed
/// with their error). The subcommand's options live as long as `app`.
void add_plugins_command(CLI::App& app, std::function<int()>& selected);

}  // namespace tandem::app
