// CheckpointWriter: writes captured checkpoints on a background thread (or inline when not async).
//
// The training thread captures a checkpoint (a deep copy: CheckpointData owns its tensors) and
// submits it; the writer thread writes the file(s) (crash-safe, write_checkpoint_file; a file
// written again moves to the index's "rewriting" list first), then the index, then deletes the
// files the job evicts. At most one job is in flight: submit() waits only while the previous write
// is still running. Results and errors come back to the training thread through take_finished(),
// which the callback calls from its hooks (the CallbackContext, and so ctx.publish, belongs to the
// training thread).
#pragma once

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint_file.hpp"

namespace tandem::checkpoint {

struct WriteJob {
  CheckpointData data;
  /// The files to write this data to (the checkpoint and/or last.h5), each with its index entry
  /// (without bytes, seconds and time, which the writer adds).
  std::vector<std::filesystem::path> files;
  std::vector<nlohmann::json> entries;
  /// Files to delete once the index no longer lists them (top-k evictions).
  std::vector<std::filesystem::path> evict;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(bool async);
  /// Drains pending writes (errors are then only reported on stderr) and stops the thread.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// Blocks while a previous job is still being written; returns the seconds it waited.
  double wait_idle();
  /// Hands `job` to the writer (waiting first, as wait_idle). Not async: writes at once.
  void submit(WriteJob job);
  /// Waits until every submitted job is written.
  void drain();
  /// The entries of the files written since the last call (with bytes, seconds, time), in order.
  /// Throws the first write error since the last call (std::runtime_error naming the file).
  std::vector<nlohmann::json> take_finished();

 private:
  void run();
  void write(WriteJob& job);

  bool async_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<WriteJob> pending_;
  bool busy_ = false;
  bool stop_ = false;
  std::vector<nlohmann::json> finished_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tandem::checkpoint
