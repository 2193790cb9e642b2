// The CPU backend's movement, GEMM, activation, dropout, embedding and global-pooling operations.
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/bf16_rate.hpp"
#include "backend/cpu/eltwise.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::backend {

namespace {

// s[c] = the sum of column c of g (rows x cols), rows in order, for c in [c0, c1). Compiled for
// AVX-512 as well (avx512_copy.hpp): the baseline's SSE2 adds 4 columns at a time. The order of
// the sums is the same in both.
[[gnu::always_inline]] inline void sum_columns(const float* g, std::int64_t rows, std::int64_t cols,
                                               std::int64_t c0, std::int64_t c1, float* s) {
  for (std::int64_t c = c0; c < c1; ++c) s[c] = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * cols;
    for (std::int64_t c = c0; c < c1; ++c) s[c] += gr[c];
  }
}

std::int64_t rows_of(std::int64_t size, std::int64_t cols) {
  return cols > 0 ? size / cols : 0;
}

// out[i] = f(in[i]) over n values, in parallel.
template <class F>
void map(const float* in, float* out, std::int64_t n, F f) {
  cpu::parallel_for(n, cpu::kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = f(in[i]);
  });
}

// grad_in = grad_out * f'(x, y) for one activation kind, a compile-time constant so that each
// kind's loop is specialised (and vectorised) on its own.
// The loops are compiled for AVX-512 as well (avx512_copy.hpp): the same operations on each
// element, so the same bits.
template <ActivationKind kKind>
[[gnu::always_inline]] inline void chain_range(const float* x, const float* y, const float* go,
                                               float* gi, std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) gi[i] = math::activation_grad(kKind, x[i], y[i], go[i]);
}

template <ActivationKind kKind>
void chain(const float* x, const float* y, const float* go, float* gi, std::int64_t n) {
  cpu::parallel_for(n, cpu::kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    cpu::run_loop<&chain_range<kKind>>(x, y, go, gi, b, e);
  });
}

template <bool kRelu>
[[gnu::always_inline]] inline void add_range(const float* a, const float* b, float* out,
                                             std::int64_t s, std::int64_t e) {
  for (std::int64_t i = s; i < e; ++i) {
    const float sum = math::fadd(a[i], b[i]);
    out[i] = kRelu ? math::activation_value(ActivationKind::relu, sum) : sum;
  }
}

// out = a + b, and with kRelu max(0, that), element-wise on the CPU backend's tensors.
template <bool kRelu>
void sum_elements(const Backend& cpu, const Tensor& a, const Tensor& b, Tensor& out,
                  const char* operation) {
  require_device(cpu, a, operation);
  require_device(cpu, b, operation);
  require_device(cpu, out, operation);
  check_same_sizes(a.size(), b.size(), out.size(), operation);
  const float* ap = a.data();
  const float* bp = b.data();
  float* op = out.data();
  cpu::parallel_for(out.size(), cpu::kMemoryBoundChunk, [&](std::int64_t s, std::int64_t e) {
    cpu::run_loop<&add_range<kRelu>>(ap, bp, op, s, e);
  });
}

// f(row r) for every row, rows split by threads in contiguous ranges.
template <class F>
void for_rows(std::int64_t rows, std::int64_t cols, F f) {
  cpu::parallel_for(rows, std::max<std::int64_t>(1, cpu::kMemoryBoundChunk / std::max<std::int64_t>(cols, 1)),
                    [&](std::int64_t b, std::int64_t e) {
                      for (std::int64_t r = b; r < e; ++r) f(r);
                    });
}

// A batch of products split across threads by the batch index (attention's are small; oneDNN
// runs each on its caller's thread inside the parallel region); in bfloat16 one batched matmul.
void batched_gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, Tensor& c,
                  bool bf16_products) {
  check_batched_gemm(d, a, b, c);
  if (bf16_products)
    return cpu::gemm_bf16(d.trans_a, d.trans_b, d.m, d.n, d.k, d.batch, a.data(), b.data(),
                          nullptr, c.data());
  const std::int64_t flops = 2 * d.m * d.n * std::max<std::int64_t>(d.k, 1);
  cpu::parallel_for(d.batch, std::max<std::int64_t>(1, (1 << 18) / std::max<std::int64_t>(flops, 1)),
                    [&](std::int64_t i0, std::int64_t i1) {
                      for (std::int64_t i = i0; i < i1; ++i)
                        cpu::gemm(d.trans_a, d.trans_b, d.m, d.n, d.k, 1.0f,
                                  a.data() + i * d.m * d.k, d.trans_a ? d.m : d.k,
                                  b.data() + i * d.k * d.n, d.trans_b ? d.k : d.n, 0.0f,
                                  c.data() + i * d.m * d.n, d.n);
                    });
}

// C = op(A) op(B) (+ bias per column) in float32: the bias rows copied into C, then sgemm
// adds the product.
void gemm_fp32(const GemmDesc& d, const Tensor& a, const Tensor& b, const Tensor* bias, float* cp) {
  if (bias) {
    const float* bp = bias->data();
    const std::int64_t n = d.n;
    cpu::parallel_for(d.m, 256, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) std::copy(bp, bp + n, cp + r * n);
    });
  }
  cpu::gemm(d.trans_a, d.trans_b, d.m, d.n, d.k, 1.0f, a.data(), d.trans_a ? d.m : d.k, b.data(),
            d.trans_b ? d.k : d.n, bias ? 1.0f : 0.0f, cp, d.n);
}

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend(false);
  return backend;
}

Backend& cpu_backend(Precision precision) {
  switch (precision) {
    case Precision::fp32:
    case Precision::tf32: return cpu_backend();
    case Precision::bf16: {
      static CpuBackend backend(true);
      return backend;
    }
    case Precision::fp16: break;
  }
  throw std::invalid_argument("no CPU backend computes in " + precision_name(precision));
}

std::string cpu_precision_unavailable(Precision precision) {
  if (precision == Precision::bf16) return cpu::bf16_unavailable();
  if (precision == Precision::fp16)
    return "fp16 products run on CUDA GPUs only; a CPU computes bf16 (or fp32)";
  return "";
}

std::optional<double> cpu_bf16_product_rate() { return cpu::bf16_product_rate(); }

std::string cpu_precision_warning(Precision precision) {
  if (precision != Precision::bf16) return "";
  const std::optional<double> rate = cpu::bf16_product_rate();
  return rate ? cpu::bf16_slower_warning(*rate) : "";
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  require_device(*this, src, "copy");
  require_device(*this, dst, "copy");
  dst.copy_from(src);
}

void CpuBackend::fill(Tensor& t, float value) {
  require_device(*this, t, "fill");
  t.fill(value);
}

void CpuBackend::gemm(const GemmDesc& d, const Tensor& a, const Tensor& b, const Tensor* bias,
                      Tensor& c) {
  require_device(*this, a, "gemm");
  require_device(*this, b, "gemm");
  require_device(*this, c, "gemm");
  if (d.batch != 1) return batched_gemm(d, a, b, c, bf16_products_);
  float* cp = c.data();
  const bool with_bias = d.epilogue != GemmEpilogue::none;
  if (bf16_products_) {
    cpu::gemm_bf16(d.trans_a, d.trans_b, d.m, d.n, d.k, 1, a.data(), b.data(),
                   with_bias ? bias->data() : nullptr, cp);
  } else {
    gemm_fp32(d, a, b, with_bias ? bias : nullptr, cp);
  }
  if (d.epilogue == GemmEpilogue::relu_bias)
    map(cp, cp, d.m * d.n, [](float x) { return math::activation_value(ActivationKind::relu, x); });
}

void CpuBackend::column_sums(const Tensor& x, std::int64_t cols, Tensor& out) {
  require_device(*this, x, "column_sums");
  require_device(*this, out, "column_sums");
  const std::int64_t rows = rows_of(x.size(), cols);
  // Split by columns, so the summation order never depends on threads.
  cpu::parallel_for(cols, std::max<std::int64_t>(64, (1 << 16) / std::max<std::int64_t>(rows, 1)),
                    [&](std::int64_t c0, std::int64_t c1) {
                      cpu::run_loop<sum_columns>(x.data(), rows, cols, c0, c1, out.data());
                    });
}

void CpuBackend::multiply(const Tensor& a, const Tensor& b, Tensor& out) {
  require_device(*this, a, "multiply");
  require_device(*this, b, "multiply");
  require_device(*this, out, "multiply");
  const float* ap = a.data();
  const float* bp = b.data();
  float* op = out.data();
  cpu::parallel_for(out.size(), cpu::kMemoryBoundChunk, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) op[i] = ap[i] * bp[i];
  });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  sum_elements<false>(*this, a, b, out, "add");
}

void CpuBackend::add_relu(const Tensor& a, const Tensor& b, Tensor& out) {
  sum_elements<true>(*this, a, b, out, "add_relu");
}

void CpuBackend::copy_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset,
                              Tensor& dst, std::int64_t dst_cols, std::int64_t dst_offset,
                              std::int64_t width) {
  require_device(*this, src, "copy_columns");
  require_device(*this, dst, "copy_columns");
  const std::int64_t rows = check_columns(src, src_cols, src_offset, dst, dst_cols, dst_offset, width);
  const float* sp = src.data();
  float* dp = dst.data();
  for_rows(rows, width, [&](std::int64_t r) {
    std::memcpy(dp + r * dst_cols + dst_offset, sp + r * src_cols + src_offset,
                static_cast<std::size_t>(width) * sizeof(float));
  });
}

void CpuBackend::activation_forward(ActivationKind kind, const Tensor& in_t, Tensor& out_t,
                                    std::int64_t cols) {
  require_device(*this, in_t, "activation_forward");
  require_device(*this, out_t, "activation_forward");
  const float* in = in_t.data();
  float* out = out_t.data();
  const std::int64_t n = in_t.size();
  // The transcendental kinds run on oneDNN's JIT primitives (~50x libm's scalar speed).
  switch (kind) {
    case ActivationKind::linear:
      if (in != out) std::memcpy(out, in, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case ActivationKind::relu:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::relu, x); });
      return;
    case ActivationKind::selu:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::selu, x); });
      return;
    case ActivationKind::softsign:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::softsign, x); });
      return;
    case ActivationKind::tanh:
      return cpu::eltwise_forward(cpu::Eltwise::tanh, in, out, n);
    case ActivationKind::sigmoid:
      return cpu::eltwise_forward(cpu::Eltwise::logistic, in, out, n);
    case ActivationKind::gelu:
      return cpu::eltwise_forward(cpu::Eltwise::gelu_erf, in, out, n);
    case ActivationKind::elu:
      return cpu::eltwise_forward(cpu::Eltwise::elu, in, out, n);
    case ActivationKind::softplus:
      return cpu::eltwise_forward(cpu::Eltwise::soft_relu, in, out, n);
    case ActivationKind::swish:
      return cpu::eltwise_forward(cpu::Eltwise::swish, in, out, n);
    case ActivationKind::exponential:
      return cpu::eltwise_forward(cpu::Eltwise::exp, in, out, n);
    case ActivationKind::leaky_relu:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::leaky_relu, x); });
      return;
    case ActivationKind::hard_sigmoid:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::hard_sigmoid, x); });
      return;
    case ActivationKind::hard_sigmoid_keras2:
      map(in, out, n,
          [](float x) { return math::activation_value(ActivationKind::hard_sigmoid_keras2, x); });
      return;
    case ActivationKind::hard_swish:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::hard_swish, x); });
      return;
    case ActivationKind::mish:
      map(in, out, n, [](float x) { return math::activation_value(ActivationKind::mish, x); });
      return;
    case ActivationKind::softmax:
      for_rows(rows_of(n, cols), cols,
               [&](std::int64_t r) { math::softmax_row(in + r * cols, out + r * cols, cols); });
      return;
    case ActivationKind::log_softmax:
      for_rows(rows_of(n, cols), cols,
               [&](std::int64_t r) { math::log_softmax_row(in + r * cols, out + r * cols, cols); });
      return;
  }
}

void CpuBackend::activation_backward(ActivationKind kind, const Tensor& in_t, const Tensor& out_t,
                                     const Tensor& grad_out_t, Tensor& grad_in_t,
                                     std::int64_t cols) {
  require_device(*this, grad_out_t, "activation_backward");
  require_device(*this, grad_in_t, "activation_backward");
  const float* x = in_t.data();
  const float* y = out_t.data();
  const float* go = grad_out_t.data();
  float* gi = grad_in_t.data();
  const std::int64_t n = grad_out_t.size();
  using K = ActivationKind;
  switch (kind) {
    case K::linear:
      if (gi != go) std::memcpy(gi, go, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case K::relu:
      return chain<K::relu>(x, y, go, gi, n);
    case K::tanh:
      return chain<K::tanh>(x, y, go, gi, n);
    case K::sigmoid:
      return chain<K::sigmoid>(x, y, go, gi, n);
    case K::gelu:
      return chain<K::gelu>(x, y, go, gi, n);
    case K::elu:
      return chain<K::elu>(x, y, go, gi, n);
    case K::selu:
      return chain<K::selu>(x, y, go, gi, n);
    case K::softplus:
      return chain<K::softplus>(x, y, go, gi, n);
    case K::softsign:
      return chain<K::softsign>(x, y, go, gi, n);
    case K::swish:
      return chain<K::swish>(x, y, go, gi, n);
    case K::exponential:
      return chain<K::exponential>(x, y, go, gi, n);
    case K::leaky_relu:
      return chain<K::leaky_relu>(x, y, go, gi, n);
    case K::hard_sigmoid:
      return chain<K::hard_sigmoid>(x, y, go, gi, n);
    case K::hard_sigmoid_keras2:
      return chain<K::hard_sigmoid_keras2>(x, y, go, gi, n);
    case K::hard_swish:
      return chain<K::hard_swish>(x, y, go, gi, n);
    case K::mish:
      return chain<K::mish>(x, y, go, gi, n);
    case K::softmax:
      for_rows(rows_of(n, cols), cols, [&](std::int64_t r) {
        math::softmax_row_backward(y + r * cols, go + r * cols, gi + r * cols, cols);
      });
      return;
    case K::log_softmax:
      for_rows(rows_of(n, cols), cols, [&](std::int64_t r) {
        math::log_softmax_row_backward(y + r * cols, go + r * cols, gi + r * cols, cols);
      });
      return;
  }
}

void CpuBackend::dropout_forward(const DropoutDesc& d, const Tensor& x, Tensor& y, Tensor& mask,
                                 std::int64_t cols) {
  require_device(*this, x, "dropout_forward");
  const std::int64_t rows = rows_of(x.size(), cols);
  const float scale = math::dropout_scale(d.rate);
  const std::uint64_t keep_below = math::dropout_keep_below(d.rate);
  const std::uint64_t step_key = math::dropout_step_key(d.stream, d.call);
  float* m = mask.data();
  float* yp = y.data();
  const float* xp = x.data();
  for_rows(rows, cols, [&](std::int64_t r) {
    const std::uint64_t row_key = math::dropout_row_key(step_key, d.first_sample + r);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r * cols + c;
      m[i] = math::dropout_mask(row_key, math::dropout_column(d.noise, c), keep_below, scale);
      yp[i] = xp[i] * m[i];
    }
  });
}

void CpuBackend::normal_noise(const DropoutDesc& d, Tensor& noise, std::int64_t cols) {
  require_device(*this, noise, "normal_noise");
  const std::int64_t rows = rows_of(noise.size(), cols);
  const std::uint64_t step_key = math::dropout_step_key(d.stream, d.call);
  float* n = noise.data();
  for_rows(rows, cols, [&](std::int64_t r) {
    const std::uint64_t row_key = math::dropout_row_key(step_key, d.first_sample + r);
    for (std::int64_t c = 0; c < cols; ++c)
      n[r * cols + c] = math::normal_noise(row_key, math::dropout_column(d.noise, c));
  });
}

void CpuBackend::uniform_noise(const DropoutDesc& d, Tensor& noise, std::int64_t cols) {
  require_device(*this, noise, "uniform_noise");
  const std::int64_t rows = rows_of(noise.size(), cols);
  const std::uint64_t step_key = math::dropout_step_key(d.stream, d.call);
  float* n = noise.data();
  for_rows(rows, cols, [&](std::int64_t r) {
    const std::uint64_t row_key = math::dropout_row_key(step_key, d.first_sample + r);
    for (std::int64_t c = 0; c < cols; ++c) n[r * cols + c] = math::uniform_noise(row_key, c);
  });
}

void CpuBackend::global_average_pool_forward(const Tensor& x, Tensor& y, std::int64_t cells,
                                             std::int64_t channels) {
  require_device(*this, x, "global_average_pool_forward");
  const std::int64_t batch = rows_of(x.size(), cells * channels);
  const float* in = x.data();
  float* out = y.data();
  const float scale = 1.0f / static_cast<float>(cells);
  cpu::parallel_for(batch, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cells * channels, 1)),
                    [&](std::int64_t b0, std::int64_t b1) {
                      for (std::int64_t b = b0; b < b1; ++b) {
                        float* yb = out + b * channels;
                        const float* xb = in + b * cells * channels;
                        for (std::int64_t c = 0; c < channels; ++c) yb[c] = 0.0f;
                        for (std::int64_t i = 0; i < cells; ++i)
                          for (std::int64_t c = 0; c < channels; ++c) yb[c] += xb[i * channels + c];
                        for (std::int64_t c = 0; c < channels; ++c) yb[c] *= scale;
                      }
                    });
}

void CpuBackend::global_average_pool_backward(const Tensor& dy, Tensor& dx, std::int64_t cells,
                                              std::int64_t channels) {
  require_device(*this, dy, "global_average_pool_backward");
  const std::int64_t batch = rows_of(dy.size(), channels);
  const float* g = dy.data();
  float* gx = dx.data();
  const float scale = 1.0f / static_cast<float>(cells);
  cpu::parallel_for(batch, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cells * channels, 1)),
                    [&](std::int64_t b0, std::int64_t b1) {
                      for (std::int64_t b = b0; b < b1; ++b) {
                        const float* gb = g + b * channels;
                        float* xb = gx + b * cells * channels;
                        for (std::int64_t i = 0; i < cells; ++i)
                          for (std::int64_t c = 0; c < channels; ++c)
                            xb[i * channels + c] = gb[c] * scale;
                      }
                    });
}

void CpuBackend::adaptive_pool_forward(const AdaptivePoolDesc& desc, const Tensor& x, Tensor& y,
                                       Tensor& arg) {
  require_device(*this, x, "adaptive_pool_forward");
  adaptive_pool_values(desc, x, y, "adaptive_pool_forward");
  if (desc.max) place(arg, y.shape());
  const std::int64_t out_cells = math::adaptive_out_cells(desc), channels = desc.channels,
                     in_values = math::adaptive_in_cells(desc) * channels;
  const float* in = x.data();
  float* out = y.data();
  float* args = desc.max ? arg.data() : nullptr;
  cpu::parallel_for(desc.batch * out_cells, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* sample = in + r / out_cells * in_values;
      float at = 0.0f;
      for (std::int64_t c = 0; c < channels; ++c) {
        out[r * channels + c] = math::adaptive_pool_value(desc, sample, r % out_cells, c, &at);
        if (args) args[r * channels + c] = at;
      }
    }
  });
}

void CpuBackend::adaptive_pool_backward(const AdaptivePoolDesc& desc, const Tensor& dy,
                                        const Tensor& arg, Tensor& dx) {
  require_device(*this, dy, "adaptive_pool_backward");
  adaptive_pool_values(desc, dx, dy, "adaptive_pool_backward");
  const std::int64_t in_cells = math::adaptive_in_cells(desc), channels = desc.channels,
                     out_values = math::adaptive_out_cells(desc) * channels;
  const float* g = dy.data();
  const float* args = desc.max ? arg.data() : nullptr;
  float* gx = dx.data();
  cpu::parallel_for(desc.batch * in_cells, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / in_cells;
      for (std::int64_t c = 0; c < channels; ++c)
        gx[r * channels + c] = math::adaptive_pool_input_gradient(
            desc, g + b * out_values, args ? args + b * out_values : nullptr, r % in_cells, c);
    }
  });
}

std::optional<BadIndex> CpuBackend::embedding_gather(const Tensor& table, const Tensor& x,
                                                     Tensor& y, std::int64_t dim) {
  require_device(*this, x, "embedding_gather");
  const std::int64_t n = x.size();
  const std::int64_t vocab = rows_of(table.size(), dim);
  for (std::int64_t i = 0; i < n; ++i)
    if (math::embedding_index(x[i], vocab) < 0) return BadIndex{i, x[i]};
  const float* tp = table.data();
  const float* xp = x.data();
  float* yp = y.data();
  cpu::parallel_for(n, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(dim, 1)),
                    [&](std::int64_t i0, std::int64_t i1) {
                      for (std::int64_t i = i0; i < i1; ++i)
                        std::memcpy(yp + i * dim, tp + static_cast<std::int64_t>(xp[i]) * dim,
                                    static_cast<std::size_t>(dim) * sizeof(float));
                    });
  return std::nullopt;
}

void CpuBackend::discretize(const Tensor& x, const Tensor& boundaries, Tensor& y) {
  require_device(*this, x, "discretize");
  const float* b = boundaries.data();
  const std::int64_t nb = boundaries.size();
  const float* xp = x.data();
  float* yp = y.data();
  cpu::parallel_for(x.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) yp[i] = static_cast<float>(math::bin_of(xp[i], b, nb));
  });
}

std::optional<BadIndex> CpuBackend::lookup(const math::LookupDesc& desc, const Tensor& x,
                                           const Tensor& keys, const Tensor& values, Tensor& y) {
  require_device(*this, x, "lookup");
  const float* kp = keys.data();
  const float* vp = values.data();
  const std::int64_t nk = keys.size();
  const float* xp = x.data();
  float* yp = y.data();
  for (std::int64_t i = 0; i < x.size(); ++i) {
    bool found = false;
    yp[i] = math::looked_up(xp[i], kp, vp, nk, desc, &found);
    if (!found && desc.refuse_missing) return BadIndex{i, xp[i]};
  }
  return std::nullopt;
}

std::optional<BadIndex> CpuBackend::encode_categories(const Tensor& x, Tensor& y, std::int64_t n,
                                                      std::int64_t inner, std::int64_t depth,
                                                      bool count) {
  require_device(*this, x, "encode_categories");
  for (std::int64_t i = 0; i < x.size(); ++i)
    if (math::embedding_index(x[i], depth) < 0) return BadIndex{i, x[i]};
  const std::int64_t outer = n * inner == 0 ? 0 : x.size() / (n * inner);
  const float* xp = x.data();
  float* yp = y.data();
  std::fill(yp, yp + y.size(), 0.0f);
  cpu::parallel_for(outer, 64, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o)
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t j = 0; j < inner; ++j) {
          float& cell =
              yp[(o * inner + j) * depth + static_cast<std::int64_t>(xp[(o * n + k) * inner + j])];
          cell = count ? cell + 1.0f : 1.0f;
        }
  });
  return std::nullopt;
}

void CpuBackend::embedding_gradient(const Tensor& x, const Tensor& dy, Tensor& grad,
                                    std::int64_t dim) {
  require_device(*this, dy, "embedding_gradient");
  const std::int64_t n = x.size();
  const std::int64_t vocab = rows_of(grad.size(), dim);
  const float* xp = x.data();
  const float* g = dy.data();
  float* gp = grad.data();
  // Each part owns the table rows [row0, row1): it zeroes them and adds the gradients of the
  // inputs that look them up, in input order, so the sums never depend on the threads.
  auto accumulate = [&](std::int64_t row0, std::int64_t row1) {
    std::fill(gp + row0 * dim, gp + row1 * dim, 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto r = static_cast<std::int64_t>(xp[i]);
      if (r < row0 || r >= row1) continue;
      float* gr = gp + r * dim;
      const float* gi = g + i * dim;
      for (std::int64_t c = 0; c < dim; ++c) gr[c] += gi[c];
    }
  };
  if (n * dim + vocab * dim < (1 << 16))
    accumulate(0, vocab);
  else
    cpu::parallel_for(vocab, 1, accumulate);
}

}  // namespace tandem::backend
