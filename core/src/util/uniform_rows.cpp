#include "util/uniform_rows.hpp"

#include <array>

#if defined(__x86_64__)
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (GCC bug 105593): the
// warning is silenced for the header only, as in backend/cpu/bf16_rounding.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace tandem {

namespace {

void fill_row_by_row(std::span<Rng> rngs, float* out, std::int64_t n, std::int64_t stride) {
  for (std::size_t r = 0; r < rngs.size(); ++r)
    rngs[r].fill_uniform(out + static_cast<std::int64_t>(r) * stride, n);
}

#if defined(__x86_64__)

constexpr std::size_t kLanes = 8;  // 64-bit streams per vector

// The xoshiro256** states of eight streams, word k of stream j in lane j of s[k].
struct Streams {
  __m512i s[4];
};

[[gnu::target("avx512f")]] Streams load_streams(std::span<Rng> rngs) {
  alignas(64) std::uint64_t words[4][kLanes];
  for (std::size_t j = 0; j < kLanes; ++j) {
    const Rng::State st = rngs[j].state();
    for (std::size_t k = 0; k < 4; ++k) words[k][j] = st[k];
  }
  Streams v;
  for (std::size_t k = 0; k < 4; ++k) v.s[k] = _mm512_load_si512(words[k]);
  return v;
}

[[gnu::target("avx512f")]] void store_streams(const Streams& v, std::span<Rng> rngs) {
  alignas(64) std::uint64_t words[4][kLanes];
  for (std::size_t k = 0; k < 4; ++k) _mm512_store_si512(words[k], v.s[k]);
  for (std::size_t j = 0; j < kLanes; ++j) {
    Rng::State st = rngs[j].state();  // keeps word 4, the cached normal
    for (std::size_t k = 0; k < 4; ++k) st[k] = words[k][j];
    rngs[j].set_state(st);
  }
}

// One xoshiro256** step in every lane (the scalar step in util/rng.cpp, word for word): the
// outputs as floats in [0, 1), the top 24 bits of each scaled by 2^-24.
[[gnu::target("avx512f")]] inline __m256 next_uniforms(Streams& v) {
  __m512i* s = v.s;
  const __m512i times5 = _mm512_add_epi64(s[1], _mm512_slli_epi64(s[1], 2));
  const __m512i rotated = _mm512_rol_epi64(times5, 7);
  const __m512i result = _mm512_add_epi64(rotated, _mm512_slli_epi64(rotated, 3));  // x 9
  const __m512i t = _mm512_slli_epi64(s[1], 17);
  s[2] = _mm512_xor_si512(s[2], s[0]);
  s[3] = _mm512_xor_si512(s[3], s[1]);
  s[1] = _mm512_xor_si512(s[1], s[2]);
  s[0] = _mm512_xor_si512(s[0], s[3]);
  s[2] = _mm512_xor_si512(s[2], t);
  s[3] = _mm512_rol_epi64(s[3], 45);
  const __m256i bits = _mm512_cvtepi64_epi32(_mm512_srli_epi64(result, 40));  // < 2^24: exact
  return _mm256_mul_ps(_mm256_cvtepi32_ps(bits), _mm256_set1_ps(0x1.0p-24f));
}

// Transposes eight vectors (vector i: step i of the eight streams) into eight rows of eight
// consecutive values (row j: stream j's steps), in place.
[[gnu::target("avx512f")]] inline void transpose8(__m256 (&v)[8]) {
  __m256 t[8], u[8];
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm256_unpacklo_ps(v[2 * p], v[2 * p + 1]);
    t[2 * p + 1] = _mm256_unpackhi_ps(v[2 * p], v[2 * p + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // the rows 0-3 and 4-7 of each 128-bit half
    const int a = 4 * h;
    u[a] = _mm256_shuffle_ps(t[a], t[a + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[a + 1] = _mm256_shuffle_ps(t[a], t[a + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[a + 2] = _mm256_shuffle_ps(t[a + 1], t[a + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[a + 3] = _mm256_shuffle_ps(t[a + 1], t[a + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
    v[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
  }
}

// Eight rows from eight streams: blocks of 16 steps, transposed into the rows as two vectors of
// eight, so that each row gets 64 whole bytes at a time; the last n % 16 values of each row by
// the scalar loop, from the states the vectors left.
[[gnu::target("avx512f")]] void fill_eight_rows(std::span<Rng> rngs, float* out, std::int64_t n,
                                                std::int64_t stride) {
  Streams streams = load_streams(rngs);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 low[8], high[8];
    for (auto& step : low) step = next_uniforms(streams);
    for (auto& step : high) step = next_uniforms(streams);
    transpose8(low);
    transpose8(high);
    for (std::size_t j = 0; j < kLanes; ++j) {
      float* row = out + static_cast<std::int64_t>(j) * stride + i;
      _mm256_storeu_ps(row, low[j]);
      _mm256_storeu_ps(row + 8, high[j]);
    }
  }
  store_streams(streams, rngs);
  if (i < n) fill_row_by_row(rngs, out + i, n - i, stride);
}

bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

#endif

}  // namespace

bool uniform_rows_vectorized() {
#if defined(__x86_64__)
  return has_avx512f();
#else
  return false;
#endif
}

void fill_uniform_rows(std::span<Rng> rngs, float* out, std::int64_t n, std::int64_t stride) {
  std::size_t r = 0;
#if defined(__x86_64__)
  if (has_avx512f())
    for (; r + kLanes <= rngs.size(); r += kLanes)
      fill_eight_rows(rngs.subspan(r, kLanes), out + static_cast<std::int64_t>(r) * stride, n,
                      stride);
#endif
  fill_row_by_row(rngs.subspan(r), out + static_cast<std::int64_t>(r) * stride, n, stride);
}

}  // namespace tandem
