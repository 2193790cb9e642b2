#include "optim/optimizer_catalog.hpp"

#include "optim/optimizer.hpp"

namespace tandem {

std::vector<OptimizerCatalogEntry> optimizer_catalog() {
  std::vector<OptimizerCatalogEntry> out;
  for (const auto& [name, alias] : optimizer_names()) {
    auto optimizer = make_optimizer(nlohmann::json(name), "optimizer");
    out.push_back({optimizer->class_name(), {alias}, optimizer->config()});
  }
  return out;
}

}  // namespace tandem
