#include "util/worker_pool.hpp"

#include <algorithm>

namespace tandem {

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

// Takes the next part of the running job and runs it with the lock released; false when the
// job has no part left to take.
bool WorkerPool::run_one(std::unique_lock<std::mutex>& lock) {
  if (part_ == nullptr || next_ >= parts_) return false;
  const std::int64_t i = next_++;
  const auto* part = part_;
  lock.unlock();
  std::exception_ptr error;
  try {
    (*part)(i);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  if (error && !error_) error_ = error;
  if (++finished_ == parts_) done_.notify_all();
  return true;
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || (part_ != nullptr && next_ < parts_); });
    if (stopping_) return;
    while (run_one(lock)) {
    }
  }
}

void WorkerPool::run(std::int64_t parts, const std::function<void(std::int64_t)>& part) {
  if (parts <= 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  part_ = &part;
  parts_ = parts;
  next_ = finished_ = 0;
  error_ = nullptr;
  wake_.notify_all();
  while (run_one(lock)) {
  }
  done_.wait(lock, [&] { return finished_ == parts_; });
  part_ = nullptr;
  std::exception_ptr error = error_;
  error_ = nullptr;
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

}  // namespace tandem
