// Fault injection through the engine's file-system seam (core/src/io/file_system.hpp), LevelDB's
// way: a whole `tandem train` run (run_training, with the real checkpoint and events plugins) is
// done once to record every durable write step — create, write, close, fsync, rename, folder
// fsync and each appended event line — and then once more per step with exactly that step
// failing. Every time the run must end with an error that names the file and the system's
// reason, never exit quietly; every checkpoint committed before the fault must still load and
// verify; the checkpoint index must name only files that are there; and no temporary file may be
// left behind.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/file_system.hpp"
#include "tandem/checkpoint_file.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"
#include "train/run.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

// One step of a write, as the seam sees it, named so that it is the same step in every run: the
// checkpoint plugin writes on its own thread, so the order of steps varies between runs, but not
// the n-th step of a kind on one file.
struct Step {
  std::string kind;  // create, append, close, sync, sync_file, rename, sync_folder, open_append
  fs::path file;     // relative to the run folder; a temporary file as its target's name
  int occurrence;    // 1 for the first step of this kind on this file, 2 for the second, ...
  std::string key() const {
    return kind + " " + file.string() + " #" + std::to_string(occurrence);
  }
};

// The name of `path` relative to `run_dir`, with an atomic writer's temporary file
// ("dir/.name.tmp-<pid>-<n>") named as its target ("dir/name").
fs::path step_file(const fs::path& path, const fs::path& run_dir) {
  fs::path relative = path.lexically_relative(run_dir);
  const std::string name = relative.filename().string();
  if (name.rfind('.', 0) == 0 && name.find(".tmp-") != std::string::npos)
    relative.replace_filename(name.substr(1, name.find(".tmp-") - 1));
  return relative;
}

// Passes every call to the real file system, records it, and fails the step whose key() is
// `fail` with `error`. Thread-safe (the checkpoint plugin writes on its own thread).
class FaultyFileSystem final : public FileSystem {
 public:
  FaultyFileSystem(fs::path run_dir, std::string fail = "", int error = EIO)
      : run_dir_(std::move(run_dir)), fail_(std::move(fail)), error_(error) {}

  std::vector<Step> steps() const {
    std::lock_guard lock(mutex_);
    return steps_;
  }

  std::error_code create_new(const fs::path& path, std::unique_ptr<WritableFile>& file) override {
    return open("create", path, file, &FileSystem::create_new);
  }
  std::error_code open_append(const fs::path& path, std::unique_ptr<WritableFile>& file) override {
    return open("open_append", path, file, &FileSystem::open_append);
  }
  std::error_code sync_file(const fs::path& path) override {
    if (auto e = step("sync_file", path)) return e;
    return posix().sync_file(path);
  }
  std::error_code rename(const fs::path& from, const fs::path& to) override {
    if (auto e = step("rename", to)) return e;
    return posix().rename(from, to);
  }
  std::error_code sync_folder(const fs::path& folder) override {
    if (auto e = step("sync_folder", folder)) return e;
    return posix().sync_folder(folder);
  }
  void remove(const fs::path& path) noexcept override { posix().remove(path); }

 private:
  class File final : public WritableFile {
   public:
    File(FaultyFileSystem& owner, fs::path path, std::unique_ptr<WritableFile> real)
        : owner_(owner), path_(std::move(path)), real_(std::move(real)) {}
    std::error_code append(std::string_view bytes) override {
      if (auto e = owner_.step("append", path_)) {
        // A failed write may have written part of the bytes, as a full disk does.
        (void)real_->append(bytes.substr(0, bytes.size() / 2));
        return e;
      }
      return real_->append(bytes);
    }
    std::error_code sync() override {
      if (auto e = owner_.step("sync", path_)) return e;
      return real_->sync();
    }
    std::error_code close() override {
      if (auto e = owner_.step("close", path_)) {
        (void)real_->close();
        return e;
      }
      return real_->close();
    }

   private:
    FaultyFileSystem& owner_;
    fs::path path_;
    std::unique_ptr<WritableFile> real_;
  };

  using Opener = std::error_code (FileSystem::*)(const fs::path&, std::unique_ptr<WritableFile>&);
  // A step that opens a file: the real file, wrapped so that its writes are steps too.
  std::error_code open(const char* kind, const fs::path& path, std::unique_ptr<WritableFile>& file,
                       Opener opener) {
    if (auto e = step(kind, path)) return e;
    std::unique_ptr<WritableFile> real;
    if (auto e = (posix().*opener)(path, real)) return e;
    file = std::make_unique<File>(*this, path, std::move(real));
    return {};
  }

  std::error_code step(const char* kind, const fs::path& path) {
    std::lock_guard lock(mutex_);
    Step step{kind, step_file(path, run_dir_), 0};
    step.occurrence = ++seen_[step.kind + " " + step.file.string()];
    steps_.push_back(step);
    return step.key() == fail_ ? std::error_code(error_, std::system_category()) : std::error_code();
  }

  fs::path run_dir_;
  std::string fail_;
  int error_;
  mutable std::mutex mutex_;
  std::vector<Step> steps_;
  std::map<std::string, int> seen_;
};

// Two epochs of a small classifier, a checkpoint callback writing to `filepath` after each
// epoch, the engine's final model.h5 and the event stream.
RunConfig checkpointing_config(const std::string& filepath) {
  json config = tiny_regression_config();
  config["epochs"] = 2;
  config["verbose"] = 0;
  config["callbacks"] = json::array(
      {{{"plugin", "checkpoint"}, {"options", {{"filepath", filepath}, {"monitor", "loss"}}}}});
  return parse_run_config(config, fs::current_path());
}

// Every checkpoint kept.
RunConfig faults_config() { return checkpointing_config("checkpoints/epoch{epoch:02d}.h5"); }

TrainRequest request_for(const RunConfig& config, const fs::path& run_dir) {
  TrainRequest request;
  request.config = config;
  request.run_dir = run_dir;
  return request;
}

// The error `config` ends with in `run_dir` on `faults` ("" when it trains).
std::string error_of_run(const RunConfig& config, const fs::path& run_dir,
                         FaultyFileSystem& faults) {
  ScopedFileSystem installed(faults);
  try {
    run_training(request_for(config, run_dir));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The checkpoint files (relative to the run folder) that a rename over their name committed.
std::set<fs::path> committed_checkpoints(const std::vector<Step>& steps) {
  std::set<fs::path> out;
  for (const auto& s : steps)
    if (s.kind == "rename" && s.file.extension() == ".h5") out.insert(s.file);
  return out;
}

std::vector<fs::path> temporaries_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      out.push_back(entry.path());
  return out;
}

// Every file the index names is there and loads (the index of the checkpoints' folder).
void expect_index_consistent(const fs::path& run_dir, const std::string& context) {
  const fs::path index = run_dir / "checkpoints" / "checkpoints.json";
  if (!fs::exists(index)) return;
  const json doc = json::parse(read_text(index));
  for (const auto& entry : doc.at("checkpoints")) {
    const fs::path file = index.parent_path() / entry.at("file").get<std::string>();
    EXPECT_TRUE(fs::exists(file)) << context << ": the index names " << file << ", which is gone";
    if (fs::exists(file)) {
      EXPECT_NO_THROW(verify_checkpoint_file(file)) << context << ": " << file;
    }
  }
}

TEST(WriteFaults, EveryFailedWriteStepEndsTheRunWithAClearErrorAndKeepsEarlierCheckpoints) {
  const fs::path base = scratch_dir("write_faults");
  const RunConfig config = faults_config();

  // The fault-free run: what it writes, step by step.
  FaultyFileSystem recorder(base / "clean");
  {
    ScopedFileSystem installed(recorder);
    run_training(request_for(config, base / "clean"));
  }
  const std::vector<Step> steps = recorder.steps();
  ASSERT_GT(steps.size(), 20u);
  std::set<std::string> kinds;
  for (const auto& s : steps) kinds.insert(s.kind);
  for (const char* kind : {"create", "append", "close", "sync_file", "rename", "sync_folder",
                           "open_append"})
    EXPECT_TRUE(kinds.count(kind)) << "the recorded run has no '" << kind << "' step";
  std::cout << "[ faults   ] " << steps.size() << " write steps; each is failed in a run of its own\n";
  ASSERT_EQ(committed_checkpoints(steps),
            (std::set<fs::path>{"checkpoints/epoch01.h5", "checkpoints/epoch02.h5", "model.h5"}));

  for (std::size_t n = 0; n < steps.size(); ++n) {
    const Step& faulty = steps[n];
    const fs::path run_dir = base / ("fault-" + std::to_string(n));
    const std::string context = "fault at " + faulty.key();
    FaultyFileSystem faults(run_dir, faulty.key(), EIO);
    const std::string error = error_of_run(config, run_dir, faults);
    // Where the run had got to when the step failed.
    std::vector<Step> before;
    for (const auto& s : faults.steps()) {
      if (s.key() == faulty.key()) break;
      before.push_back(s);
    }
    ASSERT_LT(before.size(), faults.steps().size()) << context << ": the step never came";

    EXPECT_FALSE(error.empty()) << context << ": the run ended without an error";
    EXPECT_NE(error.find("Input/output error"), std::string::npos) << context << ": " << error;
    // The file named: the target of an atomic write, the folder of a folder flush.
    const std::string name = (faulty.file == "." ? run_dir : run_dir / faulty.file).filename();
    EXPECT_NE(error.find(name), std::string::npos) << context << ": " << error;

    for (const fs::path& ckpt : committed_checkpoints(before)) {
      EXPECT_TRUE(fs::exists(run_dir / ckpt)) << context << ": " << ckpt << " is gone";
      if (fs::exists(run_dir / ckpt)) {
        EXPECT_NO_THROW(verify_checkpoint_file(run_dir / ckpt)) << context << ": " << ckpt;
      }
    }
    expect_index_consistent(run_dir, context);
    EXPECT_EQ(temporaries_in(run_dir), std::vector<fs::path>()) << context;
  }
}

// A checkpoint file written again (a filepath without fields) whose new write fails stays
// resumable through its run folder: its entry waits in the index's "rewriting" list (it left the
// index before the write, and `--resume RUN_DIR` found nothing to resume).
TEST(WriteFaults, AFileWrittenAgainStaysResumableFromTheRunFolderWhenItsWriteFails) {
  const fs::path run_dir = scratch_dir("write_faults_again") / "run";
  FaultyFileSystem faults(run_dir, "rename checkpoints/ck.h5 #2", EIO);
  EXPECT_FALSE(error_of_run(checkpointing_config("checkpoints/ck.h5"), run_dir, faults).empty());
  EXPECT_NO_THROW(verify_checkpoint_file(run_dir / "checkpoints" / "ck.h5"));
  const json index = json::parse(read_text(run_dir / "checkpoints" / "checkpoints.json"));
  EXPECT_TRUE(index.at("checkpoints").empty()) << index.dump();
  ASSERT_EQ(index.value("rewriting", json::array()).size(), 1u) << index.dump();
  EXPECT_EQ(index["rewriting"][0].at("file"), "ck.h5");
  EXPECT_EQ(index["rewriting"][0].at("epoch"), 1);
  fs::remove(run_dir / "model.h5");  // the index alone, whether or not the run saved one
  const CommandResult r = run_command(tandem_cli() + " train --resume " + run_dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ck.h5"), std::string::npos) << r.err;
}

// A run that failed between steps saves its weights; when that save fails too, the run's own
// failure is the error, the save's added to it (the save's alone hid why the run had stopped).
TEST(WriteFaults, ARunThatFailedAndCannotSaveReportsItsOwnFailureFirst) {
  const fs::path run_dir = scratch_dir("write_faults_twice") / "run";
  FaultyFileSystem faults(run_dir, "rename model.h5 #1", EIO);
  const std::string error = error_of_run(checkpointing_config("ck/{no_such_key}.h5"), run_dir, faults);
  EXPECT_NE(error.find("{no_such_key}"), std::string::npos) << error;
  EXPECT_NE(error.find("and its weights could not be saved"), std::string::npos) << error;
  EXPECT_NE(error.find("Input/output error"), std::string::npos) << error;
  EXPECT_LT(error.find("{no_such_key}"), error.find("Input/output error")) << error;
}

// A full disk reads as such in the message, and the stream that failed is not written to again
// (the run's last events go nowhere rather than into the middle of a torn line).
TEST(WriteFaults, FullDiskWhileAppendingEventsNamesTheStream) {
  const fs::path base = scratch_dir("write_faults_enospc");
  const fs::path run_dir = base / "full";
  FaultyFileSystem faults(run_dir, "append events.jsonl #3", ENOSPC);
  std::string error;
  {
    ScopedFileSystem installed(faults);
    try {
      run_training(request_for(faults_config(), run_dir));
    } catch (const Error& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find("events.jsonl"), std::string::npos) << error;
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  // The stream that failed is not written to again.
  int appends = 0;
  for (const auto& s : faults.steps()) appends += s.kind == "append" && s.file == "events.jsonl";
  EXPECT_EQ(appends, 3);
  // Two whole lines, then the torn half of the third.
  const std::string text = read_text(run_dir / "events.jsonl");
  std::size_t newlines = 0;
  for (char c : text) newlines += c == '\n';
  EXPECT_EQ(newlines, 2u);
  EXPECT_NE(text.back(), '\n');
}

}  // namespace
}  // namespace tandem::test
