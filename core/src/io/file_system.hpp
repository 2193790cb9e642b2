// FileSystem: the seam through which the engine's durable writes reach the disk — checkpoints and
// every other file replaced with tandem/atomic_file.hpp (checkpoint index, config.json, exported
// models, predictions) and the appended event stream. LevelDB's `Env` is the model: production
// code asks `FileSystem::current()` and gets the POSIX implementation; a test installs its own
// (ScopedFileSystem) to fail the n-th write, fsync or rename and check what the engine does then
// (tests/plugins/write_faults_test.cpp: the previous checkpoint stays loadable, the run ends with
// an error that names the file).
//
// Every operation reports a failure as a std::error_code (an errno value in the system category),
// never by throwing: the callers turn it into a RunError that names the file and the step.
//
// Ownership and threads: the POSIX file system is a process-wide singleton that lives until exit.
// A ScopedFileSystem borrows the object it installs, which must outlive the scope. The operations
// may be called from any thread; installing or removing a file system is not synchronised with
// them, so do it while nothing writes (before and after a run). A WritableFile is used by one
// thread at a time; destroying it closes the file.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// An open file that bytes are appended to.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  /// Writes all of `bytes` at the end (retrying short writes and EINTR).
  [[nodiscard]] virtual std::error_code append(std::string_view bytes) = 0;
  /// Flushes the file's content to disk (fsync).
  [[nodiscard]] virtual std::error_code sync() = 0;
  /// Closes the file; later calls fail with EBADF. The destructor closes a file left open,
  /// ignoring the result.
  [[nodiscard]] virtual std::error_code close() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  /// Creates `path`, which must not exist (O_EXCL), for writing, with mode 0666 less the umask.
  [[nodiscard]] virtual std::error_code create_new(const std::filesystem::path& path,
                                                   std::unique_ptr<WritableFile>& file) = 0;
  /// Opens `path` for appending, creating it (mode 0644) when missing.
  [[nodiscard]] virtual std::error_code open_append(const std::filesystem::path& path,
                                                    std::unique_ptr<WritableFile>& file) = 0;
  /// Flushes the content of the file at `path` to disk (opened by name: a library may have
  /// written it).
  [[nodiscard]] virtual std::error_code sync_file(const std::filesystem::path& path) = 0;
  /// Renames `from` over `to` (atomic on POSIX file systems).
  [[nodiscard]] virtual std::error_code rename(const std::filesystem::path& from,
                                               const std::filesystem::path& to) = 0;
  /// Flushes `folder`'s entries (the names created and renamed in it) to disk.
  [[nodiscard]] virtual std::error_code sync_folder(const std::filesystem::path& folder) = 0;
  /// Removes the file at `path`; a missing file is not an error.
  virtual void remove(const std::filesystem::path& path) noexcept = 0;

  /// The file system in use: the POSIX one unless a ScopedFileSystem installed another.
  static FileSystem& current();
  /// The real one, for wrappers that pass most calls through.
  static FileSystem& posix();
};

/// Installs `fs` as FileSystem::current() for its lifetime and puts the previous one back.
class ScopedFileSystem {
 public:
  explicit ScopedFileSystem(FileSystem& fs);
  ~ScopedFileSystem();
  ScopedFileSystem(const ScopedFileSystem&) = delete;
  ScopedFileSystem& operator=(const ScopedFileSystem&) = delete;

 private:
  FileSystem* previous_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
