// The optimizer listing (`tandem optimizers`, tandem-gui's choice) against make_optimizer() itself.
#include "optim/optimizer_catalog.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tandem/error.hpp"
#include "optim/optimizer.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

TEST(OptimizerCatalog, ListsExactlyTheOptimizersMakeOptimizerKnows) {
  // make_optimizer names what it knows when it is given anything else.
  std::string message;
  try {
    make_optimizer(json("no-such-optimizer"), "optimizer");
  } catch (const ConfigError& e) {
    message = e.what();
  }
  std::smatch known;
  ASSERT_TRUE(std::regex_search(message, known, std::regex(R"(\(known: ([^)]*)\))"))) << message;
  std::set<std::string> expected;
  const std::string list = known[1];
  for (std::size_t begin = 0; begin <= list.size();) {
    const std::size_t end = std::min(list.find(", ", begin), list.size());
    expected.insert(list.substr(begin, end - begin));
    begin = end + 2;
  }
  std::set<std::string> listed;
  for (const auto& entry : optimizer_catalog()) listed.insert(entry.class_name);
  EXPECT_EQ(listed, expected);
}

TEST(OptimizerCatalog, EveryNameAndAliasBuildsThatOptimizerWithTheListedDefaults) {
  const auto catalog = optimizer_catalog();
  ASSERT_FALSE(catalog.empty());
  for (const auto& entry : catalog) {
    SCOPED_TRACE(entry.class_name);
    EXPECT_EQ(make_optimizer(json(entry.class_name), "optimizer")->class_name(), entry.class_name);
    for (const auto& alias : entry.aliases) {
      auto optimizer = make_optimizer(json(alias), "optimizer");
      EXPECT_EQ(optimizer->class_name(), entry.class_name);
      EXPECT_EQ(optimizer->config(), entry.config);
    }
    ASSERT_TRUE(entry.config.contains("learning_rate"));
    auto by_class = make_optimizer(json{{"class_name", entry.class_name}}, "optimizer");
    EXPECT_DOUBLE_EQ(by_class->learning_rate(), entry.config["learning_rate"].get<double>());
  }
  // The order users are offered them in; AdamW differs from Adam by its weight decay.
  ASSERT_EQ(catalog.size(), 9u);  // SGD, Adam, AdamW, RMSprop, then Adagrad ... Lion
  EXPECT_EQ(catalog[0].class_name, "SGD");
  EXPECT_DOUBLE_EQ(catalog[0].config["learning_rate"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(catalog[2].config["weight_decay"].get<double>(), 0.004);
}

}  // namespace
}  // namespace tandem
