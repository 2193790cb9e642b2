// Atomic file replacement: temporary file, fsync, rename, fsync of the folder (atomic_file.hpp).
#include "tandem/atomic_file.hpp"

#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "io/file_system.hpp"
#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const fs::path& target) {
  return target.parent_path().empty() ? fs::path(".") : target.parent_path();
}

// ".<name>.tmp-<pid>-<n>": unique in this process by the counter, across processes by the pid.
fs::path temp_name(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "." + std::string.
  std::string name = ".";
  name.append(target.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
  name.append("-").append(std::to_string(counter++));
  return folder_of(target) / name;
}

std::string quoted(const fs::path& path) {
  std::string out = "'";
  out.append(path.string()).append("'");
  return out;
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  if (target_.filename().empty() || target_.filename() == "." || target_.filename() == "..")
    throw RunError("cannot write " + quoted(target_) + ": the path names no file");
  // Renaming a new file over /dev/null would replace the device itself.
  if (const std::string problem = not_a_replaceable_file(target_); !problem.empty())
    throw RunError("cannot write " + quoted(target_) + ": it " + problem +
                   " (the new content is a new file renamed over the old one)");
  // A temporary name left behind by a process that died with the same pid is skipped (O_EXCL).
  FileSystem& disk = FileSystem::current();
  for (int attempt = 0;; ++attempt) {
    temp_ = temp_name(target_);
    const std::error_code error = disk.create_new(temp_, file_);
    if (!error) break;
    if (error != std::errc::file_exists || attempt == 100) {
      temp_.clear();  // nothing of ours to remove
      fail("cannot create a temporary file in " + quoted(folder_of(target_)), error);
    }
  }
}

AtomicFile::~AtomicFile() {
  file_.reset();
  if (!committed_ && !temp_.empty()) FileSystem::current().remove(temp_);
}

void AtomicFile::fail(const std::string& step, std::error_code error) {
  file_.reset();
  if (!temp_.empty()) FileSystem::current().remove(temp_);
  temp_.clear();
  throw RunError("cannot write " + quoted(target_) + ": " + step + ": " + error.message());
}

void AtomicFile::write(std::string_view bytes) {
  if (committed_ || !file_)
    throw std::logic_error("AtomicFile::write after commit or failure: " + target_.string());
  if (const std::error_code error = file_->append(bytes))
    fail("cannot write the temporary file " + quoted(temp_), error);
}

void AtomicFile::commit() {
  if (committed_ || temp_.empty())
    throw std::logic_error("AtomicFile::commit after commit or failure: " + target_.string());
  FileSystem& disk = FileSystem::current();
  if (file_) {
    const std::unique_ptr<WritableFile> file = std::move(file_);
    if (const std::error_code error = file->close())
      fail("cannot close the temporary file " + quoted(temp_), error);
  }
  // Synced by name: whoever wrote the content may have replaced the file we created.
  if (const std::error_code error = disk.sync_file(temp_))
    fail("cannot flush the temporary file " + quoted(temp_) + " to disk", error);
  if (const std::error_code error = disk.rename(temp_, target_))
    fail("cannot rename the temporary file " + quoted(temp_) + " over it", error);
  committed_ = true;

  // The rename is on disk once the folder is: until then a crash may bring back the old file.
  // File systems that cannot flush a folder at all (EINVAL, ENOTSUP) are let pass.
  const fs::path folder = folder_of(target_);
  const std::error_code error = disk.sync_folder(folder);
  if (error && error != std::errc::invalid_argument && error != std::errc::not_supported)
    throw RunError(quoted(target_) + " was written but its folder " + quoted(folder) +
                   " cannot be flushed to disk: " + error.message());
}

void write_file_atomically(const fs::path& target, std::string_view bytes) {
  AtomicFile file(target);
  file.write(bytes);
  file.commit();
}

}  // namespace tandem
