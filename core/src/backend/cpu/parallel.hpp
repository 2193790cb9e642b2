// Compute parallelism for CPU kernels.
//
// oneDNN (our GEMM) runs on OpenMP; our own kernels use the very same OpenMP team through
// parallel_for, so the two never fight over the cores (a second pool would spin against
// OpenMP's waiting threads). Work is split into contiguous, deterministic ranges: the same
// inputs give bitwise the same results whatever the timing.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// Threads the calling thread's kernels use (its OpenMP team size: all cores by default; a
/// replica worker's share of them). The first call in a thread also sets flush-to-zero there
/// and in its OpenMP team.
int compute_threads();
/// Sets the calling thread's team size (each replica worker sets its share of the cores).
void set_compute_threads(int threads);
/// Subnormal floats become zero in this thread (FTZ/DAZ); see parallel.cpp.
void flush_denormals_in_this_thread();

/// Runs the calling thread's team on one thread while it lives, when `restore` (the team size to
/// go back to) is positive; leaves the team alone otherwise. For work too small to be worth
/// waking the team (a small GEMM). The calling thread only, on its stack.
class OneThread {
 public:
  explicit OneThread(int restore) : restore_(restore) {
    if (restore_ > 0) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (restore_ > 0) omp_set_num_threads(restore_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int restore_;
};

/// The smallest share of a memory-bound loop (copies, element-wise arithmetic) worth a thread of
/// its own: below about 64k floats a second thread costs more than it saves.
inline constexpr std::int64_t kMemoryBoundChunk = 65536;

/// Calls f(begin, end) over [0, n) split in at most compute_threads() contiguous ranges of at
/// least `min_chunk` elements; runs inline when the work is too small to be worth a fork.
template <class F>
void parallel_for(std::int64_t n, std::int64_t min_chunk, F&& f) {
  const std::int64_t max_parts =
      std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, min_chunk));
  const int parts = static_cast<int>(std::min<std::int64_t>(compute_threads(), max_parts));
  if (parts <= 1) {
    if (n > 0) f(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(parts)
  {
    flush_denormals_in_this_thread();  // a team thread may be new (another caller's team)
    const std::int64_t t = omp_get_thread_num();
    const std::int64_t nt = omp_get_num_threads();
    const std::int64_t begin = n * t / nt;
    const std::int64_t end = n * (t + 1) / nt;
    if (end > begin) f(begin, end);
  }
}

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
