#include "checkpoint/checkpoint_index.hpp"

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tandem/atomic_file.hpp"

namespace tandem::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::mutex& index_mutex() {
  static std::mutex m;
  return m;
}

std::vector<json> read_locked(const fs::path& dir) {
  const fs::path path = dir / kIndexFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("checkpoints") || !doc["checkpoints"].is_array())
    throw std::runtime_error(path.string() +
                             " is not a checkpoint index (no \"checkpoints\" list)");
  std::vector<json> out;
  for (const auto& e : doc["checkpoints"])
    if (e.is_object() && e.contains("path") && e["path"].is_string()) out.push_back(e);
  return out;
}

}  // namespace

std::vector<json> read_index(const fs::path& dir) {
  std::lock_guard lock(index_mutex());
  return read_locked(dir);
}

void update_index(const fs::path& dir, const std::vector<json>& add,
                  const std::vector<std::string>& remove) {
  std::lock_guard lock(index_mutex());
  std::vector<json> old;
  try {
    old = read_locked(dir);
  } catch (const std::runtime_error&) {
    // A damaged index (written by hand?) is replaced by one listing what this run knows.
  }
  std::set<std::string> drop(remove.begin(), remove.end());
  for (const auto& e : add) drop.insert(e.at("path").get<std::string>());
  json list = json::array();
  for (const auto& e : old) {
    const std::string path = e["path"].get<std::string>();
    // "file" (relative to the folder) survives moving the run folder; "path" is absolute.
    const fs::path on_disk = e.contains("file") && e["file"].is_string()
                                 ? dir / e["file"].get<std::string>()
                                 : fs::path(path);
    std::error_code ec;
    if (drop.count(path) || !fs::exists(on_disk, ec)) continue;
    list.push_back(e);
  }
  if (add.empty() && list.size() == old.size()) return;  // nothing changes
  for (const auto& e : add) list.push_back(e);
  const json doc = {{"format_version", kIndexFormatVersion}, {"checkpoints", list}};
  // Temporary file, fsync, rename, fsync of the folder (RunError naming the file on failure).
  write_file_atomically(dir / kIndexFile, doc.dump(2) + "\n");
}

}  // namespace tandem::checkpoint
