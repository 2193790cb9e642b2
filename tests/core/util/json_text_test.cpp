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
namespace {

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

}  // namespace
}  // namespace tandem
