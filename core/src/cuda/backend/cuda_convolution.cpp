// The CUDA backend's 2-D convolution (backend::Convolution2D), channels_last, on two paths that
// compute the same function:
//
// im2col: an implicit im2col and cuBLASLt GEMMs through the backend's DenseGemm (at the run's
// precision):
//   forward   y = im2col(x) K + b, K the Keras HWIO kernel viewed as a (kh*kw*in) x filters
//             row-major matrix (no transpose), the bias in the GEMM's epilogue;
//   backward  dK = im2col(x)^T dy, db = column sums of dy, dx = col2im(dy K^T), col2im as a gather
//             (one thread per input element, no atomics).
// A 1x1 kernel with stride 1 needs no im2col: x is its own im2col matrix. The batch is processed
// in chunks whose im2col matrix stays under ~256 MiB; with a single chunk the forward's im2col is
// kept for the backward. GEMM operands that are not 256-byte aligned (cuBLASLt's algorithm choice
// assumes it) are staged through aligned copies.
//
// cudnn: cuda/ops/cudnn_convolution.hpp (cuDNN's deterministic algorithms, found per batch size,
// at the run's precision) on NHWC activations, the kernel transposed HWIO -> KRSC before the
// forward (kept for the backward) and the kernel gradient KRSC -> HWIO after the backward filter;
// the bias is added by our kernel and its gradient is the im2col path's column sums. cuDNN pads
// symmetrically only, so a geometry whose SAME padding is asymmetric stays on im2col.
//
// In bf16 and fp16 (mixed precision) every convolution takes the im2col path: its DenseGemm
// rounds the operands to 16 bits and writes float32, as mixed precision means it, where cuDNN's
// 16-bit configurations would also round the output.
//
// Which path: the environment variable TANDEM_CONV2D, read when the operation is made: "im2col",
// "cudnn" or "auto" (the default, also when empty; case-insensitive; anything else is a
// ConfigError naming the variable). auto decides per batch size on its first forward: when cuDNN
// can compute the geometry and finds algorithms for it, one whole forward of each path is timed on
// the stream (CUDA events, after a warm-up run, the best of three) and the faster one is kept;
// where cuDNN fails or finds nothing, im2col. The backward algorithms are searched on the first
// backward of a batch size (and the batch size falls back to im2col when there are none). The
// searches and timings synchronize, so they happen only in the first step of a batch size (never
// captured in a CUDA graph: the replica captures a step the second time it comes). The choices are
// timings, so two runs may pick differently and differ in the last bits; within a run a step's
// results are the same bits every time.
//
// Ownership: owns its buffers and its CudnnConvolution; borrows the backend, which outlives it.
// Thread-safety: one thread at a time; all work on the backend's stream.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/backend/cuda_grouped_convolution.hpp"
#include "cuda/ops/conv2d_layout.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/cudnn_convolution.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/ops/layer_kernels.hpp"
#include "tandem/error.hpp"
#include "util/environment_settings.hpp"

namespace tandem::cuda {

namespace {

constexpr std::int64_t kColsBudget = std::int64_t{64} << 20;  // floats (256 MiB) of im2col matrix
constexpr std::uintptr_t kGemmAlignment = 256;  // bytes, what DenseGemm's algorithms assume

constexpr int kTimedRuns = 3;  // auto's timing: the best of this many forwards, after a warm-up

bool gemm_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kGemmAlignment == 0;
}

// Runs `run` once untimed (first-use set-up - GEMM plans, cuDNN's kernel loading - is not the
// steady state), then kTimedRuns times between CUDA events on `stream`; the best time, in ms.
// Synchronizes: only for the first forward of a batch size.
template <class Run>
float best_time_ms(cudaStream_t stream, const Run& run) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } events;
  check(cudaEventCreate(&events.start), "cudaEventCreate (Conv2D path timing)");
  check(cudaEventCreate(&events.stop), "cudaEventCreate (Conv2D path timing)");
  run();
  float best = std::numeric_limits<float>::infinity();
  for (int i = 0; i < kTimedRuns; ++i) {
    check(cudaEventRecord(events.start, stream), "cudaEventRecord (Conv2D path timing)");
    run();
    check(cudaEventRecord(events.stop, stream), "cudaEventRecord (Conv2D path timing)");
    check(cudaEventSynchronize(events.stop), "cudaEventSynchronize (Conv2D path timing)");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, events.start, events.stop),
          "cudaEventElapsedTime (Conv2D path timing)");
    best = std::min(best, ms);
  }
  return best;
}


enum class Path { im2col, cudnn };
enum class Mode { im2col, cudnn, automatic };  // TANDEM_CONV2D

// TANDEM_CONV2D (util/environment_settings.hpp).
Mode mode_from_environment() {
  switch (conv2d_path_setting()) {
    case Conv2DPathSetting::im2col:
      return Mode::im2col;
    case Conv2DPathSetting::cudnn:
      return Mode::cudnn;
    case Conv2DPathSetting::automatic:
      break;
  }
  return Mode::automatic;
}

class CudaConvolution final : public backend::Convolution2D {
 public:
  CudaConvolution(const backend::ConvolutionDesc& desc, CudaBackend& ops);
  void forward(const Tensor& x, const Tensor& kernel, const Tensor* bias, Tensor& y) override;
  void backward_weights(const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                        Tensor* d_bias) override;
  void backward_data(const Tensor& dy, const Tensor& kernel, Tensor& dx) override;

 private:
  Path decide(const float* x, const float* kernel, const float* bias, std::int64_t batch, float* y);
  bool backward_on_cudnn(const float* x, const float* dy, std::int64_t batch);
  [[noreturn]] void refuse_cudnn(std::int64_t batch, const std::string& why) const;
  void forward_im2col(const float* x, const float* kernel, const float* bias, std::int64_t batch,
                      float* y);
  void forward_cudnn(const float* x, const float* kernel, const float* bias, std::int64_t batch,
                     float* y);
  const float* kernel_krsc(const float* kernel);  // the kernel in cuDNN's layout, transposed now
  const float* operand(const float* p, std::int64_t n, DeviceBuffer& stage);
  void gemm_forward(const float* cols, const float* kernel, const float* bias, float* y,
                    std::int64_t rows);
  void gemm_weights(const float* cols, const float* dy, float* dk, std::int64_t rows);
  void bias_gradient(const float* dy, std::int64_t rows, float* db);
  void copy(float* dst, const float* src, std::int64_t n);
  void zero(float* p, std::int64_t n);
  std::int64_t batch_of(const Tensor& t) const { return t.rank() > 0 ? t.dim(0) : 0; }
  /// The path chosen for `batch` by its first forward (im2col before one ran).
  Path path_of(std::int64_t batch) const {
    const auto it = paths_.find(batch);
    return it == paths_.end() ? Path::im2col : it->second;
  }

  CudaBackend& ops_;
  DeviceAllocator& allocator_;
  cudaStream_t stream_;
  std::string who_;
  backend::window::Geometry geom_;
  std::int64_t filters_ = 0;
  bool use_bias_ = true;
  std::int64_t patch_ = 0;        // taps * in: the im2col matrix's columns
  std::int64_t out_pixels_ = 0;   // output cells: its rows per sample
  std::int64_t in_size_ = 0;      // floats per input sample
  std::int64_t out_size_ = 0;     // floats per output sample
  std::int64_t kernel_size_ = 0;  // floats of the kernel
  bool identity_ = false;         // 1x1, stride 1, no padding: x is its own im2col matrix
  std::int64_t chunk_ = 1;        // samples per im2col chunk
  Mode mode_ = Mode::automatic;
  std::unique_ptr<CudnnConvolution> cudnn_;  // null when only im2col may run
  std::map<std::int64_t, Path> paths_;       // batch size -> its path, once chosen
  bool cols_hold_x_ = false;  // cols_ holds the im2col matrix of the whole last forward's input,
  const float* cols_x_ = nullptr;  // which was this

  DeviceBuffer cols_, dk_part_, sums_scratch_;
  DeviceBuffer stage_a_, stage_b_, stage_kernel_, stage_bias_, stage_out_;
  DeviceBuffer kernel_krsc_, kernel_grad_krsc_;  // the cuDNN path's kernel and its gradient
};

CudaConvolution::CudaConvolution(const backend::ConvolutionDesc& desc, CudaBackend& ops)
    : ops_(ops),
      allocator_(ops.allocator()),
      stream_(ops.stream()),
      who_(desc.label),
      geom_(desc.geometry),
      filters_(desc.filters),
      use_bias_(desc.use_bias) {
  patch_ = backend::window::patch_size(geom_);
  out_pixels_ = backend::window::output_cells(geom_);
  in_size_ = backend::window::input_cells(geom_) * geom_.channels;
  out_size_ = out_pixels_ * filters_;
  kernel_size_ = patch_ * filters_;
  identity_ = true;
  for (const backend::window::Axis* a : {&geom_.depth, &geom_.rows, &geom_.cols})
    identity_ =
        identity_ && a->kernel == 1 && a->stride == 1 && a->pad_before == 0 && a->out == a->in;
  // Chunks of whole samples under the budget; when there is room, a multiple of the samples
  // that keep each chunk's output 256-byte aligned, so it needs no staging.
  chunk_ = std::max<std::int64_t>(1, kColsBudget / std::max<std::int64_t>(1, out_pixels_ * patch_));
  const std::int64_t granule = 64 / std::gcd(out_size_, std::int64_t{64});
  if (chunk_ >= granule) chunk_ -= chunk_ % granule;

  // The cuDNN path, unless TANDEM_CONV2D says im2col or cuDNN cannot compute this geometry.
  mode_ = mode_from_environment();
  if (mode_ == Mode::im2col) return;
  if (ops.precision() == Precision::bf16 || ops.precision() == Precision::fp16) {
    // cuDNN's 16-bit convolutions write 16-bit outputs; mixed precision keeps them float32.
    if (mode_ == Mode::cudnn)
      throw ConfigError(kConv2DPathVariable, who_ + ": " + kConv2DPathVariable +
                                           "=cudnn, but in bf16 and fp16 convolutions run on "
                                           "im2col (cuDNN would round their outputs to 16 bits); "
                                           "use " + kConv2DPathVariable + "=auto or im2col");
    return;
  }
  if (geom_.volume) {  // cuda/ops/cudnn_convolution describes 4-D tensors only
    if (mode_ == Mode::cudnn)
      throw ConfigError(kConv2DPathVariable,
                        who_ + ": " + kConv2DPathVariable +
                            "=cudnn, but 3-D convolutions run on im2col; use " +
                            kConv2DPathVariable + "=auto or im2col");
    return;
  }
  CudnnConvolution::Geometry g;
  g.in_rows = geom_.rows.in;
  g.in_cols = geom_.cols.in;
  g.in_channels = geom_.channels;
  g.kernel_rows = geom_.rows.kernel;
  g.kernel_cols = geom_.cols.kernel;
  g.filters = filters_;
  g.stride_rows = geom_.rows.stride;
  g.stride_cols = geom_.cols.stride;
  g.dilation_rows = geom_.rows.dilation;
  g.dilation_cols = geom_.cols.dilation;
  g.pad_top = geom_.rows.pad_before;
  g.pad_bottom = backend::window::pad_after(geom_.rows);
  g.pad_left = geom_.cols.pad_before;
  g.pad_right = backend::window::pad_after(geom_.cols);
  std::string refusal = CudnnConvolution::unsupported_reason(g);
  if (refusal.empty() && (g.out_rows() != geom_.rows.out || g.out_cols() != geom_.cols.out))
    refusal = "its output would be " + std::to_string(g.out_rows()) + "x" +
              std::to_string(g.out_cols()) + ", not " + std::to_string(geom_.rows.out) + "x" +
              std::to_string(geom_.cols.out);
  if (!refusal.empty()) {
    if (mode_ == Mode::cudnn)
      throw ConfigError(kConv2DPathVariable,
                        who_ + ": " + kConv2DPathVariable +
                            "=cudnn, but cuDNN cannot compute this layer: " + refusal + ". Use " +
                            kConv2DPathVariable + "=auto (im2col where cuDNN cannot) or im2col");
    return;  // auto: im2col
  }
  try {
    cudnn_ = std::make_unique<CudnnConvolution>(g, allocator_, stream_, ops.precision());
  } catch (const RunError& e) {
    if (mode_ == Mode::cudnn) throw;
    spdlog::warn("{}: cuDNN is not usable here ({}); the layer runs on im2col", who_, e.what());
  }
}

void CudaConvolution::copy(float* dst, const float* src, std::int64_t n) {
  check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync (Conv2D operand)");
}

void CudaConvolution::zero(float* p, std::int64_t n) {
  check(cudaMemsetAsync(p, 0, static_cast<std::size_t>(n) * sizeof(float), stream_),
        "cudaMemsetAsync (Conv2D gradient)");
}

const float* CudaConvolution::operand(const float* p, std::int64_t n, DeviceBuffer& stage) {
  if (gemm_aligned(p)) return p;
  stage.resize(allocator_, n);
  copy(stage.data(), p, n);
  return stage.data();
}

void CudaConvolution::gemm_forward(const float* cols, const float* kernel, const float* bias,
                                   float* y, std::int64_t rows) {
  const bool direct = gemm_aligned(y);
  if (!direct) stage_out_.resize(allocator_, rows * filters_);
  float* target = direct ? y : stage_out_.data();
  ops_.gemm_engine().forward(cols, kernel, bias, target, rows, patch_, filters_,
                             bias ? DenseGemm::Epilogue::bias : DenseGemm::Epilogue::none);
  if (!direct) copy(y, target, rows * filters_);
}

void CudaConvolution::gemm_weights(const float* cols, const float* dy, float* dk,
                                   std::int64_t rows) {
  const bool direct = gemm_aligned(dk);
  if (!direct) dk_part_.resize(allocator_, kernel_size_);
  float* target = direct ? dk : dk_part_.data();
  ops_.gemm_engine().backward_weights(cols, dy, target, rows, patch_, filters_);
  if (!direct) copy(dk, target, kernel_size_);
}

void CudaConvolution::bias_gradient(const float* dy, std::int64_t rows, float* db) {
  sums_scratch_.resize(allocator_, column_sums_scratch(rows, filters_));
  column_sums(dy, db, rows, filters_, sums_scratch_.data(), stream_);
}

void CudaConvolution::forward_im2col(const float* x, const float* kernel_in, const float* bias_in,
                                     std::int64_t batch, float* y) {
  const std::int64_t rows = batch * out_pixels_;
  const float* kernel = operand(kernel_in, kernel_size_, stage_kernel_);
  const float* bias = bias_in ? operand(bias_in, filters_, stage_bias_) : nullptr;
  if (identity_) {
    gemm_forward(operand(x, rows * patch_, stage_a_), kernel, bias, y, rows);
    return;
  }
  cols_.resize(allocator_, std::min(batch, chunk_) * out_pixels_ * patch_);
  for (std::int64_t b0 = 0; b0 < batch; b0 += chunk_) {
    const std::int64_t n = std::min(chunk_, batch - b0);
    im2col(x + b0 * in_size_, cols_.data(), n, geom_, stream_);
    gemm_forward(cols_.data(), kernel, bias, y + b0 * out_size_, n * out_pixels_);
  }
  cols_hold_x_ = batch <= chunk_;
  cols_x_ = x;
}

const float* CudaConvolution::kernel_krsc(const float* kernel) {
  kernel_krsc_.resize(allocator_, kernel_size_);
  hwio_to_krsc(kernel, kernel_krsc_.data(), patch_, filters_, stream_);
  return kernel_krsc_.data();
}

// cuDNN's convolution, then the bias by our kernel; y comes from the allocator, so it is aligned
// for cuDNN, and x is staged when it is not.
void CudaConvolution::forward_cudnn(const float* x, const float* kernel, const float* bias,
                                    std::int64_t batch, float* y) {
  cudnn_->forward(operand(x, batch * in_size_, stage_a_), kernel_krsc(kernel), y, batch);
  if (bias) bias_activation(y, bias, batch * out_pixels_, filters_, Activation::linear, stream_);
}

void CudaConvolution::refuse_cudnn(std::int64_t batch, const std::string& why) const {
  throw ConfigError(kConv2DPathVariable,
                    who_ + ": " + kConv2DPathVariable + "=cudnn, but cuDNN cannot run a batch of " +
                        std::to_string(batch) + " samples: " + why + ". Use " + kConv2DPathVariable +
                        "=auto (im2col where cuDNN cannot) or im2col");
}

// The first forward of `batch`: cuDNN's forward search, then under auto one timed forward of each
// path. y is the forward's output buffer (overwritten).
Path CudaConvolution::decide(const float* x, const float* kernel, const float* bias,
                             std::int64_t batch, float* y) {
  if (!cudnn_) return Path::im2col;
  const bool forced = mode_ == Mode::cudnn;
  if (batch > CudnnConvolution::max_batch(cudnn_->geometry())) {
    const std::string why =
        "a tensor of 2^31 elements or more, more than cuDNN's legacy API describes";
    if (forced) refuse_cudnn(batch, why);
    return Path::im2col;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone)
    throw RunError(who_ + ": the first forward of a batch of " + std::to_string(batch) +
                   " samples chooses its convolution algorithm, which cannot be captured in a CUDA "
                   "graph");
  std::string why_not;  // why cuDNN does not run this batch size
  float cudnn_ms = 0.0f;
  try {
    const float* xs = operand(x, batch * in_size_, stage_a_);
    if (!cudnn_->find_forward(xs, kernel_krsc(kernel), y, batch))
      why_not = cudnn_->choices(batch);
    else if (!forced)
      cudnn_ms = best_time_ms(stream_, [&] { forward_cudnn(x, kernel, bias, batch, y); });
  } catch (const RunError& e) {
    if (forced) throw;
    why_not = e.what();
  }
  if (!why_not.empty()) {
    if (forced) refuse_cudnn(batch, why_not);
    spdlog::debug("{}, batch {}: cuDNN does not run it ({}); im2col", who_, batch, why_not);
    return Path::im2col;
  }
  if (forced) return Path::cudnn;
  const float im2col_ms =
      best_time_ms(stream_, [&] { forward_im2col(x, kernel, bias, batch, y); });
  const Path path = cudnn_ms < im2col_ms ? Path::cudnn : Path::im2col;
  spdlog::debug("{}, batch {}: forward on cuDNN {:.4f} ms ({}), on im2col {:.4f} ms: {}", who_,
                batch, cudnn_ms, cudnn_->choices(batch), im2col_ms,
                path == Path::cudnn ? "cuDNN" : "im2col");
  return path;
}

// Whether the backward of `batch` runs on cuDNN: the last forward did, and its backward algorithms
// exist (searched on its first backward, on stand-ins: dy itself, scratch for dx, the kernel
// gradient's own buffer). A batch size without them goes to im2col for good.
bool CudaConvolution::backward_on_cudnn(const float* x, const float* dy, std::int64_t batch) {
  if (path_of(batch) != Path::cudnn) return false;
  if (cudnn_->backward_searched(batch)) return true;
  std::string why;
  try {
    const float* xs = operand(x, batch * in_size_, stage_a_);
    const float* d = operand(dy, batch * out_size_, stage_b_);
    DeviceBuffer dx_scratch(allocator_, batch * in_size_);
    kernel_krsc_.resize(allocator_, kernel_size_);  // a stand-in: the search times, whatever it holds
    kernel_grad_krsc_.resize(allocator_, kernel_size_);
    if (!cudnn_->find_backward_data(d, kernel_krsc_.data(), dx_scratch.data(), batch) ||
        !cudnn_->find_backward_filter(xs, d, kernel_grad_krsc_.data(), batch))
      why = cudnn_->choices(batch);
  } catch (const RunError& e) {
    if (mode_ == Mode::cudnn) throw;
    why = e.what();
  }
  if (why.empty()) return true;
  if (mode_ == Mode::cudnn) refuse_cudnn(batch, why);
  spdlog::debug("{}, batch {}: no cuDNN backward ({}); im2col", who_, batch, why);
  paths_[batch] = Path::im2col;
  return false;
}

void CudaConvolution::forward(const Tensor& x, const Tensor& kernel, const Tensor* bias,
                              Tensor& y) {
  const std::int64_t batch = batch_of(x);
  ops_.place(y, backend::window_output_shape(geom_, batch, filters_));
  cols_hold_x_ = false;
  if (batch == 0) return;
  const float* b = use_bias_ && bias ? bias->data() : nullptr;
  auto known = paths_.find(batch);
  if (known == paths_.end()) {
    known = paths_.emplace(batch, decide(x.data(), kernel.data(), b, batch, y.data())).first;
    cols_hold_x_ = false;  // auto's timing may have left it set
  }
  if (known->second == Path::cudnn)
    forward_cudnn(x.data(), kernel.data(), b, batch, y.data());
  else
    forward_im2col(x.data(), kernel.data(), b, batch, y.data());
}

void CudaConvolution::backward_weights(const Tensor& x, const Tensor& dy, Tensor& d_kernel,
                                       Tensor* d_bias) {
  const std::int64_t batch = batch_of(x);
  const std::int64_t rows = batch * out_pixels_;
  if (batch == 0) {  // no samples: zero gradients
    zero(d_kernel.data(), kernel_size_);
    if (d_bias) zero(d_bias->data(), filters_);
    return;
  }
  if (d_bias) bias_gradient(dy.data(), rows, d_bias->data());
  if (backward_on_cudnn(x.data(), dy.data(), batch)) {
    kernel_grad_krsc_.resize(allocator_, kernel_size_);
    cudnn_->backward_filter(operand(x.data(), batch * in_size_, stage_a_),
                            operand(dy.data(), batch * out_size_, stage_b_),
                            kernel_grad_krsc_.data(), batch);
    krsc_to_hwio(kernel_grad_krsc_.data(), d_kernel.data(), patch_, filters_, stream_);
    return;
  }
  if (identity_) {
    gemm_weights(operand(x.data(), rows * patch_, stage_a_),
                 operand(dy.data(), rows * filters_, stage_b_), d_kernel.data(), rows);
    return;
  }
  // The last forward's im2col matrix serves when it was of this very x (Conv2D's order: forward,
  // then backward); Conv2DTranspose calls the operation in another order.
  const bool reuse_cols = cols_hold_x_ && cols_x_ == x.data();
  cols_.resize(allocator_, std::min(batch, chunk_) * out_pixels_ * patch_);
  for (std::int64_t b0 = 0; b0 < batch; b0 += chunk_) {
    const std::int64_t n = std::min(chunk_, batch - b0);
    const std::int64_t chunk_rows = n * out_pixels_;
    const float* d = operand(dy.data() + b0 * out_size_, chunk_rows * filters_, stage_b_);
    if (!reuse_cols) im2col(x.data() + b0 * in_size_, cols_.data(), n, geom_, stream_);
    if (b0 == 0) {
      gemm_weights(cols_.data(), d, d_kernel.data(), chunk_rows);
    } else {  // later chunks add their part, in chunk order
      dk_part_.resize(allocator_, kernel_size_);
      ops_.gemm_engine().backward_weights(cols_.data(), d, dk_part_.data(), chunk_rows, patch_,
                                          filters_);
      add_in_place(d_kernel.data(), dk_part_.data(), kernel_size_, stream_);
    }
  }
}

void CudaConvolution::backward_data(const Tensor& dy, const Tensor& kernel, Tensor& dx) {
  const std::int64_t batch = batch_of(dy);
  ops_.place(dx, backend::window_input_shape(geom_, batch));
  cols_hold_x_ = false;  // the im2col path overwrites cols_
  if (batch == 0) return;
  const std::int64_t rows = batch * out_pixels_;
  // cuDNN where this batch size's forward chose it and its backward algorithms were found (by a
  // backward_weights); the kernel transposed again, as the weights may have changed since the
  // last forward (Conv2DTranspose's forward is this call, after the optimizer step).
  if (cudnn_ && path_of(batch) == Path::cudnn && cudnn_->backward_searched(batch)) {
    cudnn_->backward_data(operand(dy.data(), batch * out_size_, stage_b_),
                          kernel_krsc(kernel.data()), dx.data(), batch);
    return;
  }
  const float* k = operand(kernel.data(), kernel_size_, stage_kernel_);
  if (identity_) {
    ops_.gemm_engine().backward_data(operand(dy.data(), rows * filters_, stage_b_), k, dx.data(),
                                     rows, patch_, filters_);
    return;
  }
  cols_.resize(allocator_, std::min(batch, chunk_) * out_pixels_ * patch_);
  for (std::int64_t b0 = 0; b0 < batch; b0 += chunk_) {
    const std::int64_t n = std::min(chunk_, batch - b0);
    const std::int64_t chunk_rows = n * out_pixels_;
    const float* d = operand(dy.data() + b0 * out_size_, chunk_rows * filters_, stage_b_);
    // dcols = dy K^T overwrites the im2col matrix, then the gather
    ops_.gemm_engine().backward_data(d, k, cols_.data(), chunk_rows, patch_, filters_);
    col2im(cols_.data(), dx.data() + b0 * in_size_, n, geom_, stream_);
  }
}

}  // namespace

std::unique_ptr<backend::Convolution2D> CudaBackend::convolution(
    const backend::ConvolutionDesc& desc) {
  if (desc.groups > 1) return make_grouped_convolution(desc, *this);
  return std::make_unique<CudaConvolution>(desc, *this);
}

}  // namespace tandem::cuda
