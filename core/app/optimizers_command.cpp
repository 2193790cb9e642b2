#include "app/optimizers_command.hpp"

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "optim/optimizer_catalog.hpp"
#include "app/standard_output.hpp"
#include "tandem/error.hpp"

namespace tandem::app {

namespace {

using nlohmann::json;

json to_json(const std::vector<OptimizerCatalogEntry>& catalog) {
  json list = json::array();
  for (const auto& entry : catalog)
    list.push_back(
        {{"class_name", entry.class_name}, {"aliases", entry.aliases}, {"config", entry.config}});
  return {{"schema", 1}, {"optimizers", list}};
}

std::string to_table(const std::vector<OptimizerCatalogEntry>& catalog) {
  std::string out =
      "Optimizers (run config: \"optimizer\": \"adam\" or {\"class_name\": \"Adam\", "
      "\"config\": {...}}):\n";
  for (const auto& entry : catalog) {
    out += "  " + entry.class_name;
    for (const auto& alias : entry.aliases) out += " (" + alias + ")";
    out += "\n    defaults:";
    for (auto it = entry.config.begin(); it != entry.config.end(); ++it)
      if (it.key() != "name") out += " " + it.key() + "=" + it.value().dump();
    out += "\n";
  }
  out +=
      "  LossScaleOptimizer wraps any of these (Keras' loss scaling; docs/config.md):\n"
      "    {\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": \"adam\", "
      "\"initial_scale\": 32768.0, \"dynamic_growth_steps\": 2000}}\n";
  return out;
}

}  // namespace

void add_optimizers_command(CLI::App& app, std::function<int()>& selected) {
  auto json_output = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("optimizers", "List the optimizers that run configs can name");
  cmd->footer(
      "Prints each optimizer's class name, the other spellings a run config may use, and its "
      "Keras config at the defaults. --json prints one JSON document: {\"schema\": 1, "
      "\"optimizers\": [{\"class_name\", \"aliases\", \"config\"}, ...]}.\n"
      "Exit codes: 0; 2 for bad usage.");
  cmd->add_flag("--json", *json_output, "Print one JSON document (for tandem-gui and scripts)");
  cmd->callback([json_output, &selected] {
    selected = [json_output] {
      const auto catalog = optimizer_catalog();
      write_stdout(*json_output ? to_json(catalog).dump(2) + "\n" : to_table(catalog));
      return static_cast<int>(ExitCode::ok);
    };
  });
}

}  // namespace tandem::app
