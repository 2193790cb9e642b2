// make_dataset(): reads a dataset spec strictly (unknown keys are errors) and opens the data.
#include <filesystem>

#include "data/datasets.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace data {

std::string resolve_path(const std::string& base_dir, const std::string& file) {
  const std::filesystem::path p(file);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

std::vector<std::string> name_list(ConfigObject& spec, const std::string& key,
                                   const std::string& what, const std::string& list_hint) {
  const nlohmann::json& v = spec.at(key);
  const std::string path = spec.path_of(key);
  std::vector<std::string> names;
  if (v.is_string()) {
    names.push_back(v.get<std::string>());
    if (names.back().empty()) throw ConfigError(path, "expected a " + what + ", got ''");
  } else if (v.is_array() && !v.empty()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      if (!v[i].is_string()) throw ConfigError(at, "expected a " + what + ", got " + v[i].dump());
      names.push_back(v[i].get<std::string>());
      if (names.back().empty()) throw ConfigError(at, "expected a " + what + ", got ''");
    }
  } else {
    throw ConfigError(
        path, "expected a " + what + ", or a list of them" + list_hint + ", got " + v.dump());
  }
  return names;
}

}  // namespace data

namespace {

std::shared_ptr<Dataset> open_dataset(const nlohmann::json& spec, const std::string& path,
                                      const std::string& base_dir) {
  ConfigObject c(spec, path);
  const std::string type = c.get_string("type");
  if (c.get_bool("cache", false)) {
    nlohmann::json uncached = spec;
    uncached.erase("cache");
    return data::make_cached(open_dataset(uncached, path, base_dir), c.path_of("cache"));
  }
  // Keys are all read and checked before any file is touched.
  if (type == "idx") {
    auto s = data::parse_idx_spec(c, base_dir);
    c.finish();
    return data::open_idx_dataset(s);
  }
  if (type == "hdf5") {
    auto s = data::parse_hdf5_spec(c, base_dir);
    c.finish();
    return data::open_hdf5_dataset(s);
  }
  if (type == "csv") {
    auto s = data::parse_csv_spec(c, base_dir);
    c.finish();
    return data::open_csv_dataset(s);
  }
  if (type == "npy" || type == "npz") {
    auto s = data::parse_npy_spec(c, base_dir, type == "npz");
    c.finish();
    return data::open_npy_dataset(s);
  }
  if (type == "images") {
    auto s = data::parse_images_spec(c, base_dir);
    c.finish();
    return data::open_images_dataset(s);
  }
  if (type == "synthetic") {
    auto s = data::parse_synthetic_spec(c);
    c.finish();
    return data::make_synthetic_dataset(s);
  }
  throw ConfigError(c.path_of("type"),
                    "unknown dataset type '" + type +
                        "'; expected 'idx', 'hdf5', 'npy', 'npz', 'csv', 'images' or 'synthetic'");
}

}  // namespace

std::shared_ptr<Dataset> make_dataset(const nlohmann::json& spec, const std::string& path,
                                      const std::string& base_dir) {
  std::shared_ptr<Dataset> d = open_dataset(spec, path, base_dir);
  // Nothing to train on or to evaluate: a loss of 0.0 would look like a result.
  if (d->size() == 0)
    throw ConfigError(path, d->describe() + ": a dataset needs at least one sample");
  return d;
}

}  // namespace tandem
