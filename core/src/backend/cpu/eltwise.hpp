// Element-wise transcendental functions through oneDNN's JIT eltwise primitives (AVX-512 where
// the CPU has it). libm's scalar tanhf/expf are ~50x slower on large tensors (measured:
// tanh over 256x4000 floats, 8.0 ms with std::tanh, 0.15 ms with oneDNN).
#pragma once

#include <cstdint>

namespace tandem::cpu {

enum class Eltwise { tanh, logistic, gelu_erf, elu, exp, swish, soft_relu };

/// out[i] = f(in[i]) for i < n; in == out allowed. Primitives are created once per (function,
/// size) and cached. Thread-safe.
void eltwise_forward(Eltwise function, const float* in, float* out, std::int64_t n);

}  // namespace tandem::cpu
