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

// The index's two lists: the checkpoints, and the entries of files being written again.
struct Index {
  std::vector<json> checkpoints, rewriting;
};

std::vector<json> entries_of(const json& doc, const char* key) {
  std::vector<json> out;
  if (doc.contains(key) && doc[key].is_array())
    for (const auto& e : doc[key])
      if (e.is_object() && e.contains("path") && e["path"].is_string()) out.push_back(e);
  return out;
}

Index read_locked(const fs::path& dir) {
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
  return {entries_of(doc, "checkpoints"), entries_of(doc, "rewriting")};
}

// The file an entry names: "file" (relative to the folder, which survives moving the run
// folder), else its absolute "path".
fs::path file_of(const fs::path& dir, const json& e) {
  return e.contains("file") && e["file"].is_string() ? dir / e["file"].get<std::string>()
                                                     : fs::path(e["path"].get<std::string>());
}

// Read-modify-write of <dir>'s index under the process-wide lock: `change` edits the lists;
// entries whose files are gone are dropped; the file is rewritten only when something changed.
template <class F>
void modify_index(const fs::path& dir, F change) {
  std::lock_guard lock(index_mutex());
  Index old;
  try {
    old = read_locked(dir);
  } catch (const std::runtime_error&) {
    // A damaged index (written by hand?) is replaced by one listing what this run knows.
  }
  Index index = old;
  change(index);
  for (auto* list : {&index.checkpoints, &index.rewriting})
    std::erase_if(*list, [&](const json& e) {
      std::error_code ec;
      return !fs::exists(file_of(dir, e), ec);
    });
  if (index.checkpoints == old.checkpoints && index.rewriting == old.rewriting) return;
  json doc = {{"format_version", kIndexFormatVersion}, {"checkpoints", index.checkpoints}};
  if (!index.rewriting.empty()) doc["rewriting"] = index.rewriting;
  // Temporary file, fsync, rename, fsync of the folder (RunError naming the file on failure).
  write_file_atomically(dir / kIndexFile, doc.dump(2) + "\n");
}

bool names_one_of(const json& e, const std::set<std::string>& paths) {
  return paths.count(e["path"].get<std::string>()) > 0;
}

}  // namespace

std::vector<json> read_index(const fs::path& dir) {
  std::lock_guard lock(index_mutex());
  return read_locked(dir).checkpoints;
}

void mark_rewriting(const fs::path& dir, const std::vector<std::string>& paths) {
  const std::set<std::string> moving(paths.begin(), paths.end());
  modify_index(dir, [&](Index& index) {
    for (const auto& e : index.checkpoints)
      if (names_one_of(e, moving)) index.rewriting.push_back(e);
    std::erase_if(index.checkpoints, [&](const json& e) { return names_one_of(e, moving); });
  });
}

void update_index(const fs::path& dir, const std::vector<json>& add,
                  const std::vector<std::string>& remove) {
  std::set<std::string> drop(remove.begin(), remove.end());
  for (const auto& e : add) drop.insert(e.at("path").get<std::string>());
  modify_index(dir, [&](Index& index) {
    for (auto* list : {&index.checkpoints, &index.rewriting})
      std::erase_if(*list, [&](const json& e) { return names_one_of(e, drop); });
    for (const auto& e : add) index.checkpoints.push_back(e);
  });
}

}  // namespace tandem::checkpoint
