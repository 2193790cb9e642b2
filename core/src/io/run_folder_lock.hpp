// RunFolderLock: one engine per run folder, across processes. `tandem train` holds a POSIX
// record lock (fcntl F_SETLK, write) on <run folder>/.tandem.lock for the whole run; the kernel
// drops it when the process ends in any way (kill -9 included), so a stale file never blocks a
// later run. The file holds the holder's pid as text.
//
// Readers that only want to know whether an engine is running in a folder (tandem-gui, in its own
// code: it links no engine library) test the lock without taking one (fcntl F_GETLK on the file
// opened read-only), so asking never gets in an engine's way; docs/design.md contract 6.
// Thread-compatible; the lock belongs to the process (POSIX record locks do), so the holding
// process must not open and close the lock file elsewhere (that would drop the lock).
#pragma once

#include <filesystem>
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

inline constexpr const char* kRunFolderLockName = ".tandem.lock";

class RunFolderLock {
 public:
  /// Takes the folder's lock (the folder must exist). Throws ConfigError naming --run-dir when
  /// another process holds it (with its pid), RunError when the lock file cannot be made.
  explicit RunFolderLock(const std::filesystem::path& folder);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

/// Removes the temporary files that atomic writers (tandem/atomic_file.hpp: ".<name>.tmp-<pid>-<n>")
/// left in `folder` and its direct subfolders when they died mid-write, those whose pid is no
/// longer a process. Call it holding the folder's lock (no other engine writes there then).
/// Returns how many it removed; a file it cannot remove is left.
int remove_stray_temporaries(const std::filesystem::path& folder);

}  // namespace tandem

TANDEM_INTERNAL_API_END
