#include "app/devices_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "tandem/devices.hpp"
#include "app/standard_output.hpp"
#include "tandem/error.hpp"

namespace tandem::app {

namespace {

struct DevicesOptions {
  bool json = false;
  bool watch = false;
};

bool interrupted(const std::atomic<bool>* interrupt) {
  return interrupt && interrupt->load();
}

// Sleeps up to `duration`, waking early when interrupted. Returns false when interrupted.
bool wait_for(std::chrono::milliseconds duration, const std::atomic<bool>* interrupt) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) {
    if (interrupted(interrupt)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !interrupted(interrupt);
}

int run_devices(const DevicesOptions& opt, const std::atomic<bool>* interrupt) {
  const DeviceReport report = discover_devices();
  // CPU utilisation is measured between two samples: take a baseline a moment before the first
  // reading so that it is not null.
  sample_devices(report);
  if (!wait_for(std::chrono::milliseconds(200), interrupt)) return static_cast<int>(ExitCode::ok);

  const bool clear_screen = opt.watch && !opt.json && ::isatty(STDOUT_FILENO) == 1;
  auto next = std::chrono::steady_clock::now();
  while (true) {
    const DeviceSample sample = sample_devices(report);
    if (opt.json) {
      write_stdout(to_json(report, &sample).dump() + "\n");
    } else if (clear_screen) {
      write_stdout("\x1b[H\x1b[2J" + to_table(report, &sample));
    } else {
      // Not a terminal (a pipe, a file): tables one after another, a blank line between.
      write_stdout(to_table(report, &sample) + (opt.watch ? "\n" : ""));
    }
    if (!opt.watch) break;
    next += std::chrono::seconds(1);
    auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;
    if (!wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(next - now), interrupt))
      break;
  }
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_devices_command(CLI::App& app, std::function<int()>& selected,
                         const std::atomic<bool>* interrupt) {
  auto opt = std::make_shared<DevicesOptions>();
  auto* cmd = app.add_subcommand("devices", "List the CPU and CUDA GPUs, with live readings");
  cmd->footer(
      "Prints one row per device (cpu, cuda:0, ...) and, without GPUs, why there are none. "
      "--watch refreshes every second until Ctrl-C; with --json it writes one JSON object per "
      "line per second.\nExit codes: 0 done (also without a GPU).");
  cmd->add_flag("--json", opt->json, "Print one JSON object instead of the table");
  cmd->add_flag("--watch", opt->watch, "Refresh every second until interrupted");
  cmd->callback([opt, &selected, interrupt] {
    selected = [opt, interrupt] { return run_devices(*opt, interrupt); };
  });
}

}  // namespace tandem::app
