#include "cuda/ops/activations.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "backend/kernel_math.hpp"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

__device__ std::int64_t first_index() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__global__ void forward_kernel(nn::ActivationKind kind, const float* in, float* out,
                               std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = backend::math::activation_value(kind, in[i]);
}

__global__ void backward_kernel(nn::ActivationKind kind, const float* in, const float* out,
                                const float* grad_out, float* grad_in, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    grad_in[i] = backend::math::activation_grad(kind, in ? in[i] : 0.0f, out ? out[i] : 0.0f, grad_out[i]);
}

__global__ void log_softmax_kernel(const float* in, float* out, std::int64_t rows,
                                   std::int64_t cols) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride())
    backend::math::log_softmax_row(in + r * cols, out + r * cols, cols);
}

__global__ void log_softmax_backward_kernel(const float* out, const float* grad_out,
                                            float* grad_in, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride())
    backend::math::log_softmax_row_backward(out + r * cols, grad_out + r * cols,
                                            grad_in + r * cols, cols);
}

// One thread per row: each row's sums are added in column order, as the CPU adds them.
__global__ void softmax_kernel(const float* in, float* out, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride())
    backend::math::softmax_row(in + r * cols, out + r * cols, cols);
}

__global__ void softmax_backward_kernel(const float* out, const float* grad_out, float* grad_in,
                                        std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride())
    backend::math::softmax_row_backward(out + r * cols, grad_out + r * cols, grad_in + r * cols, cols);
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, std::int64_t rows,
                               std::int64_t cols, std::uint64_t stream_key,
                               const std::uint64_t* calls, std::int64_t offset,
                               std::uint64_t keep_below, float scale, backend::AxisGroups noise) {
  const std::int64_t n = rows * cols;
  const std::uint64_t step_key = backend::math::dropout_step_key(stream_key, *calls);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t r = i / cols, c = i - r * cols;
    const float m = backend::math::dropout_mask(backend::math::dropout_row_key(step_key, offset + r),
                                                backend::math::dropout_column(noise, c),
                                                keep_below, scale);
    mask[i] = m;
    y[i] = backend::math::fmul(x[i], m);
  }
}

// The values of one noise draw: value(row key, column) per element (kernel_math's normal_noise
// or uniform_noise), keyed as dropout's masks.
enum class Noise { normal, uniform };

template <Noise kNoise>
__global__ void noise_kernel(float* noise, std::int64_t rows, std::int64_t cols,
                             std::uint64_t stream_key, const std::uint64_t* calls,
                             std::int64_t offset) {
  const std::int64_t n = rows * cols;
  const std::uint64_t step_key = backend::math::dropout_step_key(stream_key, *calls);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t r = i / cols, c = i - r * cols;
    const std::uint64_t row_key = backend::math::dropout_row_key(step_key, offset + r);
    noise[i] = kNoise == Noise::normal ? backend::math::normal_noise(row_key, c)
                                       : backend::math::uniform_noise(row_key, c);
  }
}

// Queues one draw and counts the call.
template <Noise kNoise>
void draw_noise(float* noise, std::int64_t rows, std::int64_t cols, std::uint64_t stream_key,
                std::uint64_t* calls, std::int64_t offset, cudaStream_t stream, const char* what) {
  const std::int64_t n = rows * cols;
  if (n > 0) {
    noise_kernel<kNoise><<<blocks_for(n), kThreads, 0, stream>>>(noise, rows, cols, stream_key,
                                                                 calls, offset);
    check(cudaGetLastError(), what);
  }
  count_dropout_call(calls, stream);
}

// After dropout_kernel on the same stream: the next call draws the next mask.
__global__ void count_call_kernel(std::uint64_t* calls) {
  ++*calls;
}

__global__ void set_calls_kernel(std::uint64_t* calls, std::uint64_t value) {
  *calls = value;
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = backend::math::fmul(a[i], b[i]);
}

__global__ void add_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = backend::math::fadd(a[i], b[i]);
}

__global__ void add_relu_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = backend::math::activation_value(nn::ActivationKind::relu,
                                             backend::math::fadd(a[i], b[i]));
}

}  // namespace

void activation_forward(nn::ActivationKind kind, const float* in, float* out, std::int64_t rows,
                        std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  if (kind == nn::ActivationKind::linear) {
    if (in != out)
      check(cudaMemcpyAsync(out, in, static_cast<std::size_t>(n) * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (linear activation)");
    return;
  }
  if (kind == nn::ActivationKind::softmax) {
    softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(in, out, rows, cols);
    check(cudaGetLastError(), "softmax");
    return;
  }
  if (kind == nn::ActivationKind::log_softmax) {
    log_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(in, out, rows, cols);
    check(cudaGetLastError(), "log_softmax");
    return;
  }
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kind, in, out, n);
  check(cudaGetLastError(), "activation_forward");
}

void activation_backward(nn::ActivationKind kind, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  if (kind == nn::ActivationKind::linear) {  // a copy, subnormals kept, as the CPU's memcpy
    if (grad_in != grad_out)
      check(cudaMemcpyAsync(grad_in, grad_out, static_cast<std::size_t>(n) * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (linear activation backward)");
    return;
  }
  if (kind == nn::ActivationKind::softmax) {
    softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(out, grad_out, grad_in, rows,
                                                                       cols);
    check(cudaGetLastError(), "softmax backward");
    return;
  }
  if (kind == nn::ActivationKind::log_softmax) {
    log_softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(out, grad_out, grad_in,
                                                                           rows, cols);
    check(cudaGetLastError(), "log_softmax backward");
    return;
  }
  backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kind, in, out, grad_out, grad_in, n);
  check(cudaGetLastError(), "activation_backward");
}

void dropout_forward(const float* x, float* y, float* mask, std::int64_t rows, std::int64_t cols,
                     std::uint64_t stream_key, std::uint64_t* calls, std::int64_t offset,
                     double rate, const backend::AxisGroups& noise, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n > 0) {
    dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        x, y, mask, rows, cols, stream_key, calls, offset, backend::math::dropout_keep_below(rate),
        backend::math::dropout_scale(rate), noise);
    check(cudaGetLastError(), "dropout_forward");
  }
  // Counted even for an empty shard, as the host layer counts every training forward.
  count_dropout_call(calls, stream);
}

void normal_noise(float* noise, std::int64_t rows, std::int64_t cols, std::uint64_t stream_key,
                  std::uint64_t* calls, std::int64_t offset, cudaStream_t stream) {
  draw_noise<Noise::normal>(noise, rows, cols, stream_key, calls, offset, stream, "normal_noise");
}

void uniform_noise(float* noise, std::int64_t rows, std::int64_t cols, std::uint64_t stream_key,
                   std::uint64_t* calls, std::int64_t offset, cudaStream_t stream) {
  draw_noise<Noise::uniform>(noise, rows, cols, stream_key, calls, offset, stream, "uniform_noise");
}

void set_dropout_calls(std::uint64_t* calls, std::uint64_t value, cudaStream_t stream) {
  set_calls_kernel<<<1, 1, 0, stream>>>(calls, value);
  check(cudaGetLastError(), "Dropout's call count");
}

void count_dropout_call(std::uint64_t* calls, cudaStream_t stream) {
  count_call_kernel<<<1, 1, 0, stream>>>(calls);
  check(cudaGetLastError(), "Dropout's call count");
}

void multiply(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  multiply_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  check(cudaGetLastError(), "multiply");
}

void add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  check(cudaGetLastError(), "add");
}

void add_relu(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  check(cudaGetLastError(), "add_relu");
}

}  // namespace tandem::cuda
