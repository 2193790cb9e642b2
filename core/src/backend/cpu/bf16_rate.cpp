// Times bfloat16 dot products against float32 FMAs (see the header). Each timing runs one
// instruction on 16 independent accumulators (zmm16-zmm31, zeroed, with zero operands: no
// denormals, no special cases), enough to keep either instruction's pipeline full whatever its
// latency, for kRounds rounds; the best of kTimings interleaved timings of each counts, so a
// preemption or a frequency step in one timing does not decide the verdict. The loops are
// written in assembly so that the measurement is the instruction's, whatever the compiler makes
// of C++ (a sanitizer build keeps intrinsics' accumulators in memory).
#include "backend/cpu/bf16_rate.hpp"

#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "backend/cpu/gemm.hpp"

namespace tandem::cpu {

namespace {

constexpr long kRounds = 40'000;  // 640,000 instructions a timing: 0.1-0.5 ms
constexpr int kTimings = 5;

using Clock = std::chrono::steady_clock;

// clang-format off
// `insn zmm0, zmm0, zmmN` for the 16 accumulators.
#define TANDEM_ON_ACCUMULATORS(insn)                                                             \
  insn " %%zmm0, %%zmm0, %%zmm16\n\t" insn " %%zmm0, %%zmm0, %%zmm17\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm18\n\t" insn " %%zmm0, %%zmm0, %%zmm19\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm20\n\t" insn " %%zmm0, %%zmm0, %%zmm21\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm22\n\t" insn " %%zmm0, %%zmm0, %%zmm23\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm24\n\t" insn " %%zmm0, %%zmm0, %%zmm25\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm26\n\t" insn " %%zmm0, %%zmm0, %%zmm27\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm28\n\t" insn " %%zmm0, %%zmm0, %%zmm29\n\t" insn                  \
       " %%zmm0, %%zmm0, %%zmm30\n\t" insn " %%zmm0, %%zmm0, %%zmm31\n\t"

// Seconds for kRounds rounds of `insn` (a string literal) on the 16 zeroed accumulators.
#define TANDEM_TIME_LOOP(insn)                                                                  \
  long rounds = kRounds;                                                                        \
  const auto start = Clock::now();                                                              \
  asm volatile(TANDEM_ON_ACCUMULATORS("vpxord")                                                 \
               "1:\n\t" TANDEM_ON_ACCUMULATORS(insn) "dec %0\n\t"                               \
               "jnz 1b\n\t"                                                                     \
               "vzeroupper\n\t"                                                                 \
               : "+r"(rounds)                                                                   \
               :                                                                                \
               : "cc", "xmm0", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",   \
                 "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30",       \
                 "xmm31");                                                                      \
  return std::chrono::duration<double>(Clock::now() - start).count()
// clang-format on

__attribute__((target("avx512f,avx512bf16"))) double time_bf16_dot_products() {
  TANDEM_TIME_LOOP("vdpbf16ps");
}

__attribute__((target("avx512f"))) double time_float_fmas() {
  TANDEM_TIME_LOOP("vfmadd231ps");
}

#undef TANDEM_TIME_LOOP
#undef TANDEM_ON_ACCUMULATORS

bool multiplies_bf16_on_amx() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned amx = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_amx);
  return (isa & amx) == amx;
}

std::optional<double> measure() {
  if (!bf16_unavailable().empty() || multiplies_bf16_on_amx()) return std::nullopt;
  double best_bf16 = 1e9, best_fp32 = 1e9;
  for (int t = 0; t < kTimings; ++t) {
    best_bf16 = std::min(best_bf16, time_bf16_dot_products());
    best_fp32 = std::min(best_fp32, time_float_fmas());
  }
  // FLOPs per instruction: 64 for vdpbf16ps (32 products and sums), 32 for an FMA (16).
  return 2.0 * best_fp32 / best_bf16;
}

}  // namespace

std::optional<double> bf16_product_rate() {
  static std::once_flag once;
  static std::optional<double> rate;
  std::call_once(once, [] { rate = measure(); });
  return rate;
}

std::string bf16_slower_warning(double rate) {
  if (rate >= 1.0) return "";
  char text[320];
  std::snprintf(text, sizeof text,
                "precision bf16: this CPU multiplies bfloat16 at %.2fx its float32 rate (AVX-512 "
                "BF16 dot products against float32 FMAs, timed on one core), so bf16 products "
                "make this run slower than fp32 would, not faster",
                rate);
  return text;
}

}  // namespace tandem::cpu
