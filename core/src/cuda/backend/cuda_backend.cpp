// The CUDA backend's movement, GEMM, activation, dropout, embedding, global pooling, loss,
// metric and optimizer operations (cuda_backend.hpp); convolution, pooling, batch
// normalization and the merging, attention and layer normalization operations
// (cuda_layer_ops.cpp) are in their own files.
#include "cuda/backend/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "cuda/ops/activations.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/ops/layer_kernels.hpp"
#include "cuda/ops/losses.hpp"
#include "cuda/ops/metrics.hpp"
#include "cuda/ops/optimizer_update.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

// Floats of storage for n int32 (or n / 2 doubles' worth of) values.
std::int64_t floats_for_int32(std::int64_t n) {
  return std::max<std::int64_t>(n, 1);
}

std::int64_t rows_of(std::int64_t size, std::int64_t cols) {
  return cols > 0 ? size / cols : 0;
}

// Device memory for tensors from a caching allocator: a block goes back to the allocator when
// its last tensor goes, and the allocator lives as long as any of its blocks.
class AllocatorMemory final : public DeviceMemory {
 public:
  explicit AllocatorMemory(std::shared_ptr<DeviceAllocator> allocator)
      : allocator_(std::move(allocator)) {}
  Device device() const override { return {MemoryKind::cuda, allocator_->device()}; }
  std::shared_ptr<float[]> allocate(std::int64_t count) override {
    auto* block = static_cast<float*>(
        allocator_->allocate(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) *
                             sizeof(float)));
    return std::shared_ptr<float[]>(block, [allocator = allocator_](float* p) {
      allocator->release(p);
    });
  }

 private:
  std::shared_ptr<DeviceAllocator> allocator_;
};

// One step's sums: `count` doubles on the device, read back in one copy into page-locked host
// memory (a copy to pageable memory blocks the thread inside the driver until the step's
// kernels, NCCL's included, are done, while other GPUs' threads may still be allocating).
class DeviceSums final : public backend::Sums {
 public:
  DeviceSums(DeviceAllocator& allocator, cudaStream_t stream)
      : allocator_(allocator), stream_(stream) {}
  DeviceSums(const DeviceSums&) = delete;
  DeviceSums& operator=(const DeviceSums&) = delete;
  ~DeviceSums() override {
    if (host_) cudaFreeHost(host_);
  }
  void reset(std::size_t count) override {
    count_ = count;
    values_.resize(allocator_, 2 * static_cast<std::int64_t>(std::max<std::size_t>(count, 1)));
    check(cudaMemsetAsync(values_.data(), 0, count * sizeof(double), stream_),
          "cudaMemsetAsync (step sums)");
  }
  std::vector<double> read() override {
    if (count_ > host_count_) {
      if (host_) cudaFreeHost(host_);
      host_ = nullptr;
      host_count_ = 0;
      check(cudaMallocHost(reinterpret_cast<void**>(&host_), count_ * sizeof(double)),
            "cudaMallocHost (step sums)");
      host_count_ = count_;
    }
    check(cudaMemcpyAsync(host_, values_.data(), count_ * sizeof(double), cudaMemcpyDeviceToHost,
                          stream_),
          "copy of the step's sums to the host");
    check(cudaStreamSynchronize(stream_), "the training step");
    return std::vector<double>(host_, host_ + count_);
  }
  double* slot(std::size_t i) {
    if (i >= count_)
      throw std::logic_error("step sums: slot " + std::to_string(i) + " of " +
                             std::to_string(count_));
    return reinterpret_cast<double*>(values_.data()) + i;
  }

 private:
  DeviceAllocator& allocator_;
  cudaStream_t stream_;
  std::size_t count_ = 0;
  DeviceBuffer values_;
  double* host_ = nullptr;  // page-locked, host_count_ doubles
  std::size_t host_count_ = 0;
};

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<DeviceAllocator> allocator, cudaStream_t stream,
                         DenseGemm& gemm, Precision precision)
    : allocator_(std::move(allocator)),
      memory_(std::make_shared<AllocatorMemory>(allocator_)),
      stream_(stream),
      gemm_(gemm),
      precision_(precision) {}

CudaBackend::~CudaBackend() = default;

std::unique_ptr<CudaBackend> CudaBackend::sibling(DenseGemm& gemm, Precision precision) const {
  auto other = std::make_unique<CudaBackend>(allocator_, stream_, gemm, precision);
  other->memory_ = memory_;  // one memory: place() keeps a tensor either backend made
  other->step_ = step_;
  return other;
}

Device CudaBackend::device() const {
  return {MemoryKind::cuda, allocator_->device()};
}

void CudaBackend::require(const Tensor& t, const char* operation) const {
  backend::require_device(*this, t, operation);
}

float* CudaBackend::scratch(DeviceBuffer& buffer, std::int64_t floats) {
  buffer.resize(*allocator_, std::max<std::int64_t>(floats, 1));
  return buffer.data();
}

std::map<std::uint64_t, std::uint64_t> CudaBackend::dropout_calls() {
  std::map<std::uint64_t, std::uint64_t> out;
  for (auto& [stream, counter] : step_->dropout_calls) {
    std::uint64_t calls = 0;
    check(cudaMemcpyAsync(&calls, counter.data(), sizeof calls, cudaMemcpyDeviceToHost, stream_),
          "copy of Dropout's call count to the host");
    check(cudaStreamSynchronize(stream_), "copy of Dropout's call count to the host");
    out[stream] = calls;
  }
  return out;
}

void CudaBackend::set_dropout_calls(std::uint64_t stream, std::uint64_t calls) {
  DeviceBuffer& counter = step_->dropout_calls[stream];
  if (counter.size() == 0) counter.resize(*allocator_, 2);  // one uint64
  cuda::set_dropout_calls(reinterpret_cast<std::uint64_t*>(counter.data()), calls, stream_);
}

void CudaBackend::count_dropout_calls() {
  for (auto& [stream, counter] : step_->dropout_calls)
    count_dropout_call(reinterpret_cast<std::uint64_t*>(counter.data()), stream_);
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.size() != dst.size())
    throw ShapeError("copy: " + shape_to_string(src.shape()) + " into " +
                     shape_to_string(dst.shape()));
  const bool from_host = src.on_host(), to_host = dst.on_host();
  if (!from_host) require(src, "copy");
  if (!to_host) require(dst, "copy");
  const cudaMemcpyKind kind = from_host   ? (to_host ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                              : to_host ? cudaMemcpyDeviceToHost
                                        : cudaMemcpyDeviceToDevice;
  if (src.size() > 0)
    check(cudaMemcpyAsync(const_cast<float*>(dst.data()), src.data(),
                          static_cast<std::size_t>(src.size()) * sizeof(float), kind, stream_),
          "cudaMemcpyAsync (tensor copy)");
  if (to_host) {
    check(cudaStreamSynchronize(stream_), "copy of a tensor to the host");
    step_->captured_safely = false;
  }
}

void CudaBackend::fill(Tensor& t, float value) {
  require(t, "fill");
  if (t.empty()) return;
  // Every value by a kernel (nothing allocated, no host copy), so a step that fills — a
  // Conv2DTranspose's column of ones — is captured in a CUDA graph like any other; +0 (all bits
  // zero) as a memset.
  if (value == 0.0f && !std::signbit(value)) {
    check(cudaMemsetAsync(t.data(), 0, static_cast<std::size_t>(t.size()) * sizeof(float), stream_),
          "cudaMemsetAsync (fill)");
    return;
  }
  cuda::fill(t.data(), t.size(), value, stream_);
}

void CudaBackend::gemm(const backend::GemmDesc& d, const Tensor& a, const Tensor& b,
                       const Tensor* bias, Tensor& c) {
  require(a, "gemm");
  require(b, "gemm");
  require(c, "gemm");
  const auto epilogue = d.epilogue == backend::GemmEpilogue::relu_bias ? DenseGemm::Epilogue::relu_bias
                        : d.epilogue == backend::GemmEpilogue::bias    ? DenseGemm::Epilogue::bias
                                                                       : DenseGemm::Epilogue::none;
  const float* bias_data = bias ? bias->data() : nullptr;
  if (d.batch != 1) {
    backend::check_batched_gemm(d, a, b, c);
    // Row-major C_i = op(A_i) op(B_i) is column-major C_iᵀ = op(B_i)ᵀ op(A_i)ᵀ.
    gemm_.matmul_batched(d.trans_b, d.trans_a, d.n, d.m, d.k, b.data(), d.trans_b ? d.k : d.n,
                         d.k * d.n, a.data(), d.trans_a ? d.m : d.k, d.m * d.k, c.data(), d.n,
                         d.m * d.n, d.batch);
  } else if (!d.trans_a && !d.trans_b) {  // y = x W (+ b): batch m, in k, out n
    gemm_.forward(a.data(), b.data(), bias_data, c.data(), d.m, d.k, d.n, epilogue);
  } else if (d.trans_a && !d.trans_b && epilogue == DenseGemm::Epilogue::none) {
    // dW = xᵀ dy: W is in (m) x out (n), the batch k
    gemm_.backward_weights(a.data(), b.data(), c.data(), d.k, d.m, d.n);
  } else if (!d.trans_a && d.trans_b && epilogue == DenseGemm::Epilogue::none) {
    // dx = dy Wᵀ: batch m, in n, out k
    gemm_.backward_data(a.data(), b.data(), c.data(), d.m, d.n, d.k);
  } else {
    // Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ, with the same arrays.
    gemm_.matmul(d.trans_b, d.trans_a, d.n, d.m, d.k, b.data(), d.trans_b ? d.k : d.n, a.data(),
                 d.trans_a ? d.m : d.k, c.data(), d.n, epilogue, bias_data);
  }
}

void CudaBackend::column_sums(const Tensor& x, std::int64_t cols, Tensor& out) {
  require(x, "column_sums");
  require(out, "column_sums");
  const std::int64_t rows = rows_of(x.size(), cols);
  cuda::column_sums(x.data(), out.data(), rows, cols,
                    scratch(column_scratch_, column_sums_scratch(rows, cols)), stream_);
}

void CudaBackend::multiply(const Tensor& a, const Tensor& b, Tensor& out) {
  require(a, "multiply");
  require(b, "multiply");
  require(out, "multiply");
  cuda::multiply(a.data(), b.data(), out.data(), out.size(), stream_);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  require(a, "add");
  require(b, "add");
  require(out, "add");
  backend::check_same_sizes(a.size(), b.size(), out.size(), "add");
  cuda::add(a.data(), b.data(), out.data(), out.size(), stream_);
}

void CudaBackend::add_relu(const Tensor& a, const Tensor& b, Tensor& out) {
  require(a, "add_relu");
  require(b, "add_relu");
  require(out, "add_relu");
  backend::check_same_sizes(a.size(), b.size(), out.size(), "add_relu");
  cuda::add_relu(a.data(), b.data(), out.data(), out.size(), stream_);
}

void CudaBackend::copy_columns(const Tensor& src, std::int64_t src_cols, std::int64_t src_offset,
                               Tensor& dst, std::int64_t dst_cols, std::int64_t dst_offset,
                               std::int64_t width) {
  require(src, "copy_columns");
  require(dst, "copy_columns");
  const std::int64_t rows =
      backend::check_columns(src, src_cols, src_offset, dst, dst_cols, dst_offset, width);
  if (rows == 0 || width == 0) return;
  constexpr auto f = sizeof(float);
  check(cudaMemcpy2DAsync(dst.data() + dst_offset, static_cast<std::size_t>(dst_cols) * f,
                          src.data() + src_offset, static_cast<std::size_t>(src_cols) * f,
                          static_cast<std::size_t>(width) * f, static_cast<std::size_t>(rows),
                          cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpy2DAsync (copy_columns)");
}

void CudaBackend::activation_forward(backend::ActivationKind kind, const Tensor& in, Tensor& out,
                                     std::int64_t cols) {
  require(in, "activation_forward");
  require(out, "activation_forward");
  cuda::activation_forward(kind, in.data(), out.data(), rows_of(in.size(), cols), cols, stream_);
}

void CudaBackend::activation_backward(backend::ActivationKind kind, const Tensor& in,
                                      const Tensor& out, const Tensor& grad_out, Tensor& grad_in,
                                      std::int64_t cols) {
  require(grad_out, "activation_backward");
  require(grad_in, "activation_backward");
  cuda::activation_backward(kind, in.data(), out.data(), grad_out.data(), grad_in.data(),
                            rows_of(grad_out.size(), cols), cols, stream_);
}

void CudaBackend::dropout_forward(const backend::DropoutDesc& d, const Tensor& x, Tensor& y,
                                  Tensor& mask, std::int64_t cols) {
  require(x, "dropout_forward");
  require(y, "dropout_forward");
  require(mask, "dropout_forward");
  cuda::dropout_forward(x.data(), y.data(), mask.data(), rows_of(x.size(), cols), cols, d.stream,
                        call_counter(d), d.first_sample, d.rate, d.noise, stream_);
}

void CudaBackend::normal_noise(const backend::DropoutDesc& d, Tensor& noise, std::int64_t cols) {
  require(noise, "normal_noise");
  cuda::normal_noise(noise.data(), rows_of(noise.size(), cols), cols, d.stream, call_counter(d),
                     d.first_sample, stream_);
}

void CudaBackend::uniform_noise(const backend::DropoutDesc& d, Tensor& noise, std::int64_t cols) {
  require(noise, "uniform_noise");
  cuda::uniform_noise(noise.data(), rows_of(noise.size(), cols), cols, d.stream, call_counter(d),
                      d.first_sample, stream_);
}

std::uint64_t* CudaBackend::call_counter(const backend::DropoutDesc& d) {
  if (step_->dropout_calls.find(d.stream) == step_->dropout_calls.end())
    set_dropout_calls(d.stream, d.call);
  return reinterpret_cast<std::uint64_t*>(step_->dropout_calls.at(d.stream).data());
}

void CudaBackend::global_average_pool_forward(const Tensor& x, Tensor& y, std::int64_t cells,
                                              std::int64_t channels) {
  require(x, "global_average_pool_forward");
  require(y, "global_average_pool_forward");
  cuda::global_average_pool_forward(x.data(), y.data(), rows_of(x.size(), cells * channels), cells,
                                    channels, stream_);
}

void CudaBackend::global_average_pool_backward(const Tensor& dy, Tensor& dx, std::int64_t cells,
                                               std::int64_t channels) {
  require(dy, "global_average_pool_backward");
  require(dx, "global_average_pool_backward");
  cuda::global_average_pool_backward(dy.data(), dx.data(), rows_of(dy.size(), channels), cells,
                                     channels, stream_);
}

void CudaBackend::spectral_normalize(const backend::SpectralNormDesc& desc, Tensor& kernel,
                                     Tensor& u) {
  require(kernel, "spectral_normalize");
  require(u, "spectral_normalize");
  backend::check_spectral_norm(desc, kernel, u, "spectral_normalize");
  float* work =
      scratch(spectral_scratch_, cuda::spectral_norm_scratch_floats(desc.rows, desc.cols));
  cuda::spectral_normalize(desc.rows, desc.cols, desc.iterations, kernel.data(), u.data(), work,
                           stream_);
}

void CudaBackend::adaptive_pool_forward(const backend::AdaptivePoolDesc& desc, const Tensor& x,
                                        Tensor& y, Tensor& arg) {
  require(x, "adaptive_pool_forward");
  require(y, "adaptive_pool_forward");
  backend::adaptive_pool_values(desc, x, y, "adaptive_pool_forward");
  if (desc.max) place(arg, y.shape());
  cuda::adaptive_pool_forward(desc, x.data(), y.data(), desc.max ? arg.data() : nullptr, stream_);
}

void CudaBackend::adaptive_pool_backward(const backend::AdaptivePoolDesc& desc, const Tensor& dy,
                                         const Tensor& arg, Tensor& dx) {
  require(dy, "adaptive_pool_backward");
  require(dx, "adaptive_pool_backward");
  backend::adaptive_pool_values(desc, dx, dy, "adaptive_pool_backward");
  if (desc.max) require(arg, "adaptive_pool_backward");
  cuda::adaptive_pool_backward(desc, dy.data(), desc.max ? arg.data() : nullptr, dx.data(),
                               stream_);
}

void CudaBackend::discretize(const Tensor& x, const Tensor& boundaries, Tensor& y) {
  require(x, "discretize");
  require(boundaries, "discretize");
  require(y, "discretize");
  cuda::discretize(x.data(), boundaries.data(), boundaries.size(), y.data(), x.size(), stream_);
}

std::optional<backend::BadIndex> CudaBackend::device_indices(const Tensor& x, std::int64_t limit,
                                                             const std::string& what) {
  const std::int64_t n = x.size();
  if (n > kMaxInt32)
    throw ShapeError(what + " on a CUDA replica: " + std::to_string(n) +
                     " indices in one batch, more than 2^31 - 1");
  auto* indices = reinterpret_cast<std::int32_t*>(scratch(indices_, floats_for_int32(n)));
  auto* flag = reinterpret_cast<unsigned long long*>(scratch(flag_, 2));
  embedding_indices(x.data(), indices, n, limit, flag, stream_);
  return first_flagged(flag, x, what + " index");
}

std::optional<backend::BadIndex> CudaBackend::first_flagged(const unsigned long long* flag,
                                                            const Tensor& x,
                                                            const std::string& what) {
  // The check needs its answer on the host now: this step cannot be captured.
  unsigned long long first_bad = 0;
  check(cudaMemcpyAsync(&first_bad, flag, sizeof first_bad, cudaMemcpyDeviceToHost, stream_),
        ("cudaMemcpyAsync (" + what + " check)").c_str());
  check(cudaStreamSynchronize(stream_), ("the " + what + " check").c_str());
  step_->captured_safely = false;
  if (first_bad >= static_cast<unsigned long long>(x.size())) return std::nullopt;
  const auto i = static_cast<std::int64_t>(first_bad);
  float value = 0;
  check(cudaMemcpy(&value, x.data() + i, sizeof value, cudaMemcpyDeviceToHost),
        ("copy of a bad " + what + " to the host").c_str());
  return backend::BadIndex{i, value};
}

std::optional<backend::BadIndex> CudaBackend::lookup(const backend::math::LookupDesc& desc,
                                                     const Tensor& x, const Tensor& keys,
                                                     const Tensor& values, Tensor& y) {
  require(x, "lookup");
  require(keys, "lookup");
  require(values, "lookup");
  require(y, "lookup");
  unsigned long long* flag = nullptr;
  if (desc.refuse_missing) {
    flag = reinterpret_cast<unsigned long long*>(scratch(flag_, 2));
    const auto none = static_cast<unsigned long long>(x.size());  // staged before the call returns
    check(cudaMemcpyAsync(flag, &none, sizeof none, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (lookup check)");
  }
  cuda::lookup(desc, x.data(), keys.data(), values.data(), keys.size(), y.data(), x.size(), flag,
               stream_);
  if (!flag) return std::nullopt;
  return first_flagged(flag, x, "lookup key");
}

std::optional<backend::BadIndex> CudaBackend::encode_categories(const Tensor& x, Tensor& y,
                                                                std::int64_t n, std::int64_t inner,
                                                                std::int64_t depth, bool count) {
  require(x, "encode_categories");
  require(y, "encode_categories");
  if (auto bad = device_indices(x, depth, "category encoding")) return bad;
  const std::int64_t outer = n * inner == 0 ? 0 : x.size() / (n * inner);
  cuda::encode_categories(reinterpret_cast<const std::int32_t*>(indices_.data()), y.data(), outer,
                          n, inner, depth, count, stream_);
  return std::nullopt;
}

std::optional<backend::BadIndex> CudaBackend::embedding_gather(const Tensor& table,
                                                               const Tensor& x, Tensor& y,
                                                               std::int64_t dim) {
  require(table, "embedding_gather");
  require(x, "embedding_gather");
  require(y, "embedding_gather");
  if (auto bad = device_indices(x, rows_of(table.size(), dim), "Embedding")) return bad;
  cuda::embedding_gather(table.data(), reinterpret_cast<const std::int32_t*>(indices_.data()),
                         y.data(), x.size(), dim, stream_);
  return std::nullopt;
}

void CudaBackend::embedding_gradient(const Tensor& x, const Tensor& dy, Tensor& grad,
                                     std::int64_t dim) {
  require(x, "embedding_gradient");
  require(dy, "embedding_gradient");
  require(grad, "embedding_gradient");
  const std::int64_t n = x.size();
  const std::int64_t vocab = rows_of(grad.size(), dim);
  auto* indices = reinterpret_cast<std::int32_t*>(scratch(indices_, floats_for_int32(n)));
  auto* flag = reinterpret_cast<unsigned long long*>(scratch(flag_, 2));
  embedding_indices(x.data(), indices, n, vocab, flag, stream_);  // checked by the forward
  const std::size_t bytes = n > 0 ? embedding_gradient_scratch_bytes(n, vocab) : 0;
  float* sort = scratch(embedding_sort_,
                        static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
  cuda::embedding_gradient(
      indices, dy.data(), grad.data(), n, vocab, dim,
      reinterpret_cast<std::int32_t*>(scratch(embedding_work_, floats_for_int32(3 * n))),
      reinterpret_cast<std::int32_t*>(scratch(embedding_starts_, floats_for_int32(vocab + 1))),
      sort, bytes, stream_);
}

std::unique_ptr<backend::Sums> CudaBackend::sums() {
  return std::make_unique<DeviceSums>(*allocator_, stream_);
}

void CudaBackend::loss_sum(const backend::LossDesc& desc, const Tensor& pred, const Tensor& target,
                           const backend::WeightTensors& weights, std::int64_t cols,
                           float grad_scale, Tensor* grad, backend::Sums& sums, std::size_t slot) {
  require(pred, "loss_sum");
  require(target, "loss_sum");
  const std::int64_t rows = rows_of(pred.size(), cols);
  const backend::math::RowWeights w =
      backend::row_weights(*this, weights, rows, desc.positions, "loss_sum");
  if (grad) place(*grad, pred.shape());
  float* row_loss = scratch(row_values_, rows);
  loss_rows(desc, pred.data(), target.data(), w, rows, cols, grad_scale, row_loss,
            grad ? grad->data() : nullptr, stream_);
  sum(row_loss, rows, static_cast<DeviceSums&>(sums).slot(slot), stream_);
}

void CudaBackend::penalty_sum(const Tensor& w, float l1, float l2, backend::Sums& sums,
                              std::size_t slot) {
  require(w, "penalty_sum");
  float* values = scratch(penalty_values_, w.size());
  cuda::penalty_values(w.data(), l1, l2, values, w.size(), stream_);
  sum(values, w.size(), static_cast<DeviceSums&>(sums).slot(slot), stream_);
}

void CudaBackend::metric_sum(const backend::MetricDesc& desc, const Tensor& pred,
                             const Tensor& target, const backend::WeightTensors& weights,
                             std::int64_t cols, backend::Sums& sums, std::size_t slot) {
  require(pred, "metric_sum");
  require(target, "metric_sum");
  const std::int64_t rows = rows_of(pred.size(), cols);
  const backend::math::RowWeights w =
      backend::row_weights(*this, weights, rows, desc.positions, "metric_sum");
  float* values = scratch(row_values_, rows);
  metric_rows(desc, pred.data(), target.data(), w, rows, cols, values, stream_);
  sum(values, rows, static_cast<DeviceSums&>(sums).slot(slot), stream_);
}

void CudaBackend::metric_histogram(const backend::MetricDesc& desc, const Tensor& pred,
                                   const Tensor& target, const backend::WeightTensors& weights,
                                   std::int64_t cols, backend::Sums& sums, std::size_t first_slot) {
  require(pred, "metric_histogram");
  require(target, "metric_histogram");
  const std::int64_t rows = rows_of(pred.size(), cols);
  const backend::math::RowWeights w =
      backend::row_weights(*this, weights, rows, desc.positions, "metric_histogram");
  const std::int64_t bins = backend::math::histogram_bins(desc);
  if (bins <= 0) return;
  auto& device_sums = static_cast<DeviceSums&>(sums);
  device_sums.slot(first_slot + static_cast<std::size_t>(bins) - 1);  // the range is there
  cuda::metric_histogram(desc, pred.data(), target.data(), w, rows, cols,
                         device_sums.slot(first_slot), stream_);
}

void CudaBackend::optimizer_update(const backend::OptimizerDesc& desc, std::int64_t step,
                                   double lr, const std::vector<backend::UpdateTensors>& params) {
  if (params.empty()) return;
  const std::size_t slot_count = static_cast<std::size_t>(backend::math::optimizer_slot_count(desc));
  for (const backend::UpdateTensors& p : params) {
    require(*p.value, "optimizer_update");
    require(*p.grad, "optimizer_update");
    if (!p.slots || p.slots->size() != slot_count)
      throw std::logic_error("optimizer_update: a parameter without its optimizer slots");
    for (const Tensor& s : *p.slots) require(s, "optimizer_update");
  }
  // One fused launch when every array is one flat layout (a CUDA replica's); else per tensor.
  const float* w0 = params.front().value->data();
  const float* g0 = params.front().grad->data();
  std::vector<std::int64_t> segments;
  bool flat = true;
  for (const backend::UpdateTensors& p : params) {
    const std::int64_t offset = p.value->data() - w0;
    segments.push_back(offset);
    flat = flat && p.grad->data() - g0 == offset;
    for (std::size_t s = 0; s < slot_count; ++s)
      flat = flat && (*p.slots)[s].data() - (*params.front().slots)[s].data() == offset;
  }
  if (flat) {
    const std::int64_t n = segments.back() + params.back().value->size();
    segments.push_back(n);
    std::vector<float*> slots;
    for (std::size_t s = 0; s < slot_count; ++s) slots.push_back((*params.front().slots)[s].data());
    const std::int64_t floats = optimizer_scratch_floats(n, segments);
    cuda::optimizer_update(desc, const_cast<float*>(w0), g0, slots, n, segments, step, lr,
                           floats > 0 ? scratch(optimizer_scratch_, floats) : nullptr, stream_);
    return;
  }
  if (desc.global_clipnorm > 0)
    throw std::logic_error(
        "optimizer_update: global_clipnorm on the CUDA backend needs one flat parameter layout");
  for (const backend::UpdateTensors& p : params) {
    const std::int64_t n = p.value->size();
    const std::vector<std::int64_t> one{0, n};
    std::vector<float*> slots;
    for (Tensor& s : *p.slots) slots.push_back(s.data());
    const std::int64_t floats = optimizer_scratch_floats(n, one);
    cuda::optimizer_update(desc, p.value->data(), p.grad->data(), slots, n, one, step, lr,
                           floats > 0 ? scratch(optimizer_scratch_, floats) : nullptr, stream_);
  }
}

}  // namespace tandem::cuda
