// A library that aborts the process as it is loaded (a constructor that crashes): what a broken
// or hostile plugin file can do before any check of ours runs. `tandem plugins` and `tandem
// check` must survive it (they load plugins in a child process) and name the file.
#include <cstdlib>

#include "tandem/plugin.hpp"

namespace {

__attribute__((constructor)) void crash_while_loading() { std::abort(); }

class CrashesOnLoad : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override { return {"crashes_on_load", "0.0.1", "never seen", {}}; }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    return nullptr;
  }
};

}  // namespace

TANDEM_PLUGIN(CrashesOnLoad)
