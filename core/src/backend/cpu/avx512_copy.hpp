// A loop compiled twice, for the baseline x86-64 that libtandem targets and for AVX-512 (F and
// BW: every CPU with AVX-512 BF16 has both), and run in the copy this CPU can take.
//
// For loops the baseline's SSE2 leaves slow: the bf16 roundings (packing 32-bit lanes into 16-bit
// ones) and BatchNormalization's register-held sums (16 double lanes twice). libtandem is built
// with -ffp-contract=off, so the AVX-512 copy fuses no multiply-add the baseline would not.
// Include only from .cpp files of backend/cpu.
#pragma once

namespace tandem::cpu {

/// Whether this CPU runs AVX-512 F and BW.
inline bool has_avx512() {
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return avx512;
}

namespace avx512_copy_detail {

template <auto Loop, class... Args>
void baseline(Args... args) {
  Loop(args...);
}

template <auto Loop, class... Args>
[[gnu::target("avx512f,avx512bw")]] void avx512(Args... args) {
  Loop(args...);
}

}  // namespace avx512_copy_detail

/// Loop(args...) in the copy this CPU can take. `Loop` is an always_inline function (a template
/// argument, so that each copy inlines it); args are passed by value.
template <auto Loop, class... Args>
void run_loop(Args... args) {
  if (has_avx512())
    avx512_copy_detail::avx512<Loop>(args...);
  else
    avx512_copy_detail::baseline<Loop>(args...);
}

}  // namespace tandem::cpu
