// Private (CUDA module): the optimizers of optim/ (SGD with momentum and Nesterov, Adam, AdamW,
// amsgrad, RMSprop with momentum and centering; decoupled weight decay; clipvalue, clipnorm per
// parameter tensor, global_clipnorm) as one fused update over a flat array of every trainable
// parameter. The element-wise arithmetic is device_math.hpp's: equal to the CPU backend's bit for
// bit. The gradient norms for clipnorm/global_clipnorm are sums of squares in double in a fixed
// order (tiles of 8192 values, each a fixed tree; no atomics), so the same bits run to run; the
// CPU adds the same squares in a single sequential pass, so the norms can differ from it in the
// last bits of the double (see optimizer_update.cu).
//
// The backend::OptimizerDesc of a host Optimizer: Optimizer::desc(). Launchers queue work on
// `stream` and return at once; pointers are device memory of the current device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/kernel_math.hpp"

namespace tandem::cuda {

/// Floats of device scratch optimizer_update() needs for the norms of clipnorm and
/// global_clipnorm (it needs none without them: scratch may then be null). The scratch must be
/// 8-byte aligned (it holds doubles).
std::int64_t optimizer_scratch_floats(std::int64_t n, const std::vector<std::int64_t>& segments);

/// One optimizer step over a flat array of every trainable parameter: w and g (n floats each),
/// slots[s] (n floats each, in slot_names() order, the same flat layout as w; backend::math::
/// optimizer_slot_count(o) of them, use_ema's averages last). segments = the start offset of each
/// parameter tensor, in the host optimizer's parameter order, then n (clipnorm is per tensor).
/// `step` counts from 1 (the host Optimizer's iterations() after its increment), `lr` is the
/// current learning rate. g is not modified (the clipped gradient exists only inside the update, as
/// on the CPU). Throws RunError for arguments that do not fit together.
void optimizer_update(const backend::OptimizerDesc& o, float* w, const float* g,
                      const std::vector<float*>& slots, std::int64_t n,
                      const std::vector<std::int64_t>& segments, std::int64_t step, double lr,
                      float* scratch, cudaStream_t stream);

}  // namespace tandem::cuda
