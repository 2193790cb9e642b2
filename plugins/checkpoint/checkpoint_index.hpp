// The checkpoint index: <dir>/checkpoints.json lists every checkpoint the checkpoint plugin keeps
// in <dir>, oldest first (docs/checkpoint-format.md "The checkpoint index"). The GUI's checkpoint
// history and `tandem train --resume RUN_DIR` read it.
//
// The file is rewritten atomically (tandem/atomic_file.hpp: temporary file, fsync, rename, fsync
// of the folder) after the checkpoint files it lists are on disk, before files it no longer lists
// are deleted, and before a listed file is written again (its entry then moves to the
// "rewriting" list: the file is whole, holding that entry's checkpoint or the next save's), so at
// any moment every entry of "checkpoints" names a whole, readable checkpoint holding what the
// entry says. Updates are read-modify-write under a process-wide mutex, so several checkpoint
// callbacks may share a folder.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::checkpoint {

inline constexpr const char* kIndexFile = "checkpoints.json";
inline constexpr int kIndexFormatVersion = 1;

/// The entries of <dir>/checkpoints.json; empty when the file does not exist. Throws
/// std::runtime_error naming the file when it exists but is not a valid index.
std::vector<nlohmann::json> read_index(const std::filesystem::path& dir);

/// Moves the entries of `paths` (files about to be written again) from "checkpoints" to
/// "rewriting". Throws as update_index.
void mark_rewriting(const std::filesystem::path& dir, const std::vector<std::string>& paths);

/// Rewrites <dir>/checkpoints.json: keeps the entries already there (in either list) except those
/// whose "path" is in `remove` or is the path of an entry in `add` (a file written again), and
/// those whose file is gone; then appends `add` to "checkpoints". Does not touch the file when
/// nothing changes. Throws RunError (a std::runtime_error) naming the file on I/O failure (the
/// previous index is untouched then).
void update_index(const std::filesystem::path& dir, const std::vector<nlohmann::json>& add,
                  const std::vector<std::string>& remove);

}  // namespace tandem::checkpoint
