// The one JSON Schema validator: validate_options() (run configs), option_problems() and
// describe_schema() (`tandem check-options`, which tandem-gui's option forms ask).
#include "plugin/options_schema.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

json test_schema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "count": {"type": "integer", "minimum": 0, "default": 0},
      "rate": {"type": "number", "exclusiveMinimum": 0},
      "mode": {"type": "string", "enum": ["auto", "min", "max"], "default": "auto"},
      "flag": {"type": "boolean", "default": false},
      "freq": {"type": ["string", "integer"], "minimum": 1, "default": "epoch"},
      "threshold": {"type": ["number", "null"], "default": null},
      "name": {"type": "string", "minLength": 1},
      "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}}
    },
    "required": ["name"],
    "additionalProperties": false
  })");
}

std::string error_of(const json& options) {
  try {
    validate_options(test_schema(), options, "callbacks[0].options");
  } catch (const ConfigError& e) {
    return e.path() + " | " + e.what();
  }
  return "(valid)";
}

std::vector<std::string> problems_of(const json& schema, const json& options) {
  std::vector<std::string> out;
  for (const auto& p : option_problems(schema, options))
    out.push_back(p.option + " | " + p.path + ": " + p.message);
  return out;
}

TEST(OptionsSchema, DescribesWhatASchemaAcceptsInWords) {
  const json props = test_schema()["properties"];
  EXPECT_EQ(describe_schema(props["count"]), "an integer >= 0");
  EXPECT_EQ(describe_schema(props["rate"]), "a number > 0");
  EXPECT_EQ(describe_schema(props["mode"]), "one of auto, min, max");
  EXPECT_EQ(describe_schema(props["flag"]), "true or false");
  EXPECT_EQ(describe_schema(props["freq"]), "a string or an integer >= 1");
  EXPECT_EQ(describe_schema(props["threshold"]), "a number or null");
  EXPECT_EQ(describe_schema(props["name"]), "a non-empty string");
  EXPECT_EQ(describe_schema(props["sizes"]), "a JSON list");
  EXPECT_EQ(describe_schema(json::object()), "a JSON value");
  EXPECT_EQ(describe_schema({{"type", "number"}, {"minimum", 0.5}, {"maximum", 2.0}}),
            "a number >= 0.5 and <= 2");
  EXPECT_EQ(describe_schema({{"type", "string"}, {"minLength", 3}}),
            "a string of at least 3 characters");
  EXPECT_EQ(describe_schema({{"enum", {0, 1, ""}}}), "one of 0, 1, \"\"");
  EXPECT_EQ(describe_schema({{"type", {"integer", "string", "null"}}}),
            "an integer, a string or null");
}

TEST(OptionsSchema, TheFirstProblemIsAConfigErrorAtItsJsonPath) {
  EXPECT_EQ(error_of({{"name", "x"}, {"count", "abc"}}),
            "callbacks[0].options.count | config error at 'callbacks[0].options.count': "
            "expected an integer >= 0, got \"abc\"");
  EXPECT_EQ(error_of({{"name", "x"}, {"count", -1}}),
            "callbacks[0].options.count | config error at 'callbacks[0].options.count': "
            "expected an integer >= 0, got -1");
  EXPECT_EQ(error_of({{"name", "x"}, {"count", 1.5}}).substr(0, 30),
            "callbacks[0].options.count | c");
  EXPECT_NE(error_of({{"name", "x"}, {"rate", 0}}).find("expected a number > 0, got 0"),
            std::string::npos);
  EXPECT_NE(error_of({{"name", "x"}, {"mode", "fast"}})
                .find("expected one of auto, min, max, got \"fast\""),
            std::string::npos);
  EXPECT_NE(error_of({{"name", "x"}, {"sizes", {1, 0}}})
                .find("callbacks[0].options.sizes[1] | config error at "
                      "'callbacks[0].options.sizes[1]': expected an integer >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of({{"name", "x"}, {"bogus", 1}})
                .find("'callbacks[0].options.bogus': unknown option (known: count, flag, freq, "
                      "mode, name, rate, sizes, threshold)"),
            std::string::npos);
  EXPECT_NE(
      error_of(json::object()).find("'callbacks[0].options.name': required option is missing"),
      std::string::npos);
  EXPECT_NE(error_of({{"name", ""}}).find("expected a non-empty string, got \"\""),
            std::string::npos);
  // minLength counts characters, not bytes.
  EXPECT_EQ(error_of({{"name", "\xc3\xa9"}}), "(valid)");
  EXPECT_NE(error_of(json::array({1})).find("expected a JSON object"), std::string::npos);
}

TEST(OptionsSchema, ValidOptionsComeBackWithTheDefaults) {
  const json out = validate_options(test_schema(), {{"name", "x"}, {"count", 2}}, "options");
  EXPECT_EQ(out, json::parse(R"({"name": "x", "count": 2, "mode": "auto", "flag": false,
                                 "freq": "epoch", "threshold": null})"));
  EXPECT_TRUE(option_problems(test_schema(), {{"name", "x"}, {"count", 2}}).empty());
  EXPECT_TRUE(option_problems(test_schema(), {{"name", "x"}, {"count", 4.0}}).empty());
}

// Found by an audit of the plugin SDK: create() is promised options of the declared types.
TEST(OptionsSchema, IntegersComeAsIntegersDefaultsFitAndNestedDefaultsAreFilled) {
  // 4.0 is an integer (JSON Schema) and comes back as one; 1e19 is beyond std::int64_t.
  const json out = validate_options(test_schema(), {{"name", "x"}, {"count", 4.0}}, "options");
  EXPECT_TRUE(out["count"].is_number_integer()) << out.dump();
  EXPECT_EQ(out["count"].get<std::int64_t>(), 4);
  EXPECT_NE(error_of({{"name", "x"}, {"count", 1e19}}).find("callbacks[0].options.count |"),
            std::string::npos);
  // A default inside an object option that takes its own default is filled in too.
  const json nested = json::parse(R"({"type": "object", "properties": {"sub": {"type": "object",
      "properties": {"k": {"type": "integer", "default": 7}}, "default": {}}}})");
  EXPECT_EQ(validate_options(nested, json::object(), "options"),
            json::parse(R"({"sub": {"k": 7}})"));
  // A default the schema refuses is the plugin's error, found when it loads.
  try {
    check_schema(json::parse(R"({"type": "object", "properties": {"n": {"type": "integer",
        "default": "abc"}}})"),
                 "options schema");
    ADD_FAILURE() << "a default of the wrong type accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "options schema.properties.n.default");
    EXPECT_NE(std::string(e.what()).find("the default \"abc\" does not fit the schema"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_schema(test_schema(), "options schema"));
  // A plugin's schema as a whole must take an object (the options are one): a schema of
  // another type loaded and listed as fine, then refused every config.
  for (const char* type : {R"("array")", R"(["string", "null"])"}) try {
      check_options_schema(json::parse(std::string(R"({"type": )") + type + "}"), "options schema");
      ADD_FAILURE() << type;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "options schema.type");
      EXPECT_NE(std::string(e.what()).find("the schema's type must be \"object\""),
                std::string::npos)
          << e.what();
    }
  EXPECT_NO_THROW(check_options_schema(test_schema(), "options schema"));
  EXPECT_NO_THROW(check_options_schema(json::parse(R"({"type": ["object", "null"]})"), "s"));
  EXPECT_NO_THROW(check_options_schema(json::object(), "s"));
}

TEST(OptionsSchema, ProblemsListEveryBadOptionOnceThenTheMissingOnes) {
  EXPECT_EQ(problems_of(test_schema(), {{"count", "abc"},
                                        {"rate", 0},
                                        {"freq", 0},
                                        {"sizes", {1, 0, -1}},
                                        {"threshold", "abc"},
                                        {"bogus", true},
                                        {"flag", true}}),
            (std::vector<std::string>{
                "bogus | bogus: unknown option (known: count, flag, freq, mode, name, rate, "
                "sizes, threshold)",
                "count | count: expected an integer >= 0, got \"abc\"",
                "freq | freq: expected a string or an integer >= 1, got 0",
                "rate | rate: expected a number > 0, got 0",
                "sizes | sizes[1]: expected an integer >= 1, got 0",
                "threshold | threshold: expected a number or null, got \"abc\"",
                "name | name: required option is missing",
            }));
  // Not an object at all: one problem about the whole.
  EXPECT_EQ(problems_of(test_schema(), json::array({1})),
            std::vector<std::string>{" | : expected a JSON object, got [1]"});
  // Without "additionalProperties": false, other keys are fine; with a schema, they are checked.
  json open = test_schema();
  open.erase("additionalProperties");
  EXPECT_TRUE(option_problems(open, {{"name", "x"}, {"other", 1}}).empty());
  open["additionalProperties"] = {{"type", "string"}};
  EXPECT_EQ(problems_of(open, {{"name", "x"}, {"other", 1}}),
            std::vector<std::string>{"other | other: expected a string, got 1"});
}

TEST(OptionsSchema, TheFirstListedProblemIsTheOneValidateOptionsThrows) {
  const std::vector<json> cases = {
      {{"name", "x"}, {"count", "abc"}, {"rate", 0}},
      {{"rate", -1}},
      {{"zzz", 1}, {"name", 5}},
      {{"name", "x"}, {"sizes", {0}}},
  };
  for (const json& options : cases) {
    SCOPED_TRACE(options.dump());
    const auto problems = option_problems(test_schema(), options);
    ASSERT_FALSE(problems.empty());
    try {
      validate_options(test_schema(), options, "");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), problems.front().path);
      EXPECT_EQ(std::string(e.what()),
                "config error at '" + problems.front().path + "': " + problems.front().message);
    }
  }
}

// Paths are spelled out only for the message (a check visits up to a million values): the whole
// chain of members and list items, below the checked value's own path and in a default's.
TEST(OptionsSchema, AValueDeepDownIsNamedByItsWholePath) {
  const json schema = json::parse(R"({"type": "object", "properties": {"rows": {"type": "array",
      "items": {"type": "object", "properties": {"w": {"type": "array",
        "items": {"type": "number", "minimum": 0}}}}}}})");
  try {
    validate_options(schema, json::parse(R"({"rows": [{"w": [1]}, {"w": [2, -3]}]})"),
                     "cb.options");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "cb.options.rows[1].w[1]");
    EXPECT_NE(std::string(e.what()).find("expected a number >= 0, got -3"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(problems_of(schema, json::parse(R"({"rows": [{"w": [-1]}]})")),
            std::vector<std::string>{"rows | rows[0].w[0]: expected a number >= 0, got -1"});
  // Defaults of ten objects, each with such a default, seven levels down: refused at the
  // millionth value, at the path of the value that went over.
  const json level = test::defaults_growing_tenfold(7);
  try {
    check_schema(level, "s");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "s.properties.p.items.properties.p.default");  // the 10^6 values
    EXPECT_TRUE(std::regex_search(
        std::string(e.what()), std::regex(R"(does not fit the schema at (\[\d\]\.p){5}\[\d\]:)")))
        << e.what();
    EXPECT_NE(std::string(e.what()).find("hold more than 1000000 values"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
