#include <cmath>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/kernels.hpp"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kColumnChunk = 256;  // rows per partial column sum
constexpr std::int64_t kMaxGridRows = 65535;  // CUDA's limit on gridDim.y
constexpr float kEpsilon = 1e-7f;           // Keras' backend epsilon

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

__device__ float activate(float z, Activation act) {
  switch (act) {
    case Activation::relu:
      return z > 0.0f ? z : 0.0f;
    case Activation::tanh:
      return tanhf(z);
    case Activation::sigmoid:
      return z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
    default:
      return z;
  }
}

__global__ void bias_activation_kernel(float* y, const float* bias, std::int64_t rows,
                                       std::int64_t cols, Activation act) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float z = bias ? y[i] + bias[i % cols] : y[i];
    y[i] = activate(z, act);
  }
}

__global__ void activation_backward_kernel(const float* y, const float* dy, float* dz,
                                           std::int64_t n, Activation act) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float out = y[i];
    float d;
    switch (act) {
      case Activation::relu:
        d = out > 0.0f ? dy[i] : 0.0f;
        break;
      case Activation::tanh:
        d = __fmul_rn(dy[i], __fsub_rn(1.0f, __fmul_rn(out, out)));
        break;
      case Activation::sigmoid:
        d = __fmul_rn(dy[i], __fmul_rn(out, __fsub_rn(1.0f, out)));
        break;
      default:
        d = dy[i];
    }
    dz[i] = d;
  }
}

// Stage 1: partial[chunk, c] = sum of x[r, c] over the chunk's rows, in row order.
// Each block row takes chunks blockIdx.y, blockIdx.y + gridDim.y, ...: a grid has at most 65535
// block rows, and a batch of 64 images of 512 x 512 has 65536 chunks of rows.
__global__ void column_partials_kernel(const float* x, float* partial, std::int64_t rows,
                                       std::int64_t cols) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t chunks = (rows + kColumnChunk - 1) / kColumnChunk;
  for (std::int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const std::int64_t begin = chunk * kColumnChunk;
    const std::int64_t end = begin + kColumnChunk < rows ? begin + kColumnChunk : rows;
    float s = 0.0f;
    for (std::int64_t r = begin; r < end; ++r) s += x[r * cols + c];
    partial[chunk * cols + c] = s;
  }
}

// Stage 2: out[c] = sum of the partials in chunk order.
__global__ void column_finish_kernel(const float* partial, float* out, std::int64_t chunks,
                                     std::int64_t cols) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (std::int64_t k = 0; k < chunks; ++k) s += partial[k * cols + c];
  out[c] = s;
}

__global__ void binary_crossentropy_kernel(const float* pred, const float* target,
                                           std::int64_t rows, std::int64_t cols, bool from_logits,
                                           float smoothing, float grad_scale, float* row_loss,
                                           float* grad) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float gs = grad_scale / static_cast<float>(cols);
  double s = 0;
  for (std::int64_t i = r * cols; i < (r + 1) * cols; ++i) {
    const float t = target[i] * (1.0f - smoothing) + 0.5f * smoothing;
    const float x = pred[i];
    if (from_logits) {
      s += fmaxf(x, 0.0f) - x * t + log1pf(expf(-fabsf(x)));
      if (grad) {
        const float sig = x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
        grad[i] = (sig - t) * gs;
      }
    } else {
      const bool clipped = x < kEpsilon || x > 1.0f - kEpsilon;
      const float q = fminf(fmaxf(x, kEpsilon), 1.0f - kEpsilon);
      s += -(t * logf(q + kEpsilon) + (1.0f - t) * logf(1.0f - q + kEpsilon));
      if (grad)
        grad[i] = clipped ? 0.0f : (-t / (q + kEpsilon) + (1.0f - t) / (1.0f - q + kEpsilon)) * gs;
    }
  }
  row_loss[r] = static_cast<float>(s / static_cast<double>(cols));
}

__global__ void sparse_cce_kernel(const float* pred, const float* labels, std::int64_t rows,
                                  std::int64_t classes, bool from_logits, float grad_scale,
                                  float* row_loss, float* grad) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* p = pred + r * classes;
  float* g = grad ? grad + r * classes : nullptr;
  const float label = labels[r];
  const std::int64_t k = static_cast<std::int64_t>(label);
  if (!(label >= 0.0f) || k >= classes || static_cast<float>(k) != label) {
    row_loss[r] = nanf("");
    if (g)
      for (std::int64_t c = 0; c < classes; ++c) g[c] = nanf("");
    return;
  }
  // The CPU backend's arithmetic (double where it uses double), so both agree to float rounding.
  if (from_logits) {
    float mx = p[0];
    for (std::int64_t c = 1; c < classes; ++c) mx = fmaxf(mx, p[c]);
    double z = 0;
    for (std::int64_t c = 0; c < classes; ++c) z += exp(static_cast<double>(p[c] - mx));
    const double log_z = log(z) + mx;
    row_loss[r] = static_cast<float>(-(p[k] - log_z));
    if (g)
      for (std::int64_t c = 0; c < classes; ++c)
        g[c] = static_cast<float>(exp(p[c] - log_z) - (c == k ? 1.0 : 0.0)) * grad_scale;
  } else {
    // Keras: q = p / sum(p), clipped to [eps, 1 - eps]; loss -log q[k]; no gradient through an
    // active clip.
    double s = 0;
    for (std::int64_t c = 0; c < classes; ++c) s += p[c];
    const double q = p[k] / s;
    const bool active = q >= kEpsilon && q <= 1.0 - kEpsilon;
    const double qc = fmin(fmax(q, static_cast<double>(kEpsilon)), 1.0 - kEpsilon);
    row_loss[r] = static_cast<float>(-log(qc));
    if (g)
      for (std::int64_t c = 0; c < classes; ++c) {
        const double own = (active && c == k) ? -1.0 / q : 0.0;
        g[c] = static_cast<float>((own + (active ? 1.0 : 0.0)) / s) * grad_scale;
      }
  }
}

__global__ void binary_accuracy_kernel(const float* pred, const float* target, std::int64_t rows,
                                       std::int64_t cols, float threshold, float* row_value) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  float hits = 0;
  for (std::int64_t i = r * cols; i < (r + 1) * cols; ++i)
    hits += ((pred[i] > threshold) == (target[i] > 0.5f)) ? 1.0f : 0.0f;
  row_value[r] = hits / static_cast<float>(cols);
}

__global__ void sparse_accuracy_kernel(const float* pred, const float* labels, std::int64_t rows,
                                       std::int64_t classes, float* row_value) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* p = pred + r * classes;
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < classes; ++c)
    if (p[c] > p[best]) best = c;  // the first maximum, as argmax
  row_value[r] = static_cast<float>(best) == labels[r] ? 1.0f : 0.0f;
}

__global__ void sum_kernel(const float* x, std::int64_t n, double* out) {
  __shared__ double partial[1024];
  double s = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n,
                            float alpha, float b1, float b2, float eps) {
  const float one_minus_b1 = __fsub_rn(1.0f, b1), one_minus_b2 = __fsub_rn(1.0f, b2);
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float gk = g[k];
    const float mk = __fadd_rn(m[k], __fmul_rn(__fsub_rn(gk, m[k]), one_minus_b1));
    const float vk = __fadd_rn(v[k], __fmul_rn(__fsub_rn(__fmul_rn(gk, gk), v[k]), one_minus_b2));
    m[k] = mk;
    v[k] = vk;
    w[k] = __fsub_rn(w[k], __fdiv_rn(__fmul_rn(mk, alpha), __fadd_rn(__fsqrt_rn(vk), eps)));
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* m, std::int64_t n, float lr, float mu,
                           bool nesterov) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float step = __fmul_rn(lr, g[k]);
    if (!m) {
      w[k] = __fsub_rn(w[k], step);
      continue;
    }
    const float mk = __fsub_rn(__fmul_rn(mu, m[k]), step);
    m[k] = mk;
    w[k] = __fadd_rn(w[k], nesterov ? __fsub_rn(__fmul_rn(mu, mk), step) : mk);
  }
}

__global__ void fill_kernel(float* x, std::int64_t n, float value) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

__global__ void scale_kernel(float* x, std::int64_t n, float factor) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(x[i], factor);
}

}  // namespace

void bias_activation(float* y, const float* bias, std::int64_t rows, std::int64_t cols,
                     Activation act, cudaStream_t stream) {
  if (rows * cols == 0 || (!bias && act == Activation::linear)) return;
  bias_activation_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(y, bias, rows, cols,
                                                                           act);
  check_launch("bias_activation");
}

void activation_backward(const float* y, const float* dy, float* dz, std::int64_t n, Activation act,
                         cudaStream_t stream) {
  if (n == 0) return;
  if (act == Activation::linear && dz == dy) return;
  activation_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dz, n, act);
  check_launch("activation_backward");
}

std::int64_t column_sums_scratch(std::int64_t rows, std::int64_t cols) {
  return ((rows + kColumnChunk - 1) / kColumnChunk) * cols;
}

void column_sums(const float* x, float* out, std::int64_t rows, std::int64_t cols, float* scratch,
                 cudaStream_t stream) {
  if (cols == 0) return;
  const std::int64_t chunks = (rows + kColumnChunk - 1) / kColumnChunk;
  const int col_blocks = static_cast<int>((cols + kThreads - 1) / kThreads);
  if (chunks == 0) {
    check(cudaMemsetAsync(out, 0, static_cast<std::size_t>(cols) * sizeof(float), stream),
          "cudaMemsetAsync");
    return;
  }
  const auto block_rows = static_cast<unsigned>(chunks < kMaxGridRows ? chunks : kMaxGridRows);
  column_partials_kernel<<<dim3(col_blocks, block_rows), kThreads, 0, stream>>>(x, scratch, rows,
                                                                                cols);
  check_launch("column_sums (partials)");
  column_finish_kernel<<<col_blocks, kThreads, 0, stream>>>(scratch, out, chunks, cols);
  check_launch("column_sums (finish)");
}

void binary_crossentropy(const float* pred, const float* target, std::int64_t rows,
                         std::int64_t cols, bool from_logits, float label_smoothing,
                         float grad_scale, float* row_loss, float* grad, cudaStream_t stream) {
  if (rows == 0) return;
  binary_crossentropy_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      pred, target, rows, cols, from_logits, label_smoothing, grad_scale, row_loss, grad);
  check_launch("binary_crossentropy");
}

void sparse_categorical_crossentropy(const float* pred, const float* labels, std::int64_t rows,
                                     std::int64_t classes, bool from_logits, float grad_scale,
                                     float* row_loss, float* grad, cudaStream_t stream) {
  if (rows == 0) return;
  sparse_cce_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      pred, labels, rows, classes, from_logits, grad_scale, row_loss, grad);
  check_launch("sparse_categorical_crossentropy");
}

void binary_accuracy(const float* pred, const float* target, std::int64_t rows, std::int64_t cols,
                     float threshold, float* row_value, cudaStream_t stream) {
  if (rows == 0) return;
  binary_accuracy_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(pred, target, rows, cols,
                                                                    threshold, row_value);
  check_launch("binary_accuracy");
}

void sparse_categorical_accuracy(const float* pred, const float* labels, std::int64_t rows,
                                 std::int64_t classes, float* row_value, cudaStream_t stream) {
  if (rows == 0) return;
  sparse_accuracy_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(pred, labels, rows, classes,
                                                                    row_value);
  check_launch("sparse_categorical_accuracy");
}

void sum(const float* x, std::int64_t n, double* out, cudaStream_t stream) {
  sum_kernel<<<1, 1024, 0, stream>>>(x, n, out);
  check_launch("sum");
}

void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, float alpha,
                 float beta_1, float beta_2, float epsilon, cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, m, v, n, alpha, beta_1, beta_2,
                                                      epsilon);
  check_launch("adam_update");
}

void sgd_update(float* w, const float* g, float* m, std::int64_t n, float lr, float momentum,
                bool nesterov, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, momentum > 0 ? m : nullptr, n, lr,
                                                     momentum, nesterov);
  check_launch("sgd_update");
}

void scale(float* x, std::int64_t n, float factor, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, factor);
  check_launch("scale");
}

void fill(float* x, std::int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  check_launch("fill");
}

}  // namespace tandem::cuda
