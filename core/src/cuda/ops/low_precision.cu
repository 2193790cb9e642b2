#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/ops/launch.cuh"
#include "cuda/ops/low_precision.hpp"

namespace tandem::cuda {

namespace {

__global__ void round_to_bf16_kernel(const float* x, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

__global__ void round_to_fp16_kernel(const float* x, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = grid_first(); i < n; i += grid_step())
    out[i] = __half_as_ushort(__float2half_rn(x[i]));
}

}  // namespace

void round_to_low(const float* x, std::uint16_t* out, std::int64_t n, LowFloat type,
                  cudaStream_t stream) {
  if (n <= 0) return;
  if (type == LowFloat::bf16)
    round_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, out, n);
  else
    round_to_fp16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, out, n);
  check_launch("rounding to a 16-bit float");
}

}  // namespace tandem::cuda
