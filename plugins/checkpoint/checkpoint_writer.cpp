#include "checkpoint/checkpoint_writer.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "checkpoint/checkpoint_index.hpp"
#include "tandem/event_sink.hpp"

namespace tandem::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

CheckpointWriter::CheckpointWriter(bool async) : async_(async) {
  if (async_) thread_ = std::thread([this] { run(); });
}

CheckpointWriter::~CheckpointWriter() {
  if (!async_) return;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ && !busy_; });
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "checkpoint: %s\n", e.what());
    }
  }
}

double CheckpointWriter::wait_idle() {
  if (!async_) return 0;
  const auto t0 = Clock::now();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !pending_ && !busy_; });
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void CheckpointWriter::submit(WriteJob job) {
  if (!async_) {
    try {
      write(job);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    return;
  }
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ && !busy_; });
    pending_ = std::move(job);
  }
  changed_.notify_all();
}

void CheckpointWriter::drain() {
  wait_idle();
}

std::vector<json> CheckpointWriter::take_finished() {
  std::lock_guard lock(mutex_);
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    finished_.clear();
    std::rethrow_exception(e);
  }
  std::vector<json> out;
  out.swap(finished_);
  return out;
}

void CheckpointWriter::run() {
  for (;;) {
    WriteJob job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return pending_ || stop_; });
      if (!pending_) return;  // stop_ and nothing left
      job = std::move(*pending_);
      pending_.reset();
      busy_ = true;
    }
    std::exception_ptr error;
    try {
      write(job);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (error && !error_) error_ = error;
      busy_ = false;
    }
    changed_.notify_all();
  }
}

void CheckpointWriter::write(WriteJob& job) {
  std::vector<json> written;
  // A file written again (last.h5, a constant filepath) first leaves the index's checkpoints for
  // its "rewriting" list: no entry describes content its file no longer has, whenever the process
  // dies, and `--resume RUN_DIR` still finds the file (whole: the write replaces it atomically).
  std::map<fs::path, std::vector<std::string>> rewritten;
  for (const auto& f : job.files) {
    std::error_code ec;
    if (fs::exists(f, ec)) rewritten[f.parent_path()].push_back(f.string());
  }
  for (const auto& [dir, paths] : rewritten) mark_rewriting(dir, paths);
  std::map<fs::path, std::vector<json>> adds;  // index folder -> its new entries
  for (std::size_t i = 0; i < job.files.size(); ++i) {
    const auto t0 = Clock::now();
    write_checkpoint_file(job.files[i], job.data);
    json entry = job.entries[i];
    entry["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
    entry["bytes"] = fs::file_size(job.files[i]);
    entry["time"] = EventSink::utc_now();
    adds[job.files[i].parent_path()].push_back(entry);
    written.push_back(std::move(entry));
  }
  // The index first stops listing evicted files, then they are deleted: it never names a file
  // that is not whole on disk.
  std::vector<std::string> removed;
  for (const auto& f : job.evict) {
    removed.push_back(f.string());
    adds.try_emplace(f.parent_path());
  }
  for (const auto& [dir, entries] : adds) update_index(dir, entries, removed);
  for (const auto& f : job.evict) {
    std::error_code ec;
    fs::remove(f, ec);
    if (ec)
      std::fprintf(stderr, "checkpoint: could not delete %s: %s\n", f.c_str(),
                   ec.message().c_str());
  }
  std::lock_guard lock(mutex_);
  for (auto& e : written) finished_.push_back(std::move(e));
}

}  // namespace tandem::checkpoint
