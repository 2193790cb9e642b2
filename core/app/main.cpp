// tandem: the headless engine. A thin layer over the library: parse arguments, call run_*,
// map errors to exit codes (0 ok, 1 run failed, 2 bad usage, config or data).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <unistd.h>
#include <atomic>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <thread>

#include "app/commands.hpp"
#include "parallel/world.hpp"
#include "tandem/error.hpp"
#include "train/hook_crash_report.hpp"
#include "util/process_setup.hpp"

namespace {

std::atomic<bool> g_interrupted{false};
// The exit code once the command has ended (-1 before): a SIGINT or SIGTERM that arrives after it
// ends the process with that code and says nothing. Under mpirun that is the launcher ending the
// job: the SIGTERM of MPI_Abort after an error already reported, or a rank that was done (the
// other ranks of evaluate and predict) waiting in MPI_Finalize for rank 0 when rank 0 failed or
// was stopped. A late SIGUSR1 is ignored: it is a stop the run already made — mpirun forwards
// one to every rank, and under load it can reach a rank after all of them agreed on the stop and
// finished (trainer.cpp); ending that rank at once, before its MPI_Finalize, made mpirun call the
// whole job failed ("exiting improperly").
std::atomic<int> g_ended_with{-1};

// SIGINT, SIGTERM and SIGUSR1 are blocked in every thread (compute threads inherit the mask) and
// received here, synchronously, by one thread: a signal never interrupts oneDNN's JIT kernels or
// a malloc in a worker. For a command that reads the flag (`graceful`: train stops at the next
// batch boundary with a resumable checkpoint, devices --watch ends its table), the first one
// raises it and a second one exits at once (the user really wants out). Every other command
// (loading, evaluating, predicting, exporting: nothing to save, and outputs are written
// atomically) ends on the first, exit 128 + the signal (130 for SIGINT), whatever its main
// thread is blocked in. SIGUSR1 is the one Open MPI's mpirun forwards to every rank and then
// waits: on SIGINT or SIGTERM it ends the job itself, SIGKILL one second after its SIGTERM
// (docs/distributed.md), and a batch scheduler's early warning (Slurm --signal) is often it.
void start_signal_thread(bool graceful) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, graceful] {
    int received = 0;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (const int code = g_ended_with.load(); code >= 0) {
        if (sig == SIGUSR1) continue;  // a stop already made: let the process end as it does
        std::_Exit(code);  // what was to say is said; "interrupted" would be wrong
      } else if (++received == 1 && graceful) {
        g_interrupted.store(true);
      } else {
        static const char kMessage[] = "tandem: interrupted\n";
        (void)!::write(2, kMessage, sizeof kMessage - 1);
        std::_Exit(128 + sig);
      }
    }
  }).detach();
}

}  // namespace

// "[rank 1/3] " inside an MPI job, "" otherwise.
std::string rank_prefix() {
  if (!tandem::launched_by_mpi()) return {};
  try {
    const auto world = tandem::process_world();
    if (world->size() > 1)
      return "[rank " + std::to_string(world->rank()) + "/" + std::to_string(world->size()) + "] ";
  } catch (const std::exception&) {
  }
  return {};
}

void abort_job_if_mpi(int code) {
  if (!tandem::launched_by_mpi()) return;
  try {
    const auto world = tandem::process_world();
    if (world->size() > 1) {
      g_ended_with.store(code);
      world->abort(code);
    }
  } catch (const std::exception&) {
  }
}

// The message for a first argument that names no subcommand ("tandem bogus": CLI11 says only
// that a subcommand is required), else "".
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string given = argv[1];
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(given)) return "";
    if (sub->get_group().empty()) continue;  // hidden (the plugin host's child)
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  return "tandem: error: unknown subcommand '" + given + "' (the subcommands: " + known +
         "; tandem --help says what each does)";
}

// Whether the command line is `tandem check ... --json ...`, whose output is one JSON object
// whatever went wrong, a bad command line included.
bool json_check(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "check") return false;
  for (int i = 2; i < argc; ++i)
    if (std::string_view(argv[i]) == "--json") return true;
  return false;
}

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
    if (const std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty())
      std::fprintf(stderr, "%s\n", unknown.c_str());
    else
      app.exit(e);
    if (json_check(argc, argv))
      std::printf("%s\n", tandem::app::check_failure_line(e.what()).c_str());
    return static_cast<int>(tandem::ExitCode::bad_input);
  }

  start_signal_thread(commands.reads_interrupts(app));
  tandem::report_crashes_in_hooks();  // a plugin that crashes the process is named
  int code = 0;
  try {
    code = commands.run();
    g_ended_with.store(code);
    return code;
  } catch (const tandem::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem: error: %s%s\n", rank_prefix().c_str(), e.what());
    code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem: error: %s%s\n", rank_prefix().c_str(), e.what());
    code = static_cast<int>(tandem::ExitCode::run_failed);
  }
  // One rank failing must not leave the others waiting in a collective: end the whole job.
  abort_job_if_mpi(code);
  return code;
}
