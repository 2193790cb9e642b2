// The checkpoint files a run folder's checkpoint indexes list (docs/checkpoint-format.md "The
// checkpoint index"): <run>/checkpoints.json and those of its immediate subfolders
// (<run>/checkpoints/checkpoints.json, the checkpoint plugin's default; not a subfolder that is
// a symbolic link to another folder: --overwrite deletes what they list), both of their lists
// ("checkpoints" and "rewriting"). Read by `tandem train --resume RUN_DIR` (the newest resumable
// one) and by --overwrite (what the old run left). The engine reads the indexes only; the
// checkpoint plugin writes them.
#pragma once

#include <filesystem>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

struct IndexedCheckpoint {
  std::filesystem::path index;  // the checkpoints.json that lists it
  std::filesystem::path file;   // in the index's folder (entries naming other places are skipped)
  bool resumable = false;       // the entry says it holds a training state
};

/// Every file the indexes of `run_dir` list, index by index. An index that cannot be read or
/// parsed is skipped (it is replaced atomically, so a damaged one was not written by Tandem).
std::vector<IndexedCheckpoint> indexed_checkpoints(const std::filesystem::path& run_dir);

}  // namespace tandem

TANDEM_INTERNAL_API_END
