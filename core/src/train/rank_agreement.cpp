#include "train/rank_agreement.hpp"

#include "data/dataset.hpp"
#include "parallel/world.hpp"
#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

namespace {

// "/config/optimizer/config/learning_rate" -> "optimizer.config.learning_rate".
std::string config_path_of(const std::string& pointer) {
  std::string path;
  for (std::size_t at = std::string("/config/").size(); at <= pointer.size();) {
    const std::size_t slash = std::min(pointer.find('/', at), pointer.size());
    path += (path.empty() ? "" : ".") + pointer.substr(at, slash - at);
    at = slash + 1;
  }
  return path;
}

std::string value_at(const json& doc, const std::string& pointer) {
  const json::json_pointer p(pointer);
  return doc.contains(p) ? doc.at(p).dump() : "absent";
}

}  // namespace

json rank_fingerprint(const json& resolved, const std::vector<const Dataset*>& data,
                      const json& resume_position) {
  json config = resolved;
  for (const char* own : {"data", "verbose", "callbacks", "name"}) config.erase(own);
  json sizes = json::array();
  for (const Dataset* d : data)
    if (d) sizes.push_back({{"samples", d->size()}, {"x", d->x_shape()}, {"y", d->y_shape()}});
  return {{"config", config}, {"data", sizes}, {"resume", resume_position}};
}

void check_ranks_agree(World& world, const json& fingerprint) {
  if (world.size() == 1) return;
  const std::vector<std::string> all = world.all_gather_bytes(fingerprint.dump());
  const json first = json::parse(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    const json other = json::parse(all[r]);
    const json patch = json::diff(first, other);
    if (patch.empty()) continue;
    const std::string pointer = patch[0].at("path").get<std::string>();
    const std::string ranks = "rank " + std::to_string(r) + " of the " +
                              std::to_string(all.size()) + " was given another run than rank 0";
    const std::string values = " is " + value_at(first, pointer) + " on rank 0 and " +
                               value_at(other, pointer) + " on rank " + std::to_string(r);
    const std::string fix =
        ": every rank must get the same config, data and checkpoint (check the per-host copies)";
    if (pointer.rfind("/config/", 0) == 0)
      throw ConfigError(config_path_of(pointer), ranks + ": it" + values + fix);
    throw DataError(ranks + ": " +
                    (pointer.rfind("/data", 0) == 0 ? "its data (" : "its resume (") + pointer +
                    ")" + values + fix);
  }
}

}  // namespace tandem
