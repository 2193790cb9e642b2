// Atomic file replacement: a file that is either its old content or its whole new content, never
// a mixture or a truncated file, also after a crash or a power cut. Tandem writes its checkpoints
// (tandem/checkpoint_file.hpp), the checkpoint index of the checkpoint plugin and `tandem
// predict`'s output through it; plugins may use it for their own files (it is part of the plugin
// SDK).
//
// How: the new content goes to a temporary file in the target's folder (".<name>.tmp-<pid>-<n>",
// hidden, so the same file system and never mistaken for a real file), which is flushed to disk
// (fsync), renamed over the target (atomic on POSIX file systems) and the folder flushed too, so
// that the rename itself survives a crash. On any failure before the rename the temporary file is
// removed and the target is untouched; the error (RunError) names the target, the step that failed
// and the system's reason ("cannot write '/runs/a/checkpoints.json': cannot create a temporary
// file in '/runs/a': Permission denied"). The folder must exist. A target that exists must be a
// regular file or a symbolic link (the rename replaces the link, not what it points to): a
// device, a FIFO, a socket or a folder is refused before anything is written, since the rename
// would replace /dev/null itself.
//
// Two ways in, one commit:
//   - write_file_atomically(path, bytes): the bytes are in memory;
//   - AtomicFile: for content streamed by the caller (write()), or written by a library that wants
//     a file name (open temp_path() with std::ofstream, HDF5, ...; close it before commit()).
//
// Ownership: an AtomicFile owns its temporary file until commit(): destroying it uncommitted
// (an exception on the way) removes the file. Thread-safety: temporary names are unique in the
// process and across processes, so any number of threads and processes may replace files at
// once (concurrent replacements of the same target each land whole; the last rename wins); one
// AtomicFile object is used by one thread at a time.
//
// Every step goes through the engine's file-system seam (core/src/io/file_system.hpp), so that
// tests can fail each write, fsync and rename in turn (docs/reliability.md).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "tandem/export.hpp"

namespace tandem {

class WritableFile;  // the engine's file-system seam: opaque to plugins

class TANDEM_EXPORT AtomicFile {
 public:
  /// Creates an empty temporary file next to `target` (mode 0666 less the umask). Throws RunError
  /// naming `target` when it cannot (a missing or read-only folder, ...) or when `target` is
  /// neither missing, a regular file nor a symbolic link.
  explicit AtomicFile(std::filesystem::path target);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& target() const { return target_; }
  /// Where the new content goes until commit(): write() writes here; a library may write to this
  /// name itself (truncating or replacing the file is fine).
  const std::filesystem::path& temp_path() const { return temp_; }

  /// Appends `bytes` to the temporary file. Throws RunError (the temporary file is then removed
  /// and this object can only be destroyed).
  void write(std::string_view bytes);

  /// Flushes the temporary file to disk, renames it over the target and flushes the folder.
  /// Throws RunError when it cannot: before the rename the temporary file is removed and the
  /// target untouched; if only flushing the folder fails, the target already has the new content
  /// and the message says so ("... was written but ..."). File systems that cannot flush a folder
  /// at all (EINVAL, ENOTSUP) are let pass.
  void commit();

 private:
  /// Removes the temporary file, then throws RunError("cannot write '<target>': <step>: <why>").
  [[noreturn]] void fail(const std::string& step, std::error_code error);

  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::unique_ptr<WritableFile> file_;  // open from construction until commit() or a failure
  bool committed_ = false;
};

/// Replaces `target` with `bytes` atomically: AtomicFile + write() + commit().
TANDEM_EXPORT void write_file_atomically(const std::filesystem::path& target,
                                         std::string_view bytes);

}  // namespace tandem
