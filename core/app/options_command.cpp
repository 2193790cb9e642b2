#include "app/options_command.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"
#include "plugin/options_schema.hpp"
#include "util/json_text.hpp"
#include "util/regular_file.hpp"

namespace tandem::app {

namespace {

using nlohmann::json;

struct CheckOptionsArgs {
  std::string request = "-";
  bool json = false;
};

std::string read_request(const std::string& source) {
  if (source == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  if (const std::string why = not_a_regular_file(source); !why.empty())
    throw DataError("cannot read " + source + " (" + why + ")");
  std::ifstream in(source, std::ios::binary);
  if (!in) throw DataError("cannot read " + source);
  return {std::istreambuf_iterator<char>(in), {}};
}

// {"schema": S, "options": O}: the schema checked as a plugin's would be; options default {}.
std::pair<json, json> parse_request(const std::string& text) {
  json request;
  try {
    request = parse_json_text(text);
  } catch (const JsonTextRefused& e) {
    throw ConfigError("<request>", std::string("not a request: ") + e.what());
  } catch (const json::exception& e) {
    throw ConfigError("<request>", std::string("not valid JSON: ") + e.what());
  }
  if (!request.is_object() || !request.contains("schema"))
    throw ConfigError("<request>", "expected {\"schema\": {...}, \"options\": {...}}");
  for (auto it = request.begin(); it != request.end(); ++it)
    if (it.key() != "schema" && it.key() != "options")
      throw ConfigError(it.key(), "unknown key (known: options, schema)");
  check_schema(request["schema"], "schema");
  return {request["schema"], request.value("options", json::object())};
}

json answer(const json& schema, const json& options) {
  json problems = json::array();
  for (const auto& p : option_problems(schema, options))
    problems.push_back({{"option", p.option}, {"path", p.path}, {"message", p.message}});
  json expects = json::object();
  if (schema.contains("properties"))
    for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it)
      expects[it.key()] = describe_schema(it.value());
  json out = {
      {"schema", 1}, {"ok", problems.empty()}, {"problems", problems}, {"expects", expects}};
  out["options"] = problems.empty() ? validate_options(schema, options, "options") : json(nullptr);
  return out;
}

int run(const CheckOptionsArgs& args) {
  if (!args.json) {
    const auto [schema, options] = parse_request(read_request(args.request));
    const auto problems = option_problems(schema, options);
    if (problems.empty()) {
      std::cout << "ok: " << validate_options(schema, options, "options").dump() << "\n";
      return static_cast<int>(ExitCode::ok);
    }
    for (const auto& p : problems)
      std::cout << (p.path.empty() ? "options" : p.path) << ": " << p.message << "\n";
    return static_cast<int>(ExitCode::bad_input);
  }
  json out;
  try {
    const auto [schema, options] = parse_request(read_request(args.request));
    out = answer(schema, options);
  } catch (const ConfigError& e) {
    out = {{"schema", 1}, {"ok", false}, {"error", e.what()}, {"path", e.path()}};
  } catch (const Error& e) {
    out = {{"schema", 1}, {"ok", false}, {"error", e.what()}, {"path", nullptr}};
  }
  std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
  return static_cast<int>(out["ok"].get<bool>() ? ExitCode::ok : ExitCode::bad_input);
}

}  // namespace

void add_check_options_command(CLI::App& app, std::function<int()>& selected) {
  auto args = std::make_shared<CheckOptionsArgs>();
  auto* cmd = app.add_subcommand("check-options", "Check plugin options against an options schema");
  cmd->footer(
      "Reads {\"schema\": <a plugin's options_schema>, \"options\": {...}} from REQUEST (a file, "
      "or - for standard input) and checks the options the way `tandem train` does. Prints "
      "\"ok\" with the options and their defaults, or one line per problem (\"path: what\"). "
      "--json prints one JSON object: {\"ok\", \"options\", \"problems\": [{\"option\", \"path\", "
      "\"message\"}], \"expects\": {option: what it accepts}}, or {\"ok\": false, \"error\", "
      "\"path\"} for a bad request.\n"
      "Exit codes: 0 valid, 2 invalid options or a bad request.");
  cmd->add_option("request", args->request, "The request: a JSON file, or - (default)")
      ->type_name("REQUEST");
  cmd->add_flag("--json", args->json, "Print one JSON object (for tandem-gui and scripts)");
  cmd->callback([args, &selected] { selected = [args] { return run(*args); }; });
}

}  // namespace tandem::app
