// The plugin SDK: how a shared library provides a Tandem callback (docs/design.md contract 5).
//
// A plugin library defines one class derived from CallbackPlugin and names it once with
// TANDEM_PLUGIN(MyPlugin). That exports
//   - a plain C function tandem_plugin_abi_version(), which the host calls *before* touching any
//     C++ symbol, and refuses the library when it differs from TANDEM_PLUGIN_ABI_VERSION;
//   - a Boost.DLL alias "tandem_plugin_factory" returning the plugin object.
// The host keeps the library loaded for as long as anything it created lives.
//
// Ownership: the host owns the CallbackPlugin object and every Callback it makes; create() may be
// called several times (one callback per config entry). Thread-safety: the host calls a plugin
// from one thread at a time; plugins must not rely on which one.
#pragma once

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/callback.hpp"
#include "tandem/export.hpp"

/// Bumped whenever a public header used by plugins changes incompatibly (2: ReplicaFacts::rank;
/// 3: Tensor knows its device; Layer, Loss, Metric and Optimizer compute through the backend;
/// 4: Layer without the engine's relu-handoff and cross-replica hooks, the SDK is these headers
/// only and libtandem exports only what they declare; 5: functional models: Layer's list forms
/// for several inputs, Model's graph; 6: a model's calls carry their arguments; 7: models with
/// several inputs and outputs; 8: a model keeps its layers' activity regularizers; 10: dtype
/// policies; 11: Model runs in parts for pipeline stages, ReplicaFacts::stages; 13: CallbackSetup
/// carries the run's length; 14: CheckpointData::layout, for Keras 3's weights files; 15:
/// CallbackContext swaps the weights with the optimizer's moving averages).
#define TANDEM_PLUGIN_ABI_VERSION 15

namespace tandem {

struct TANDEM_EXPORT PluginInfo {
  std::string name;         // as configs name it: "checkpoint"
  std::string version;      // the plugin's own version: "1.0.0"
  std::string description;  // one line
  nlohmann::json options_schema = {{"type", "object"}, {"additionalProperties", false}};
};

/// What a plugin is told when it makes a callback.
struct TANDEM_EXPORT CallbackSetup {
  Target target = Target::template_model;
  std::string config_path;  // "callbacks[2]": for error messages
  /// The length of the run the callback will serve, for checks its options alone cannot make (a
  /// schedule against the run it schedules): epochs, and optimizer steps in each; 0 when not
  /// known (`tandem plugins`, which makes callbacks only to check the plugins). `tandem check`
  /// and `tandem train` give both, before the run folder exists.
  int epochs = 0;
  std::int64_t steps_per_epoch = 0;
};

class TANDEM_EXPORT CallbackPlugin {
 public:
  virtual ~CallbackPlugin() = default;
  virtual PluginInfo info() const = 0;
  /// Makes a callback from options already validated against info().options_schema (defaults
  /// filled in). Throw ConfigError (naming setup.config_path + ".options.<key>") for problems the
  /// schema cannot express.
  virtual std::shared_ptr<Callback> create(const nlohmann::json& options,
                                           const CallbackSetup& setup) const = 0;
};

}  // namespace tandem

// clang-format off
#define TANDEM_PLUGIN(PluginClass)                                                        \
  extern "C" BOOST_SYMBOL_EXPORT int tandem_plugin_abi_version() {                        \
    return TANDEM_PLUGIN_ABI_VERSION;                                                     \
  }                                                                                       \
  namespace {                                                                             \
  std::shared_ptr<::tandem::CallbackPlugin> tandem_plugin_make() {                        \
    return std::make_shared<PluginClass>();                                               \
  }                                                                                       \
  }                                                                                       \
  BOOST_DLL_ALIAS(tandem_plugin_make, tandem_plugin_factory)
// clang-format on
