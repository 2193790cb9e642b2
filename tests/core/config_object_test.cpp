#include "util/config_object.hpp"

#include <gtest/gtest.h>

#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigObject, ReadsTypedValuesAndDefaults) {
  json j = {{"epochs", 5}, {"lr", 0.5}, {"name", "x"}, {"flag", true}};
  ConfigObject c(j, "");
  EXPECT_EQ(c.get_int("epochs"), 5);
  EXPECT_DOUBLE_EQ(c.get_number("lr"), 0.5);
  EXPECT_EQ(c.get_string("name"), "x");
  EXPECT_TRUE(c.get_bool("flag"));
  EXPECT_EQ(c.get_int("missing", 7), 7);
  EXPECT_NO_THROW(c.finish());
}

TEST(ConfigObject, WrongTypeNamesPathAndExpectation) {
  json j = {{"model", {{"units", "ten"}}}};
  ConfigObject root(j, "");
  auto model = root.get_object("model");
  std::string msg = error_of([&] { model.get_int("units"); });
  EXPECT_NE(msg.find("'model.units'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an integer, got a string"), std::string::npos) << msg;
}

TEST(ConfigObject, UnknownKeyIsAnError) {
  json j = {{"epochs", 1}, {"epohcs", 2}};
  ConfigObject c(j, "fit");
  c.get_int("epochs");
  std::string msg = error_of([&] { c.finish(); });
  EXPECT_NE(msg.find("'fit.epohcs'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key"), std::string::npos) << msg;
}

// A null where an optional key is asked about is the key left out (it was "unknown key"), and a
// null where a value is required says it got null, once.
TEST(ConfigObject, ANullIsTheKeyLeftOut) {
  const nlohmann::json v = {{"y", nullptr}, {"path", nullptr}};
  ConfigObject c(v, "data.test");
  EXPECT_FALSE(c.has("y"));
  try {
    c.get_string("path");
    ADD_FAILURE() << "null taken as a string";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'data.test.path': expected a string, got null"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("null null"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(c.finish());
}

TEST(ConfigObject, MissingRequiredKey) {
  json j = json::object();
  ConfigObject c(j, "optimizer.config");
  std::string msg = error_of([&] { c.get_number("learning_rate"); });
  EXPECT_NE(msg.find("'optimizer.config.learning_rate': required key is missing"),
            std::string::npos)
      << msg;
}

TEST(ConfigObject, RangeChecks) {
  json j = {{"rate", 1.5}, {"n", -3}, {"mode", "sideways"}, {"big", 2147483648LL},
            {"most", 2147483647LL}};
  ConfigObject c(j, "x");
  EXPECT_NE(error_of([&] { c.number_in("rate", 0, 0, 1, false, true); }).find("[0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.positive_int("n"); })
                .find("positive integer up to 2147483647, got -3"),
            std::string::npos);
  // A size beyond 2^31 - 1 is refused before any arithmetic can overflow with it.
  EXPECT_NE(error_of([&] { c.positive_int("big"); }).find("got 2147483648"), std::string::npos);
  EXPECT_EQ(c.positive_int("most"), 2147483647);
  EXPECT_NE(error_of([&] {
              c.one_of("mode", "min", {"min", "max"});
            }).find("'sideways'"),
            std::string::npos);
}

TEST(ConfigObject, IntListWithNullBatchDimension) {
  json j = {{"shape", {nullptr, 28, 28}}, {"bad", {1, "a"}}};
  ConfigObject c(j, "layer");
  auto v = c.get_int_list("shape", true);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_FALSE(v[0].has_value());
  EXPECT_EQ(*v[2], 28);
  EXPECT_NE(error_of([&] { c.get_int_list("bad", false); }).find("'layer.bad[1]'"),
            std::string::npos);
}

TEST(ConfigObject, NonObjectRootIsAnError) {
  json j = json::array();
  EXPECT_THROW(ConfigObject(j, "model"), ConfigError);
}

TEST(ConfigObject, IntegersOutOfRangeNameThePath) {
  json j = json::parse(R"({"epochs": 2147483648, "seed": 18446744073709551615, "ok": 7})");
  ConfigObject c(j, "run");
  EXPECT_EQ(c.int_in("ok", 1, 1, 10), 7);
  EXPECT_EQ(c.int_in("absent", 3, 1, 10), 3);
  try {
    c.int_in("epochs", 1, 1, 2147483647);
    ADD_FAILURE() << "2^31 epochs taken";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "run.epochs");
    EXPECT_NE(std::string(e.what()).find("from 1 to 2147483647, got 2147483648"), std::string::npos)
        << e.what();
  }
  // An unsigned value beyond int64 no longer wraps to -1.
  try {
    c.get_int("seed");
    ADD_FAILURE() << "2^64 - 1 taken";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "run.seed");
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
