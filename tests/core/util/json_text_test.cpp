// parse_json_text: Tandem's bound on the nesting of JSON it reads. 512 levels read; one more is
// JsonTooDeep, not a crash, however deep the text goes (100,000 levels); syntax errors stay
// nlohmann's parse_error; and every way a user's JSON comes in — a config file, a --set value —
// turns the bound into a ConfigError naming the place.
#include "util/json_text.hpp"

#include <gtest/gtest.h>

#include "tandem/error.hpp"
#include "test_support.hpp"
#include "train/run_config.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') + "1" +
         std::string(static_cast<std::size_t>(depth), ']');
}

TEST(JsonText, ReadsUpToTheBoundAndRefusesDeeper) {
  const nlohmann::json at_bound = parse_json_text(nested(kMaxJsonDepth));
  const nlohmann::json* inner = &at_bound;
  int depth = 0;
  while (inner->is_array()) {
    inner = &(*inner)[0];
    ++depth;
  }
  EXPECT_EQ(depth, kMaxJsonDepth);
  EXPECT_EQ(*inner, 1);
  EXPECT_THROW(parse_json_text(nested(kMaxJsonDepth + 1)), JsonTooDeep);
  EXPECT_THROW(parse_json_text(nested(100000)), JsonTooDeep);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\": ";
  EXPECT_THROW(parse_json_text(objects), JsonTooDeep);  // refused before the missing ends
  EXPECT_THROW(parse_json_text("{\"a\": [1, }"), nlohmann::json::parse_error);
  EXPECT_EQ(parse_json_text(R"({"a": {"b": [1, {"c": null}]}})")["a"]["b"][1]["c"], nullptr);
}

TEST(JsonText, DeepConfigsAndSetValuesAreConfigErrors) {
  const auto dir = test::scratch_dir("json-depth");
  test::write_text(dir / "deep.json", "{\"model\": " + nested(100000) + "}");
  try {
    load_json_file(dir / "deep.json");
    ADD_FAILURE() << "a config nested 100,000 deep was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nested deeper than 512"), std::string::npos) << e.what();
  }
  nlohmann::json config = nlohmann::json::object();
  try {
    apply_override(config, "model.config=" + nested(100000));
    ADD_FAILURE() << "a --set value nested 100,000 deep was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set model.config"), std::string::npos) << e.what();
  }
  apply_override(config, "model.config=" + nested(3));
  EXPECT_EQ(config["model"]["config"], nlohmann::json::parse(nested(3)));
}

TEST(JsonText, NumbersNoDoubleHoldsAreRefusedNotLeaked) {
  EXPECT_THROW(parse_json_text("{\"learning_rate\": 1e400}"), JsonTextRefused);
  EXPECT_EQ(parse_json_text("1e300").get<double>(), 1e300);
}

// A key given twice in one object is refused (the last value won silently: "epochs": 1, then
// "epochs": 3 trained 3); the same key in different objects is fine.
TEST(JsonText, AKeyGivenTwiceInOneObjectIsRefused) {
  try {
    parse_json_text(R"({"epochs": 1, "model": {"a": 1}, "epochs": 3})");
    ADD_FAILURE() << "a doubled key accepted";
  } catch (const JsonTextRefused& e) {
    EXPECT_NE(std::string(e.what()).find("the key \"epochs\" appears twice in one object"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_json_text(R"([{"x": {"k": 1, "k": 2}}])"), JsonTextRefused);
  EXPECT_EQ(parse_json_text(R"({"k": {"k": 1}, "l": [{"k": 2}, {"k": 3}]})")["l"][1]["k"], 3);
}

TEST(JsonText, FindsTheFirstByteThatIsNotUtf8) {
  EXPECT_EQ(invalid_utf8_at("plain ascii"), std::string::npos);
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(invalid_utf8_at("a\xff"), 1u);             // never in UTF-8
  EXPECT_EQ(invalid_utf8_at("ab\xc3"), 2u);            // cut short
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(invalid_utf8_at("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(invalid_utf8_at("\xe2\x28\xa1"), 0u);      // a bad continuation byte
}

}  // namespace
}  // namespace tandem
