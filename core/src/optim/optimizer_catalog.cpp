#include "optim/optimizer_catalog.hpp"

#include "tandem/optimizer.hpp"

namespace tandem {

std::vector<OptimizerCatalogEntry> optimizer_catalog() {
  // The names make_optimizer() accepts (its canonical()): keep the two in step; the unit test
  // tests/core/optimizer_catalog_test.cpp compares this list with make_optimizer()'s own.
  static const std::vector<std::pair<const char*, const char*>> kNames = {
      {"SGD", "sgd"}, {"Adam", "adam"}, {"AdamW", "adamw"}, {"RMSprop", "rmsprop"}};
  std::vector<OptimizerCatalogEntry> out;
  for (const auto& [name, alias] : kNames) {
    auto optimizer = make_optimizer(nlohmann::json(name), "optimizer");
    out.push_back({optimizer->class_name(), {alias}, optimizer->config()});
  }
  return out;
}

}  // namespace tandem
