// A plugin whose info() throws.
#include <stdexcept>

#include "tandem/plugin.hpp"

namespace {

class InfoThrows : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    throw std::logic_error("info_throws: no info today (simulated)");
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    return nullptr;
  }
};

}  // namespace

TANDEM_PLUGIN(InfoThrows)
