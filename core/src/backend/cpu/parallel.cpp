#include "backend/cpu/parallel.hpp"

#include <xmmintrin.h>

#include <atomic>

namespace tandem::cpu {

namespace {

thread_local bool t_initialised = false;

}  // namespace

void flush_denormals_in_this_thread() {
  // FTZ (bit 15) and DAZ (bit 6): subnormal floats are treated as zero. Gradients and Adam's
  // moment estimates drift into the subnormal range during training, where x86 arithmetic is
  // up to 100x slower; TensorFlow flushes them the same way. Values below 1.2e-38 are far below
  // float32 training precision.
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

int compute_threads() {
  const int t = std::max(1, omp_get_max_threads());
  if (!t_initialised) {
    t_initialised = true;
    flush_denormals_in_this_thread();
#pragma omp parallel num_threads(t)
    flush_denormals_in_this_thread();
  }
  return t;
}

void set_compute_threads(int threads) {
  threads = std::max(1, threads);
  omp_set_num_threads(threads);
  t_initialised = false;
  compute_threads();
}

}  // namespace tandem::cpu
