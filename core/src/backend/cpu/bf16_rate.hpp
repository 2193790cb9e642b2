// How fast this CPU multiplies in bfloat16 against float32, measured.
//
// AVX-512 BF16 is not equally fast everywhere. Where a bfloat16 dot product (vdpbf16ps: 32
// products and sums per 512-bit instruction) issues as often as a float32 FMA (16), bf16 products
// run at twice the float32 rate: on the AMD Zen 5 VMs of docs/benchmarks.md seed-mlp trains 1.76x
// faster in bf16. The Intel Xeon VMs there (Emerald Rapids, no AMX exposed) issue vdpbf16ps once
// every two cycles against two FMAs a cycle: bf16 products at half the float32 rate, and a bf16
// run trains about 2x slower than fp32. No CPUID bit tells the two apart, so Tandem times both
// instructions.
#pragma once

#include <optional>
#include <string>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::cpu {

/// The FLOP rate of this CPU's bfloat16 dot products (vdpbf16ps) over that of its float32 FMAs
/// (vfmadd231ps), both 512 bits wide and independent, timed on the calling thread's core for a
/// few milliseconds the first time it is called and then remembered for the process (0.48-0.50 on
/// the Intel Xeon VMs above). nullopt when the CPU has no AVX-512 BF16 (bf16_unavailable()) or when
/// oneDNN multiplies bfloat16 on AMX tiles, which this does not time. Any thread; concurrent first
/// calls wait for one measurement.
std::optional<double> bf16_product_rate();

/// The warning a bf16 run on a CPU whose bf16 products run at `rate` (bf16_product_rate()) times
/// its float32 rate deserves, as a sentence, or "" when bf16 is no slower (rate >= 1).
std::string bf16_slower_warning(double rate);

}  // namespace tandem::cpu

TANDEM_INTERNAL_API_END
