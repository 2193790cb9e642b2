#include "backend/cpu/parallel.hpp"

#include <atomic>

namespace tandem::cpu {

namespace {
std::atomic<int> g_threads{0};
}

int compute_threads() {
  int t = g_threads.load(std::memory_order_relaxed);
  if (t <= 0) {
    t = std::max(1, omp_get_max_threads());
    g_threads.store(t, std::memory_order_relaxed);
  }
  return t;
}

void set_compute_threads(int threads) {
  threads = std::max(1, threads);
  g_threads.store(threads, std::memory_order_relaxed);
  omp_set_num_threads(threads);
}

}  // namespace tandem::cpu
