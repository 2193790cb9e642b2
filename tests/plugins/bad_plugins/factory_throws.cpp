// A plugin whose factory (the tandem_plugin_factory alias) throws.
#include <stdexcept>

#include "tandem/plugin.hpp"

namespace {

std::shared_ptr<tandem::CallbackPlugin> throwing_factory() {
  throw std::runtime_error("factory_throws: cannot start (simulated)");
}

}  // namespace

extern "C" BOOST_SYMBOL_EXPORT int tandem_plugin_abi_version() {
  return TANDEM_PLUGIN_ABI_VERSION;
}
BOOST_DLL_ALIAS(throwing_factory, tandem_plugin_factory)
