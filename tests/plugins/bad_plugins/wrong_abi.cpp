// A plugin built for another plugin ABI: tandem_plugin_abi_version() reports
// TANDEM_PLUGIN_ABI_VERSION + 1. The host must refuse it after calling only that plain C function:
// everything else here aborts the process if called, so a test that survives loading it proves
// that no C++ symbol (the factory alias, the plugin's virtual functions) was touched.
#include <cstdio>
#include <cstdlib>

#include "tandem/plugin.hpp"

namespace {

[[noreturn]] void touched(const char* what) {
  std::fprintf(stderr, "wrong_abi plugin: %s was called despite the ABI mismatch\n", what);
  std::fflush(stderr);
  std::abort();
}

class WrongAbiPlugin : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override { touched("info()"); }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    touched("create()");
  }
};

std::shared_ptr<tandem::CallbackPlugin> wrong_abi_factory() {
  touched("the factory alias tandem_plugin_factory");
}

}  // namespace

extern "C" BOOST_SYMBOL_EXPORT int tandem_plugin_abi_version() {
  return TANDEM_PLUGIN_ABI_VERSION + 1;
}
BOOST_DLL_ALIAS(wrong_abi_factory, tandem_plugin_factory)

// Lets a test check that the factory really would abort (in a child process).
extern "C" BOOST_SYMBOL_EXPORT void wrong_abi_call_factory() {
  wrong_abi_factory();
}
