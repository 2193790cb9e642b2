// A plugin whose callback crashes the process in on_train_batch_end of its second step, the way
// a buggy plugin does: "how" is "segv" (a bad memory access), "abort" (std::abort) or
// "overflow" (a recursion that runs out of stack). The tests check that the process names the
// callback and the hook before it dies. "throw_at_end" throws a RunError from on_train_end
// instead, after the training.
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

// Recurses until the stack runs out; the array keeps each frame and the compiler from turning
// the recursion into a loop.
int overflow(int depth) {
  volatile char frame[4096];
  frame[0] = static_cast<char>(depth);
  if (depth == INT32_MAX) return frame[0];  // never: 8 TiB of stack
  return overflow(depth + 1) + frame[0];
}

class CrashesInHook : public tandem::Callback {
 public:
  explicit CrashesInHook(std::string how) : how_(std::move(how)) {}
  std::string name() const override { return "crashes_in_hook"; }
  void on_train_batch_end(tandem::CallbackContext& ctx, std::int64_t,
                          const tandem::Logs&) override {
    if (ctx.state().step != 2 || how_ == "throw_at_end") return;
    if (how_ == "abort") std::abort();
    if (how_ == "overflow") (void)overflow(0);
    std::raise(SIGSEGV);
  }

  void on_train_end(tandem::CallbackContext&, const tandem::Logs&) override {
    if (how_ == "throw_at_end") throw tandem::RunError("cannot upload the report (test)");
  }

 private:
  std::string how_;
};

class CrashesInHookPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"crashes_in_hook",
            "0.0.1",
            "Test plugin: crashes the process in a hook",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"how",
                {{"enum", {"segv", "abort", "overflow", "throw_at_end"}}, {"default", "segv"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<CrashesInHook>(options.at("how").get<std::string>());
  }
};

}  // namespace

TANDEM_PLUGIN(CrashesInHookPlugin)
