// A good plugin that, as it is loaded, appends the command line of the process loading it to the
// file named by $TANDEM_TEST_LOAD_MARKER: the tests see which process ran plugin code.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "tandem/plugin.hpp"

namespace {

class Quiet : public tandem::Callback {
 public:
  std::string name() const override { return "announces_load"; }
};

__attribute__((constructor)) void announce_load() {
  const char* marker = std::getenv("TANDEM_TEST_LOAD_MARKER");
  if (!marker) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string cmdline{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (char& c : cmdline)
    if (c == '\0') c = ' ';
  std::ofstream(marker, std::ios::app) << cmdline << "\n";
}

class AnnouncesLoad : public tandem::CallbackPlugin {
 public:
  tandem::PluginInfo info() const override {
    return {"announces_load", "0.0.1", "Test plugin: records which process loads it",
            {{"type", "object"},
             {"additionalProperties", false},
             {"properties", {{"level", {{"type", "integer"}, {"minimum", 0}}}}}}};
  }
  std::shared_ptr<tandem::Callback> create(const nlohmann::json&,
                                           const tandem::CallbackSetup&) const override {
    return std::make_shared<Quiet>();
  }
};

}  // namespace

TANDEM_PLUGIN(AnnouncesLoad)
