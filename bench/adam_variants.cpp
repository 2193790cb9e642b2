#include "adam_variants.hpp"

#include <cmath>

#include "backend/cpu/parallel.hpp"

namespace bench {

namespace {

constexpr std::int64_t kChunk = 1 << 15;  // as core/src/optim/optimizers.cpp

inline void adam_range(float* w, const float* g, float* m, float* v, std::int64_t b, std::int64_t e,
                       float alpha, float b1, float b2, float eps) {
  for (std::int64_t k = b; k < e; ++k) {
    m[k] += (g[k] - m[k]) * (1.0f - b1);
    v[k] += (g[k] * g[k] - v[k]) * (1.0f - b2);
    w[k] -= (m[k] * alpha) / (std::sqrt(v[k]) + eps);
  }
}

__attribute__((target("avx512f,avx512vl,fma"))) void adam_range_avx512(
    float* w, const float* g, float* m, float* v, std::int64_t b, std::int64_t e, float alpha,
    float b1, float b2, float eps) {
  for (std::int64_t k = b; k < e; ++k) {
    m[k] += (g[k] - m[k]) * (1.0f - b1);
    v[k] += (g[k] * g[k] - v[k]) * (1.0f - b2);
    w[k] -= (m[k] * alpha) / (std::sqrt(v[k]) + eps);
  }
}

}  // namespace

void adam_sse2(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha, float b1,
               float b2, float eps) {
  tandem::cpu::parallel_for(n, kChunk, [&](std::int64_t b, std::int64_t e) {
    adam_range(w, g, m, v, b, e, alpha, b1, b2, eps);
  });
}

void adam_avx512(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha,
                 float b1, float b2, float eps) {
  tandem::cpu::parallel_for(n, kChunk, [&](std::int64_t b, std::int64_t e) {
    adam_range_avx512(w, g, m, v, b, e, alpha, b1, b2, eps);
  });
}

bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
}

void stream_7(float* w, const float* g, float* m, float* v, std::int64_t n) {
  tandem::cpu::parallel_for(n, kChunk, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) {
      m[k] = 0.5f * m[k] + g[k];
      v[k] = 0.5f * v[k] + g[k];
      w[k] = w[k] - 1e-9f * (m[k] + v[k]);
    }
  });
}

}  // namespace bench
