#include "tandem/run_files.hpp"

#include "io/run_folder_lock.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

std::filesystem::path normal(const std::filesystem::path& p) {
  return std::filesystem::absolute(p).lexically_normal();
}

}  // namespace

RunFile run_file_of(const std::filesystem::path& run_dir, const std::filesystem::path& file) {
  if (run_dir.empty() || file.empty()) return RunFile::none;
  const std::filesystem::path folder = normal(run_dir);
  const std::filesystem::path path = normal(file.is_relative() ? run_dir / file : file);
  const std::filesystem::path inside = path.lexically_relative(folder);
  if (inside.empty() || *inside.begin() == "..") return RunFile::none;
  const std::string name = inside.filename().string();
  const bool top = inside.parent_path().empty();
  if (name == "checkpoints.json") return RunFile::checkpoint_index;
  if (!top) return RunFile::none;
  if (name == "events.jsonl") return RunFile::event_stream;
  if (name == "config.json") return RunFile::stored_config;
  if (name == "model.h5") return RunFile::final_model;
  if (name == kRunFolderLockName) return RunFile::folder_lock;
  return RunFile::none;
}

std::string describe(RunFile file) {
  switch (file) {
    case RunFile::none:
      return "";
    case RunFile::event_stream:
      return "the run's event stream (events.jsonl)";
    case RunFile::stored_config:
      return "the run's stored config (config.json)";
    case RunFile::final_model:
      return "the run's final model (model.h5, written when the run ends)";
    case RunFile::folder_lock:
      return "the run folder's lock (.tandem.lock)";
    case RunFile::checkpoint_index:
      return "a checkpoint index (checkpoints.json)";
  }
  return "";
}

void refuse_run_file(const std::filesystem::path& run_dir, const std::filesystem::path& file,
                     const std::string& option, RunFile allowed) {
  const RunFile found = run_file_of(run_dir, file);
  if (found == RunFile::none || found == allowed) return;
  throw ConfigError(option, file.string() + " is " + describe(found) +
                                ": writing there would replace it; choose another file name");
}

}  // namespace tandem
