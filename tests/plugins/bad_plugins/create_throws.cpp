// A plugin that loads fine but whose create() throws (or, with {"in": "on_epoch_end"}, whose
// callback throws from a hook, or with {"in": "nothing"} creates no callback at all).
#include <stdexcept>

#include "tandem/plugin.hpp"

namespace {

class ThrowsInHook : public tandem::Callback {
 public:
  std::string name() const override { return "create_throws"; }
  void on_epoch_end(tandem::CallbackContext&, int, const tandem::Logs&) override {
    throw std::runtime_error("create_throws: hook failed (simulated)");
  }
};

class CreateThrows : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"create_throws",
            "0.0.1",
            "Test plugin: create() throws",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties",
              {{"in", {{"enum", {"create", "on_epoch_end", "nothing"}}, {"default", "create"}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json& options,
                                           const tandem::CallbackSetup&) const override {
    const std::string in = options.at("in");
    if (in == "create") throw std::runtime_error("create_throws: cannot create (simulated)");
    if (in == "nothing") return nullptr;
    return std::make_shared<ThrowsInHook>();
  }
};

}  // namespace

TANDEM_PLUGIN(CreateThrows)
