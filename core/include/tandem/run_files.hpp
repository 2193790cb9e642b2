// The files a run keeps in its own folder, for callbacks that write files of their own (the
// plugin SDK): a checkpoint, a CSV log or an event stream given one of these names would write
// over the run's record — its event stream (which tandem-gui and --resume read), its stored
// config, its final model, its lock or a checkpoint index — silently, exit 0. A callback asks
// before it writes and refuses such a path with a config error naming its option.
//
// Paths are compared as written, after making them absolute and lexically normal: no symbolic
// link is followed and nothing is read from disk. Stateless; any thread.
#pragma once

#include <filesystem>
#include <string>

#include "tandem/export.hpp"

namespace tandem {

enum class RunFile {
  none,              // not one of the run's own files
  event_stream,      // events.jsonl (the events plugin writes it)
  stored_config,     // config.json
  final_model,       // model.h5 (the weights the run ends with, resumable)
  folder_lock,       // .tandem.lock
  checkpoint_index,  // checkpoints.json in the folder or a folder of it (the checkpoint plugin's)
};

/// What `file` is to the run whose folder is `run_dir`: RunFile::none when it is not one of the
/// run's own files (also when `run_dir` is empty: a trainer without a folder). A relative `file`
/// is relative to `run_dir`, as callbacks resolve their paths.
TANDEM_EXPORT RunFile run_file_of(const std::filesystem::path& run_dir,
                                  const std::filesystem::path& file);

/// "the run's event stream (events.jsonl)", ...; "" for RunFile::none.
TANDEM_EXPORT std::string describe(RunFile file);

/// Throws ConfigError at `option` (a config path, "callbacks[2].options.filepath") when `file`
/// is one of the run's own files other than `allowed`, naming both. For a callback's hooks (before
/// it writes) and its plugin's create() (with a run_dir to check relative names against).
TANDEM_EXPORT void refuse_run_file(const std::filesystem::path& run_dir,
                                   const std::filesystem::path& file, const std::string& option,
                                   RunFile allowed = RunFile::none);

}  // namespace tandem
