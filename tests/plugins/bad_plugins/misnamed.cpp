// A valid plugin in the file tandem-misnamed.so that calls itself "somebody_else".
#include "tandem/plugin.hpp"

namespace {

class Quiet : public tandem::Callback {
 public:
  std::string name() const override { return "somebody_else"; }
};

class Misnamed : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"somebody_else", "0.0.1", "Test plugin: its file name does not match its name"};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    return std::shared_ptr<tandem::Callback>(new Quiet);
  }
};

}  // namespace

TANDEM_PLUGIN(Misnamed)
