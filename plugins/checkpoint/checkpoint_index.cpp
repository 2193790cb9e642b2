#include "checkpoint/checkpoint_index.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tandem::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::mutex& index_mutex() {
  static std::mutex m;
  return m;
}

std::runtime_error io_error(const fs::path& path, const std::string& what) {
  return std::runtime_error("cannot write the checkpoint index " + path.string() + ": " + what);
}

void write_atomically(const fs::path& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  std::string name = ".";  // a hidden name, as write_checkpoint_file's temporary files
  name += path.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const fs::path tmp = path.parent_path() / name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error(path, std::strerror(errno));
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw io_error(path, std::strerror(err));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw io_error(path, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw io_error(path, std::strerror(err));
  }
  const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
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
  write_atomically(dir / kIndexFile, doc.dump(2) + "\n");
}

}  // namespace tandem::checkpoint
