// `tandem optimizers` and `tandem check-options`: what tandem-gui asks the engine instead of
// keeping lists and validators of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optim/optimizer.hpp"
#include "test_support.hpp"
#include "train/stored_config.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using test::run_command;

std::string cli() {
  return test::tandem_cli();
}

// Single quotes for /bin/sh.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

test::CommandResult check_options(const json& request, const std::string& flags = "--json") {
  return run_command("printf %s " + quoted(request.dump()) + " | " + cli() + " check-options - " +
                     flags);
}

TEST(OptimizersCli, JsonListsEveryOptimizerWithItsDefaults) {
  const auto r = run_command(cli() + " optimizers --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  ASSERT_TRUE(doc["optimizers"].is_array());
  std::vector<std::string> names;
  for (const auto& o : doc["optimizers"]) {
    names.push_back(o["class_name"]);
    ASSERT_TRUE(o["aliases"].is_array()) << o.dump();
    EXPECT_GT(o["config"]["learning_rate"].get<double>(), 0) << o.dump();
    EXPECT_EQ(o["config"]["name"], o["class_name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"SGD", "Adam", "AdamW", "RMSprop", "Adagrad",
                                             "Adadelta", "Adamax", "Nadam", "Lion"}));
  EXPECT_EQ(doc["optimizers"][0]["aliases"], json::array({"sgd"}));
  EXPECT_DOUBLE_EQ(doc["optimizers"][0]["config"]["learning_rate"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(doc["optimizers"][2]["config"]["weight_decay"].get<double>(), 0.004);

  // Every listed name is one a run config may use: `tandem check` accepts each.
  for (const std::string name : {"SGD", "adamw"}) {
    const auto c = run_command(cli() + " check --set optimizer=" + name + " --json");
    EXPECT_EQ(c.exit_code, 0) << name << ": " << c.out << c.err;
  }
}

TEST(OptimizersCli, TheTableNamesThemAndBadUsageIsExitCode2) {
  auto r = run_command(cli() + " optimizers");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"SGD (sgd)", "Adam (adam)", "AdamW (adamw)", "RMSprop (rmsprop)"})
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learning_rate=0.01"), std::string::npos) << r.out;
  // The loss-scaling wrapper's example is a config the engine takes as it is printed.
  const auto at = r.out.find("{\"class_name\": \"LossScaleOptimizer\"");
  ASSERT_NE(at, std::string::npos) << r.out;
  const json wrapper = json::parse(r.out.substr(at, r.out.find('\n', at) - at));
  EXPECT_EQ(make_optimizer(wrapper, "optimizer")->keras_class_name(), "LossScaleOptimizer");

  r = run_command(cli() + " optimizers --frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = run_command(cli() + " optimizers extra-argument");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("extra-argument"), std::string::npos) << r.err;
}

json options_schema() {
  return json::parse(R"({"type": "object", "properties": {
      "patience": {"type": "integer", "minimum": 0, "default": 0},
      "mode": {"type": "string", "enum": ["min", "max"], "default": "min"},
      "monitor": {"type": "string", "minLength": 1}},
    "required": ["monitor"], "additionalProperties": false})");
}

// A stored run config keeps the plugins Tandem ships and no other: the list it keeps them by is
// the plugins installed in the built-in folder, every one (a plugin added and not listed would be
// left out of every checkpoint's stored config).
TEST(PluginsCli, TheShippedPluginsAreTheBuiltInFoldersPlugins) {
  const auto r = run_command("env -u TANDEM_PLUGIN_PATH " + cli() + " plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json listing = json::parse(r.out);
  const std::string builtin = listing.at("search_path").back().get<std::string>();
  std::set<std::string> installed;
  for (const json& p : listing.at("plugins"))
    if (p.at("path").get<std::string>().rfind(builtin, 0) == 0)
      installed.insert(p.at("name").get<std::string>());
  EXPECT_EQ(installed, shipped_plugins()) << listing.dump(1);
}

TEST(CheckOptionsCli, ValidOptionsComeBackWithDefaultsAndWhatEachOptionExpects) {
  const auto r = check_options({{"schema", options_schema()}, {"options", {{"monitor", "loss"}}}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["problems"], json::array());
  EXPECT_EQ(doc["options"], json::parse(R"({"monitor": "loss", "patience": 0, "mode": "min"})"));
  const json expects = {{"patience", "an integer >= 0"},
                        {"mode", "one of min, max"},
                        {"monitor", "a non-empty string"}};
  EXPECT_EQ(doc["expects"], expects);
}

TEST(CheckOptionsCli, EveryBadOptionIsReportedWithItsPathAndExitCode2) {
  auto r = check_options(
      {{"schema", options_schema()}, {"options", {{"patience", "abc"}, {"mood", "max"}}}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["ok"], false);
  EXPECT_TRUE(doc["options"].is_null());
  const json expected = json::array(
      {{{"option", "mood"},
        {"path", "mood"},
        {"message", "unknown option (known: mode, monitor, patience)"}},
       {{"option", "patience"},
        {"path", "patience"},
        {"message", "expected an integer >= 0, got \"abc\""}},
       {{"option", "monitor"}, {"path", "monitor"}, {"message", "required option is missing"}}});
  EXPECT_EQ(doc["problems"], expected);

  // The same as text, one line per problem.
  r = check_options({{"schema", options_schema()}, {"options", {{"patience", -1}}}}, "");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out,
            "patience: expected an integer >= 0, got -1\nmonitor: required option is missing\n");
}

TEST(CheckOptionsCli, ABadRequestIsExitCode2WithAClearMessage) {
  auto r = run_command("printf 'not json' | " + cli() + " check-options --json");
  EXPECT_EQ(r.exit_code, 2);
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["ok"], false);
  EXPECT_NE(doc["error"].get<std::string>().find("not valid JSON"), std::string::npos) << r.out;

  r = check_options({{"schema", {{"type", "object"}, {"pattern", "x"}}}});
  EXPECT_EQ(r.exit_code, 2);
  doc = json::parse(r.out);
  EXPECT_NE(doc["error"].get<std::string>().find("schema keyword 'pattern' is not supported"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(doc["path"], "schema");

  r = check_options({{"options", json::object()}}, "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected {\"schema\""), std::string::npos) << r.err;

  r = run_command(cli() + " check-options --json --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;

  // Defaults of ten objects, each with such a default, seven levels down: 10^7 values from a
  // 1 KB request (it grew to gigabytes). Refused within a bound.
  const json level = test::defaults_growing_tenfold(7);
  r = run_command("ulimit -v " + std::string(test::kSanitizer ? "unlimited" : "1500000") +
                  " && printf %s " + quoted(json{{"schema", level}}.dump()) + " | " + cli() +
                  " check-options - --json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.out.find("hold more than 1000000 values"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
