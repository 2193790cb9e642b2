// Whether a path names a regular file a reader can take whole: a FIFO blocks its reader until a
// writer comes, a device such as /dev/zero never ends, a folder is no file. Every file Tandem
// reads on a user's word (configs, datasets, checkpoints, option requests) is checked first.
// And whether a path is one a writer may replace: Tandem replaces an output whole, renaming a
// new file over it (tandem/atomic_file.hpp), which would replace a device such as /dev/null
// itself. Stateless; any thread.
#pragma once

#include <filesystem>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// Why `path` cannot be read as a file — "file not found", "is a folder, not a file", "is a
/// FIFO, not a regular file" (or a device, a socket) — or "" for a regular file (a link to one
/// too).
std::string not_a_regular_file(const std::filesystem::path& path);

/// Why a new file must not be renamed over `path` — "is a folder, not a file", "is a device, not
/// a regular file" (or a FIFO, a socket) — or "" when nothing is there, or a regular file, or a
/// symbolic link (the rename replaces the link, never what it points to).
std::string not_a_replaceable_file(const std::filesystem::path& path);

}  // namespace tandem

TANDEM_INTERNAL_API_END
