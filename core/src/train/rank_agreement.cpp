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

// The data section without what names files, which a host may keep elsewhere: `path` and
// `list` of every spec, and the files `x` and `y` are for the npy and idx types. The rest (the
// datasets named inside a file, weights, shuffle, scale, mixup...) is the same run's on every rank.
json data_without_paths(json data) {
  if (!data.is_object()) return data;
  for (auto& [key, spec] : data.items()) {
    if (!spec.is_object()) continue;
    spec.erase("path");
    spec.erase("list");
    const json type = spec.value("type", json());
    if (type == "npy" || type == "idx") {
      spec.erase("x");
      spec.erase("y");
    }
  }
  return data;
}

}  // namespace

json rank_fingerprint(const json& resolved, const std::vector<const Dataset*>& data,
                      const json& resume_position) {
  json config = resolved;
  for (const char* own : {"verbose", "callbacks", "name"}) config.erase(own);
  if (config.contains("data")) config["data"] = data_without_paths(config["data"]);
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
