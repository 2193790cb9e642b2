#include "train/hook_crash_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace tandem {

namespace {

// The running hook's mark: "callback 'probe' crashed the process in on_train_batch_end", or
// empty. Written by the training thread, read by a signal handler (async-signal-safe: a plain
// buffer and its length, the length stored last).
constexpr std::size_t kMarkBytes = 512;
char g_mark[kMarkBytes];
std::atomic<std::size_t> g_mark_length{0};

void set_mark(const std::string& mark) {
  g_mark_length.store(0, std::memory_order_release);
  const std::size_t n = std::min(mark.size(), kMarkBytes);
  std::memcpy(g_mark, mark.data(), n);
  g_mark_length.store(n, std::memory_order_release);
}

std::string current_mark() {
  return std::string(g_mark, g_mark_length.load(std::memory_order_acquire));
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV, a bad memory access";
    case SIGBUS:
      return "SIGBUS, a bad memory access";
    case SIGFPE:
      return "SIGFPE, an arithmetic fault";
    case SIGILL:
      return "SIGILL, an illegal instruction";
    case SIGABRT:
      return "SIGABRT, an abort";
    default:
      return "a fatal signal";
  }
}

void write_text(const char* text) {
  (void)!::write(2, text, std::strlen(text));
}

// Writes the mark, then dies of the signal: the handler was reset to the default on entry
// (SA_RESETHAND), so re-raising it ends the process as the signal would have.
void on_fatal_signal(int sig) {
  const std::size_t n = g_mark_length.load(std::memory_order_acquire);
  if (n > 0) {
    write_text("tandem: ");
    (void)!::write(2, g_mark, n);
    write_text(" (");
    write_text(signal_name(sig));
    write_text(
        "). The run ends here without its final model.h5; a checkpoint written before "
        "it resumes the run.\n");
  }
  ::raise(sig);
}

}  // namespace

HookInProgress::HookInProgress(const std::string& callback, const char* hook)
    : outer_(current_mark()) {
  set_mark("callback '" + callback + "' crashed the process in " + hook);
}

HookInProgress::~HookInProgress() {
  set_mark(outer_);
}

void report_crashes_in_hooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    // An alternate stack for the training thread (the one calling this), where hooks run: a
    // stack overflow leaves no room on the thread's own stack for the handler.
    static char alternate[64 * 1024];
    stack_t stack{};
    stack.ss_sp = alternate;
    stack.ss_size = sizeof alternate;
    ::sigaltstack(&stack, nullptr);
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    action.sa_flags = SA_RESETHAND | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &action, nullptr);
  });
}

}  // namespace tandem
