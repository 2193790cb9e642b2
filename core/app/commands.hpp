// The tandem subcommands: train, evaluate, predict, summary.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tandem::app {

class Commands {
 public:
  /// Adds every subcommand to `app`; `interrupt` is raised by the signal handlers.
  void register_all(CLI::App& app, const std::atomic<bool>* interrupt);
  /// Runs the subcommand that was parsed; returns the exit code.
  int run();
  /// Whether the subcommand `app` parsed reads the interrupt flag (train, devices --watch);
  /// every other one is ended by the first SIGINT, SIGTERM or SIGUSR1.
  static bool reads_interrupts(const CLI::App& app);

 private:
  std::function<int()> selected_;
  const std::atomic<bool>* interrupt_ = nullptr;

  std::string config_;
  std::vector<std::string> overrides_;
  std::string run_dir_;
  std::string events_;
  std::string resume_;
  std::string weights_;
  std::string split_ = "validation";
  std::string output_ = "-";
  std::string format_;
  bool quiet_ = false;
  bool overwrite_ = false;
  bool trust_checkpoint_ = false;
  std::optional<double> device_stats_;
  bool json_ = false;
  bool expand_nested_ = false;  // summary --expand-nested
  double bench_seconds_ = 10;
};

/// `tandem check --json`'s answer when the check failed, as the line it prints:
/// {"ok": false, "error", "path"} (`path` null when the error names none; bytes of the error that
/// are not UTF-8 become U+FFFD).
std::string check_failure_line(const std::string& error, const nlohmann::json& path = nullptr);

}  // namespace tandem::app
