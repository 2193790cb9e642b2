#include "train/rank_agreement.hpp"

#include "data/dataset.hpp"
#include "parallel/world.hpp"
#include "tandem/error.hpp"

namespace tandem {

using nlohmann::json;

namespace {

// A JSON pointer's tokens after `prefix` as a config path: "/config/optimizer/config/beta_1" ->
// "optimizer.config.beta_1"; array indices in brackets ("model.config.layers[1].config").
std::string config_path_of(const std::string& pointer, const std::string& prefix = "/config/") {
  std::string path;
  for (std::size_t at = prefix.size(); at <= pointer.size();) {
    const std::size_t slash = std::min(pointer.find('/', at), pointer.size());
    const std::string token = pointer.substr(at, slash - at);
    const bool index = !token.empty() && token.find_first_not_of("0123456789") == std::string::npos;
    path += index ? "[" + token + "]" : (path.empty() ? "" : ".") + token;
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

json same_run_settings(json resolved) {
  for (const char* own : {"verbose", "callbacks", "name"}) resolved.erase(own);
  if (resolved.contains("data")) resolved["data"] = data_without_paths(resolved["data"]);
  return resolved;
}

std::vector<std::string> changes_since_checkpoint(const json& saved, const json& resolved) {
  json before = same_run_settings(saved), after = same_run_settings(resolved);
  for (json* side : {&before, &after}) {
    for (const char* free : {"epochs", "devices", "batch_size_per_replica"}) side->erase(free);
    const json::json_pointer rate("/optimizer/config/learning_rate");
    if (side->contains(rate)) side->at(rate) = nullptr;
  }
  std::vector<std::string> changes;
  for (const auto& op : json::diff(before, after)) {
    const std::string pointer = op.at("path").get<std::string>();
    changes.push_back(config_path_of(pointer, "/") + ": " + value_at(before, pointer) +
                      " before, " + value_at(after, pointer) + " now");
  }
  return changes;
}

json rank_fingerprint(const json& resolved, const std::vector<const Dataset*>& data,
                      const json& resume_position) {
  json config = same_run_settings(resolved);
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
