// Diagnostic kernels for tandem_bench: the Adam update of core/src/optim/optimizers.cpp written
// so that the compiler vectorises it (this file is built with -fno-math-errno), and a plain
// streaming kernel with the same memory traffic (4 arrays read, 3 written) as a bandwidth bound.
#pragma once

#include <cstdint>

namespace bench {

/// Same arithmetic as the engine's Adam (Keras form): m += (g - m)(1 - b1); v += (g² - v)(1 - b2);
/// w -= alpha m / (sqrt(v) + eps). Baseline x86-64 ISA (SSE2), vectorised.
void adam_sse2(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha, float b1,
               float b2, float eps);
/// The same with AVX-512 code (call only when has_avx512()).
void adam_avx512(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha,
                 float b1, float b2, float eps);
bool has_avx512();
/// Reads w, g, m, v and writes w, m, v (trivial arithmetic): the memory-traffic floor of Adam.
void stream_7(float* w, const float* g, float* m, float* v, std::int64_t n);

}  // namespace bench
