// Private: float32 -> bfloat16 rounding, written once for the host and the device (nvcc).
//
// bfloat16 is float32's upper 16 bits: sign, the 8-bit exponent, 7 mantissa bits. Rounding is to
// nearest, ties to even (what AVX-512 BF16's VCVTNEPS2BF16, CUDA's __float2bfloat16_rn, PyTorch's
// .bfloat16() and oneDNN's reorders do); values past the largest bfloat16 round to infinity, NaN
// stays a (quiet) NaN. Subnormal inputs keep their rounded value here; the CPU backend runs with
// denormals-are-zero anyway (backend/cpu/parallel.cpp). Header rules as kernel_math.hpp's.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TANDEM_BF16_HD __host__ __device__
#else
#define TANDEM_BF16_HD
#endif

namespace tandem::backend {

/// The bits of x rounded to bfloat16.
TANDEM_BF16_HD inline std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(x);
#else
  __builtin_memcpy(&u, &x, sizeof u);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // ties to even: round up past half, or at half when odd
  return static_cast<std::uint16_t>(u >> 16);
}

/// The float32 value of bfloat16 bits.
TANDEM_BF16_HD inline float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// x rounded to the nearest bfloat16, as a float32.
TANDEM_BF16_HD inline float round_to_bf16(float x) {
  return bf16_value(bf16_bits(x));
}

}  // namespace tandem::backend

#undef TANDEM_BF16_HD
