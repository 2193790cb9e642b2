// A loop in two versions, one for the baseline x86-64 that libtandem targets and one for AVX-512
// (F and BW: every CPU with AVX-512 BF16 has both), run in the version this CPU can take.
//
// The versions are either one loop compiled twice (run_loop), for loops the baseline's SSE2 leaves
// slow: BatchNormalization's register-held sums (16 double lanes twice), the plain bf16
// rounding (packing 32-bit lanes into 16-bit ones); or two hand-written functions that compute
// the same values (run_either), where AVX-512 intrinsics reorder data as no compiler does (the
// transposed and blocked bf16 roundings). libtandem is built with -ffp-contract=off, so an
// AVX-512 copy fuses no multiply-add the baseline would not.
// Include only from .cpp files of backend/cpu and from their tests.
#pragma once

#include <atomic>

#include "util/internal_api.hpp"

// Exported (with the flag below) so that a test's BaselineLoopsForced reaches libtandem's loops.
TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

namespace avx512_copy_detail {

inline std::atomic<int> baseline_forced{0};

template <auto Loop, class... Args>
void baseline(Args... args) {
  Loop(args...);
}

template <auto Loop, class... Args>
[[gnu::target("avx512f,avx512bw")]] void avx512(Args... args) {
  Loop(args...);
}

}  // namespace avx512_copy_detail

/// Whether this CPU runs AVX-512 F and BW (and no BaselineLoopsForced is alive).
inline bool has_avx512() {
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return avx512 && avx512_copy_detail::baseline_forced.load(std::memory_order_relaxed) == 0;
}

/// For tests: while one lives, every loop runs its baseline version, so that a machine with
/// AVX-512 checks both. Any thread; scopes may nest.
class BaselineLoopsForced {
 public:
  BaselineLoopsForced() { avx512_copy_detail::baseline_forced.fetch_add(1); }
  ~BaselineLoopsForced() { avx512_copy_detail::baseline_forced.fetch_sub(1); }
  BaselineLoopsForced(const BaselineLoopsForced&) = delete;
  BaselineLoopsForced& operator=(const BaselineLoopsForced&) = delete;
};

/// Avx512(args...) where this CPU runs AVX-512, else Baseline(args...). The two must compute the
/// same values; args are passed by value.
template <auto Baseline, auto Avx512, class... Args>
void run_either(Args... args) {
  if (has_avx512())
    Avx512(args...);
  else
    Baseline(args...);
}

/// Loop(args...) in the copy this CPU can take. `Loop` is an always_inline function (a template
/// argument, so that each copy inlines it); args are passed by value.
template <auto Loop, class... Args>
void run_loop(Args... args) {
  run_either<&avx512_copy_detail::baseline<Loop, Args...>,
             &avx512_copy_detail::avx512<Loop, Args...>>(args...);
}

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
