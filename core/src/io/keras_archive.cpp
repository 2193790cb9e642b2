#include "io/keras_archive.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>

#include "io/zip_archive.hpp"
#include "tandem/error.hpp"
#include "util/json_text.hpp"
#include "util/regular_file.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKind = "a Keras .keras file";
constexpr const char* kConfig = "config.json";
constexpr const char* kMetadata = "metadata.json";
constexpr const char* kWeights = "model.weights.h5";
constexpr const char* kNpzWeights = "model.weights.npz";

// The members of an archive: zip members, or a folder's files.
class Members {
 public:
  explicit Members(fs::path path) : path_(std::move(path)), folder_(fs::is_directory(path_)) {}

  std::optional<std::vector<std::uint8_t>> read(const std::string& name) const {
    if (folder_) {
      const fs::path file = path_ / name;
      std::error_code ec;
      if (!fs::exists(file, ec)) return std::nullopt;
      // A FIFO's open would block, a device's read never end.
      if (const std::string why = not_a_regular_file(file); !why.empty())
        throw DataError("cannot read '" + file.string() + "': it " + why);
      std::ifstream in(file, std::ios::binary);
      if (!in) throw DataError("cannot read '" + file.string() + "'");
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                      std::istreambuf_iterator<char>());
      if (in.bad()) throw DataError("cannot read '" + file.string() + "'");
      return bytes;
    }
    std::optional<ZipMember> member = find_zip_member(path_.string(), kKind, name);
    if (!member) return std::nullopt;
    return zip_member_bytes(path_.string(), std::move(*member));
  }

  bool has(const std::string& name) const {
    if (folder_) return fs::exists(path_ / name);
    const auto names = zip_member_names(path_.string(), kKind);
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  std::string listed() const {
    std::vector<std::string> names;
    if (folder_)
      for (const auto& entry : fs::directory_iterator(path_))
        names.push_back(entry.path().filename().string());
    else
      names = zip_member_names(path_.string(), kKind);
    std::string text;
    for (std::size_t i = 0; i < names.size() && i < 8; ++i)
      text += (text.empty() ? "'" : ", '") + names[i] + "'";
    if (names.size() > 8) text += ", ...";
    return text.empty() ? "none" : text;
  }

 private:
  fs::path path_;
  bool folder_;
};

[[noreturn]] void refuse(const fs::path& path, const std::string& why) {
  throw DataError("cannot read '" + path.string() + "': " + why);
}

nlohmann::json json_object(const fs::path& path, const std::string& name,
                           const std::vector<std::uint8_t>& bytes) {
  nlohmann::json value;
  try {
    value = parse_json_text(std::string(bytes.begin(), bytes.end()));
  } catch (const JsonTextRefused& e) {
    refuse(path, "its " + name + " is " + e.what());
  } catch (const nlohmann::json::exception& e) {
    refuse(path, "its " + name + " is not valid JSON: " + e.what());
  }
  if (!value.is_object())
    refuse(path,
           "its " + name + " is a JSON " + std::string(value.type_name()) + ", not an object");
  return value;
}

// Keras saves a .keras file's config under an object-sharing scope, which marks each object it
// serializes more than once — every layer's dtype policy is the one global policy — with
// "shared_object_id". It says nothing about the model; without it the config is to_json()'s.
void drop_sharing_ids(nlohmann::json& value) {
  if (value.is_object()) {
    value.erase("shared_object_id");
    for (auto& [key, item] : value.items()) drop_sharing_ids(item);
  } else if (value.is_array()) {
    for (auto& item : value) drop_sharing_ids(item);
  }
}

}  // namespace

bool is_keras_archive(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(path / kConfig, ec);
  if (!fs::is_regular_file(path, ec)) return false;  // a FIFO's open would block
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof magic) && std::string(magic, sizeof magic) == "PK\x03\x04";
}

KerasArchive read_keras_archive(const fs::path& path, bool with_weights) {
  const Members members(path);
  KerasArchive archive;
  const auto config = members.read(kConfig);
  if (!config)
    refuse(path, "a zip archive, but not a Keras .keras file: it has no config.json (it has " +
                     members.listed() + ")");
  archive.config = json_object(path, kConfig, *config);
  drop_sharing_ids(archive.config);  // depth bounded by parse_json_text
  if (const auto metadata = members.read(kMetadata)) {
    const nlohmann::json m = json_object(path, kMetadata, *metadata);
    if (m.contains("keras_version") && m["keras_version"].is_string())
      archive.keras_version = m["keras_version"].get<std::string>();
  }
  if (!with_weights) return archive;
  auto weights = members.read(kWeights);
  if (!weights) {
    if (members.has(kNpzWeights))
      refuse(path,
             "its weights are in model.weights.npz, Keras' NumPy form (it pickles Python "
             "objects), which Tandem does not read; Keras writes model.weights.h5 by "
             "default");
    refuse(path, "it has no model.weights.h5 (it has " + members.listed() + ")");
  }
  archive.weights = std::move(*weights);
  return archive;
}

}  // namespace tandem
