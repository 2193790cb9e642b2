// Which callback hook the training thread is in, so that a plugin that crashes the process
// (a segmentation fault, an abort) is named: "tandem: callback 'probe' crashed the process in
// on_train_batch_end (SIGSEGV)". Without it the process died with the shell's "Segmentation
// fault" and nothing said which of the run's plugins did it.
//
// HookInProgress marks a hook for as long as it runs (CallbackBus, around every call into a
// callback); report_crashes_in_hooks() installs the fatal-signal handlers that print the mark,
// and is for the tandem binary: a program embedding the library keeps its own handlers, and the
// marks then cost a few bytes copied per hook. Hooks run on one thread at a time (the training
// thread); a hook that publishes an event runs others inside it (on_event), so the marks are a
// small stack, the innermost reported.
#pragma once

#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Marks `hook` of callback `callback` as running until destroyed. Not copyable.
class HookInProgress {
 public:
  HookInProgress(const std::string& callback, const char* hook);
  ~HookInProgress();
  HookInProgress(const HookInProgress&) = delete;
  HookInProgress& operator=(const HookInProgress&) = delete;

 private:
  bool marked_;  // false past the stack's depth: nested too deep to mark (the outer one stands)
};

/// Installs handlers of SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (on an alternate stack, so a
/// plugin's runaway recursion is reported too) that write the running hook's mark, if any, to
/// stderr, then let the signal end the process as it would have. Once per process.
void report_crashes_in_hooks();

}  // namespace tandem

TANDEM_INTERNAL_API_END
