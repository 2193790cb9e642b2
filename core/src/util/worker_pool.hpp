// WorkerPool: a fixed set of threads that run the parts of one job at a time — the image
// datasets decode a batch's files on it. run() blocks until every part is done and rethrows, in
// the caller's thread, the first exception a part threw (the other parts still run to their
// end, so nothing is left writing into the caller's memory).
//
// Thread-safety: run() may be called from one thread at a time (the DataLoader's prefetch
// thread); the pool owns its threads and joins them on destruction.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

class WorkerPool {
 public:
  /// Parts run on `threads` threads (at least 1): the caller's, which works while it waits, and
  /// threads - 1 of the pool's own.
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(threads_.size()) + 1; }

  /// Calls part(i) for every i in [0, parts), each exactly once, spread over the workers.
  void run(std::int64_t parts, const std::function<void(std::int64_t)>& part);

 private:
  void work();
  bool run_one(std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::int64_t)>* part_ = nullptr;  // the job running, or null
  std::int64_t parts_ = 0, next_ = 0, finished_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
