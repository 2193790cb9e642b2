// Private (CUDA module): float32 operands rounded to a 16-bit float for the mixed-precision
// products (util/precision.hpp's bf16 and fp16): bfloat16 (8-bit mantissa, float32's exponent
// range) or IEEE half (10-bit mantissa, largest finite 65504), each to the nearest value, ties to
// even — the rounding the CPU backend's oneDNN reorders use. Values beyond half's range become
// infinities (what dynamic loss scaling catches).
// Ownership: none. Thread-safety: the launcher queues on the given stream, any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

enum class LowFloat { bf16, fp16 };

/// out[i] = the 16-bit pattern of x[i] rounded to `type`, for i < n.
void round_to_low(const float* x, std::uint16_t* out, std::int64_t n, LowFloat type,
                  cudaStream_t stream);

}  // namespace tandem::cuda
