// `tandem devices`: the device registry on the command line (table, --json, --watch).
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <functional>

namespace tandem::app {

/// Adds the `devices` subcommand to `app`. When it is parsed, `selected` is set to the function
/// that runs it (returning the exit code). `interrupt` (raised by the SIGINT/SIGTERM handlers, may
/// be null) ends --watch; it must outlive the run. The subcommand's options live as long as `app`.
void add_devices_command(CLI::App& app, std::function<int()>& selected,
                         const std::atomic<bool>* interrupt);

}  // namespace tandem::app
