// tandem: the headless engine. A thin layer over the library: parse arguments, call run_*,
// map errors to exit codes (0 ok, 1 run failed, 2 bad usage, config or data).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "app/commands.hpp"
#include "tandem/error.hpp"
#include "tandem/process_setup.hpp"

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_signal(int sig) {
  g_interrupted.store(true);
  // A second signal takes the default action: the user really wants out.
  std::signal(sig, SIG_DFL);
}

}  // namespace

int main(int argc, char** argv) {
  tandem::configure_process(argc, argv);
  auto logger = spdlog::stderr_color_mt("tandem");
  logger->set_pattern("%^[%l]%$ %v");
  spdlog::set_default_logger(logger);

  CLI::App app{"Tandem: train neural networks on one device or many.", "tandem"};
  app.set_version_flag("--version", std::string("tandem ") + TANDEM_VERSION);
  app.require_subcommand(1);
  tandem::app::Commands commands;
  commands.register_all(app, &g_interrupted);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return static_cast<int>(tandem::ExitCode::bad_input);
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    return commands.run();
  } catch (const tandem::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return static_cast<int>(tandem::ExitCode::run_failed);
  }
}
