// Private (CUDA module): every Keras activation of nn/activation_fn.hpp on the device, and
// Dropout's mask. The arithmetic is device_math.hpp's (the CPU backend's formulas: see there for
// what equals the CPU bit for bit and what agrees to a few ulp). Launchers queue work on `stream`
// and return at once; pointers are device memory of the current device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/axis_groups.hpp"
#include "nn/activation_fn.hpp"

namespace tandem::cuda {

/// out = f(in) over rows x cols (softmax per row, numerically stable); in == out allowed.
void activation_forward(nn::ActivationKind kind, const float* in, float* out, std::int64_t rows,
                        std::int64_t cols, cudaStream_t stream);

/// grad_in = grad_out * f'(in), given in (pre-activation) and out (activation); grad_in may
/// alias grad_out.
void activation_backward(nn::ActivationKind kind, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream);

/// Dropout: mask[i] = 1/(1 - rate) or 0, bit for bit nn::Dropout's mask, and y = x * mask, over
/// rows x cols whose first row is sample `offset` of the global batch. `stream_key` is the host
/// layer's random stream; `calls` points to its call count in device memory (random_state()'s
/// second number), read by the mask and then incremented on the device, as Dropout::forward
/// counts its calls: so a captured step replayed from a CUDA graph draws a new mask each time.
/// y may be x. Only for training with rate > 0 (the layer is the identity otherwise).
/// `noise`: Keras' noise_shape (backend::DropoutDesc::noise).
void dropout_forward(const float* x, float* y, float* mask, std::int64_t rows, std::int64_t cols,
                     std::uint64_t stream_key, std::uint64_t* calls, std::int64_t offset,
                     double rate, const backend::AxisGroups& noise, cudaStream_t stream);
/// noise = standard normal values over rows x cols, bit for bit the host's but for log and cos
/// (kernel_math's normal_noise), keyed and counted in `calls` as dropout_forward.
void normal_noise(float* noise, std::int64_t rows, std::int64_t cols, std::uint64_t stream_key,
                  std::uint64_t* calls, std::int64_t offset, cudaStream_t stream);
/// noise = uniform values in [0, 1) over rows x cols, bit for bit the host's (kernel_math's
/// uniform_noise), keyed and counted in `calls` as dropout_forward.
void uniform_noise(float* noise, std::int64_t rows, std::int64_t cols, std::uint64_t stream_key,
                   std::uint64_t* calls, std::int64_t offset, cudaStream_t stream);
/// *calls = value on the device, queued on `stream` (no synchronization).
void set_dropout_calls(std::uint64_t* calls, std::uint64_t value, cudaStream_t stream);
/// ++*calls on the device: a training forward of Dropout that had no rows to mask.
void count_dropout_call(std::uint64_t* calls, cudaStream_t stream);

/// out = a * b element-wise (Dropout's backward: dx = dy * mask); out may be a or b.
void multiply(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);
/// out = a + b element-wise (out may be a or b).
void add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);
/// out = max(0, a + b) (kernel_math's relu of the float sum).
void add_relu(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace tandem::cuda
