// A valid plugin for the lifetime tests: built with -fno-gnu-unique (no STB_GNU_UNIQUE symbols,
// which would make the library impossible to unload), so a test can watch it leave the process.
// {"fail": true} makes create() throw a ConfigError, so a test can read that error after the
// library is gone.
#include <atomic>

#include "tandem/error.hpp"
#include "tandem/plugin.hpp"

namespace {

std::atomic<int> g_epochs{0};

class Counter : public tandem::Callback {
 public:
  std::string name() const override { return "lifetime"; }
  void on_epoch_end(tandem::CallbackContext&, int, const tandem::Logs&) override { ++g_epochs; }
};

class Lifetime : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"lifetime",
            "0.0.1",
            "Test plugin: counts epochs; unloadable",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties", {{"fail", {{"type", "boolean"}, {"default", false}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup& setup) const override {
    if (options.at("fail").get<bool>())
      throw tandem::ConfigError(setup.config_path + ".options.fail", "asked to fail (test)");
    return std::shared_ptr<tandem::Callback>(new Counter);
  }
};

}  // namespace

extern "C" BOOST_SYMBOL_EXPORT int lifetime_epochs_seen() {
  return g_epochs.load();
}

TANDEM_PLUGIN(Lifetime)
