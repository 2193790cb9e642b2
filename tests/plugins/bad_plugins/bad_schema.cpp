// A plugin whose options schema uses a keyword outside the supported subset ("pattern") and a
// type name that does not exist.
#include "tandem/plugin.hpp"

namespace {

class BadSchema : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"bad_schema",
            "0.0.1",
            "Test plugin: invalid options schema",
            {{"type", "object"},
             {"properties", {{"name", {{"type", "text"}, {"pattern", "^[a-z]+$"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    return nullptr;
  }
};

}  // namespace

TANDEM_PLUGIN(BadSchema)
