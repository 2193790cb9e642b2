#include "train/hook_crash_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>

namespace tandem {

namespace {

// The running hooks' marks, innermost last: "callback 'probe' crashed the process in
// on_train_batch_end". Written by the training thread, read by a signal handler
// (async-signal-safe: plain buffers, and a depth stored after its mark is written).
constexpr std::size_t kMarkBytes = 256;
constexpr int kMaxDepth = 8;  // a hook inside a hook's publish is depth 2
char g_marks[kMaxDepth][kMarkBytes];
std::size_t g_lengths[kMaxDepth];
std::atomic<int> g_depth{0};

// Appends `text` at `at` of `mark`, as much as fits; returns the new length.
std::size_t append(char* mark, std::size_t at, std::string_view text) {
  const std::size_t n = std::min(text.size(), kMarkBytes - at);
  std::memcpy(mark + at, text.data(), n);
  return at + n;
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
  const int depth = g_depth.load(std::memory_order_acquire);
  if (depth > 0) {
    write_text("tandem: ");
    (void)!::write(2, g_marks[depth - 1], g_lengths[depth - 1]);
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
    : marked_(g_depth.load(std::memory_order_relaxed) < kMaxDepth) {
  if (!marked_) return;
  const int depth = g_depth.load(std::memory_order_relaxed);
  char* mark = g_marks[depth];
  std::size_t n = append(mark, 0, "callback '");
  n = append(mark, n, callback);
  n = append(mark, n, "' crashed the process in ");
  g_lengths[depth] = append(mark, n, hook);
  g_depth.store(depth + 1, std::memory_order_release);
}

HookInProgress::~HookInProgress() {
  if (marked_) g_depth.fetch_sub(1, std::memory_order_release);
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
