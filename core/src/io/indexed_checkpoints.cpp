#include "io/indexed_checkpoints.hpp"

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "util/json_text.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// The files one index lists: each entry's "file", a name in the index's folder.
void add_listed(const fs::path& index_file, std::vector<IndexedCheckpoint>& out) {
  std::ifstream in(index_file);
  if (!in) return;
  nlohmann::json index;
  try {
    index = parse_json_text(std::string(std::istreambuf_iterator<char>(in), {}));
  } catch (const std::exception&) {
    return;
  }
  if (!index.is_object()) return;
  for (const char* list : {"checkpoints", "rewriting"}) {
    if (!index.contains(list) || !index[list].is_array()) continue;
    for (const auto& entry : index[list]) {
      if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string()) continue;
      const fs::path name(entry["file"].get<std::string>());
      if (!name.has_filename() || name != name.filename() || name == "." || name == "..") continue;
      const nlohmann::json resumable = entry.value("resumable", nlohmann::json(false));
      out.push_back({index_file, index_file.parent_path() / name,
                     resumable.is_boolean() && resumable.get<bool>()});
    }
  }
}

}  // namespace

std::vector<IndexedCheckpoint> indexed_checkpoints(const fs::path& run_dir) {
  std::vector<IndexedCheckpoint> out;
  std::vector<fs::path> folders{run_dir};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec)) folders.push_back(e.path());  // its own only
  for (const auto& dir : folders) add_listed(dir / "checkpoints.json", out);
  return out;
}

}  // namespace tandem
