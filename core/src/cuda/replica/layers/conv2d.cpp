// Private (CUDA module): DeviceConv2D (see conv2d.hpp): config parsing, the choice between the
// im2col and cuDNN paths, the GEMM orchestration of the one and the cuDNN calls of the other; the
// im2col / col2im kernels are in conv2d.cu, the kernel layout conversions in conv2d_layout.cu.
// Ownership and thread-safety as the class.
#include "cuda/replica/layers/conv2d.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

#include "cuda/ops/activations.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/replica/layers/conv2d_layout.hpp"
#include "cuda/replica/layers/layer_config.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

namespace {

constexpr std::int64_t kColsBudget = std::int64_t{64} << 20;  // floats (256 MiB) of im2col matrix
constexpr std::int64_t kColumnSumRows = std::int64_t{65535} * 256;  // column_sums' most rows
constexpr std::uintptr_t kGemmAlignment = 256;  // bytes, what DenseGemm's algorithms assume

constexpr const char* kPathVariable = "TANDEM_CONV2D";
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

}  // namespace

DeviceConv2D::Mode DeviceConv2D::mode_from_environment() {
  const char* env = std::getenv(kPathVariable);
  std::string value = env ? env : "";
  for (char& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (value.empty() || value == "auto") return Mode::automatic;
  if (value == "im2col") return Mode::im2col;
  if (value == "cudnn") return Mode::cudnn;
  throw ConfigError(kPathVariable, std::string("the environment variable ") + kPathVariable +
                                       " picks Conv2D's GPU path: expected 'im2col', 'cudnn' or "
                                       "'auto' (the default), got '" +
                                       env + "'");
}

DeviceConv2D::DeviceConv2D(const nlohmann::json& config, const Shape& input_shape,
                           const Shape& output_shape, DeviceContext& ctx)
    : ctx_(ctx), who_(layers::layer_who(config, "Conv2D")) {
  using layers::config_value;
  if (ctx_.allocator == nullptr || ctx_.gemm == nullptr)
    throw RunError(who_ + " on a CUDA replica: the device context has no allocator or GEMM");
  filters_ = config_value<std::int64_t>(config, "filters", who_);
  const nn::Pair k = layers::config_pair(config, "kernel_size", who_, {0, 0});
  const nn::Pair s = layers::config_pair(config, "strides", who_, {1, 1});
  const nn::Pair d = layers::config_pair(config, "dilation_rate", who_, {1, 1});
  const nn::Padding padding = layers::config_padding(config, who_);
  if (filters_ <= 0 || k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0 || d[0] <= 0 || d[1] <= 0)
    throw ConfigError(layers::config_path(config, ""),
                      who_ + " needs positive filters, kernel_size, strides and dilation_rate");
  if (config_value<std::int64_t>(config, "groups", who_, 1) != 1)
    throw ConfigError(layers::config_path(config, "groups"), who_ + ": only groups=1 is supported");
  const auto act = config.find("activation");
  activation_ = act == config.end() || act->is_null()
                    ? nn::ActivationKind::linear
                    : nn::parse_activation(config_value<std::string>(config, "activation", who_),
                                           layers::config_path(config, "activation"));
  use_bias_ = config_value<bool>(config, "use_bias", who_, true);

  nn::check_image_shape(input_shape, who_);
  geom_.rows = layers::make_axis(input_shape[0], k[0], s[0], d[0], padding);
  geom_.cols = layers::make_axis(input_shape[1], k[1], s[1], d[1], padding);
  geom_.channels = input_shape[2];
  if (geom_.rows.out <= 0 || geom_.cols.out <= 0)
    throw ShapeError(who_ + ": kernel " + shape_to_string({k[0], k[1]}) +
                     " is larger than its input " + shape_to_string(input_shape, true) +
                     " with \"valid\" padding");
  layers::check_shape(who_, "output", output_shape, {geom_.rows.out, geom_.cols.out, filters_});

  patch_ = window::patch_size(geom_);
  out_pixels_ = geom_.rows.out * geom_.cols.out;
  in_size_ = shape_size(input_shape);
  out_size_ = out_pixels_ * filters_;
  kernel_size_ = patch_ * filters_;
  identity_ = k[0] == 1 && k[1] == 1 && s[0] == 1 && s[1] == 1 && geom_.rows.pad_before == 0 &&
              geom_.cols.pad_before == 0 && geom_.rows.out == geom_.rows.in &&
              geom_.cols.out == geom_.cols.in;
  // Chunks of whole samples under the budget; when there is room, a multiple of the samples
  // that keep each chunk's output 256-byte aligned, so it needs no staging.
  chunk_ = std::max<std::int64_t>(1, kColsBudget / std::max<std::int64_t>(1, out_pixels_ * patch_));
  const std::int64_t granule = 64 / std::gcd(out_size_, std::int64_t{64});
  if (chunk_ >= granule) chunk_ -= chunk_ % granule;
  if (!use_bias_) {
    zero_bias_.resize(*ctx_.allocator, filters_);
    check(cudaMemsetAsync(zero_bias_.data(), 0, static_cast<std::size_t>(filters_) * sizeof(float),
                          ctx_.stream),
          "cudaMemsetAsync (Conv2D zero bias)");
  }

  // The cuDNN path, unless TANDEM_CONV2D says im2col or cuDNN cannot compute this geometry.
  mode_ = mode_from_environment();
  if (mode_ == Mode::im2col) return;
  CudnnConvolution::Geometry g;
  g.in_rows = geom_.rows.in;
  g.in_cols = geom_.cols.in;
  g.in_channels = geom_.channels;
  g.kernel_rows = k[0];
  g.kernel_cols = k[1];
  g.filters = filters_;
  g.stride_rows = s[0];
  g.stride_cols = s[1];
  g.dilation_rows = d[0];
  g.dilation_cols = d[1];
  g.pad_top = geom_.rows.pad_before;
  g.pad_bottom = nn::window_along(g.in_rows, k[0], s[0], d[0], padding).pad_after;
  g.pad_left = geom_.cols.pad_before;
  g.pad_right = nn::window_along(g.in_cols, k[1], s[1], d[1], padding).pad_after;
  std::string refusal = CudnnConvolution::unsupported_reason(g);
  if (refusal.empty() && (g.out_rows() != geom_.rows.out || g.out_cols() != geom_.cols.out))
    refusal = "its output would be " + std::to_string(g.out_rows()) + "x" +
              std::to_string(g.out_cols()) + ", not " + std::to_string(geom_.rows.out) + "x" +
              std::to_string(geom_.cols.out);
  if (!refusal.empty()) {
    if (mode_ == Mode::cudnn)
      throw ConfigError(kPathVariable,
                        who_ + ": " + kPathVariable +
                            "=cudnn, but cuDNN cannot compute this layer: " + refusal + ". Use " +
                            kPathVariable + "=auto (im2col where cuDNN cannot) or im2col");
    return;  // auto: im2col
  }
  try {
    cudnn_ = std::make_unique<CudnnConvolution>(g, *ctx_.allocator, ctx_.stream, ctx_.precision);
  } catch (const RunError& e) {
    if (mode_ == Mode::cudnn) throw;
    spdlog::warn("{}: cuDNN is not usable here ({}); the layer runs on im2col", who_, e.what());
  }
}

void DeviceConv2D::bind(std::vector<DeviceParameter> params) {
  if (use_bias_)
    layers::check_parameters(who_, params, {kernel_size_, filters_});
  else
    layers::check_parameters(who_, params, {kernel_size_});
  DeviceLayer::bind(std::move(params));
}

void DeviceConv2D::copy(float* dst, const float* src, std::int64_t n) {
  check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, ctx_.stream),
        "cudaMemcpyAsync (Conv2D operand)");
}

const float* DeviceConv2D::operand(const float* p, std::int64_t n, DeviceBuffer& stage) {
  if (gemm_aligned(p)) return p;
  stage.resize(*ctx_.allocator, n);
  copy(stage.data(), p, n);
  return stage.data();
}

void DeviceConv2D::gemm_forward(const float* cols, const float* kernel, const float* bias, float* z,
                                std::int64_t rows) {
  const bool direct = gemm_aligned(z);
  if (!direct) stage_out_.resize(*ctx_.allocator, rows * filters_);
  float* target = direct ? z : stage_out_.data();
  ctx_.gemm->forward(cols, kernel, bias, target, rows, patch_, filters_,
                     activation_ == nn::ActivationKind::relu ? DenseGemm::Epilogue::relu_bias
                                                             : DenseGemm::Epilogue::bias);
  if (!direct) copy(z, target, rows * filters_);
}

void DeviceConv2D::gemm_weights(const float* cols, const float* dz, float* dk, std::int64_t rows) {
  const bool direct = gemm_aligned(dk);
  if (!direct) dk_part_.resize(*ctx_.allocator, kernel_size_);
  float* target = direct ? dk : dk_part_.data();
  ctx_.gemm->backward_weights(cols, dz, target, rows, patch_, filters_);
  if (!direct) copy(dk, target, kernel_size_);
}

// column_sums launches one block row per 256 rows (at most 65535): larger gradients are summed
// in slabs, added in slab order.
void DeviceConv2D::bias_gradient(const float* dz, std::int64_t rows, float* db) {
  for (std::int64_t r0 = 0; r0 < rows; r0 += kColumnSumRows) {
    const std::int64_t n = std::min(kColumnSumRows, rows - r0);
    sums_scratch_.resize(*ctx_.allocator, column_sums_scratch(n, filters_));
    if (r0 == 0) {
      column_sums(dz, db, n, filters_, sums_scratch_.data(), ctx_.stream);
    } else {
      db_part_.resize(*ctx_.allocator, filters_);
      column_sums(dz + r0 * filters_, db_part_.data(), n, filters_, sums_scratch_.data(),
                  ctx_.stream);
      layers::add_in_place(db, db_part_.data(), filters_, ctx_.stream);
    }
  }
}

void DeviceConv2D::forward_im2col(const float* x, std::int64_t batch, float* z) {
  const std::int64_t rows = batch * out_pixels_;
  const float* kernel = operand(params_.at(0).value, kernel_size_, stage_kernel_);
  const float* bias =
      use_bias_ ? operand(params_.at(1).value, filters_, stage_bias_) : zero_bias_.data();
  if (identity_) {
    gemm_forward(operand(x, rows * patch_, stage_a_), kernel, bias, z, rows);
    return;
  }
  cols_.resize(*ctx_.allocator, std::min(batch, chunk_) * out_pixels_ * patch_);
  for (std::int64_t b0 = 0; b0 < batch; b0 += chunk_) {
    const std::int64_t n = std::min(chunk_, batch - b0);
    layers::im2col(x + b0 * in_size_, cols_.data(), n, geom_, ctx_.stream);
    gemm_forward(cols_.data(), kernel, bias, z + b0 * out_size_, n * out_pixels_);
  }
  cols_hold_x_ = batch <= chunk_;
}

const float* DeviceConv2D::kernel_krsc() {
  kernel_krsc_.resize(*ctx_.allocator, kernel_size_);
  hwio_to_krsc(params_.at(0).value, kernel_krsc_.data(), patch_, filters_, ctx_.stream);
  return kernel_krsc_.data();
}

// cuDNN's convolution, then the bias (and relu) by our kernel; z comes from the allocator, so it
// is aligned for cuDNN, and x is staged when it is not.
void DeviceConv2D::forward_cudnn(const float* x, std::int64_t batch, float* z) {
  const float* kernel = kernel_krsc();
  cudnn_->forward(operand(x, batch * in_size_, stage_a_), kernel, z, batch);
  const float* bias = use_bias_ ? params_.at(1).value : nullptr;
  const bool relu = activation_ == nn::ActivationKind::relu;
  if (bias || relu)
    bias_activation(z, bias, batch * out_pixels_, filters_,
                    relu ? cuda::Activation::relu : cuda::Activation::linear, ctx_.stream);
}

// The backward searches run on stand-ins: the forward's output z as dy (only read; its values do
// not matter to the search), scratch for dx (back to the allocator's cache after, where dx_ finds
// it) and the kernel gradient's own buffer.
bool DeviceConv2D::find_cudnn_backward(const float* x, const float* dy, std::int64_t batch) {
  DeviceBuffer dx_scratch(*ctx_.allocator, batch * in_size_);
  kernel_grad_krsc_.resize(*ctx_.allocator, kernel_size_);
  return cudnn_->find_backward_data(dy, kernel_krsc(), dx_scratch.data(), batch) &&
         cudnn_->find_backward_filter(x, dy, kernel_grad_krsc_.data(), batch);
}

void DeviceConv2D::refuse_cudnn(std::int64_t batch, const std::string& why) const {
  throw ConfigError(kPathVariable,
                    who_ + ": " + kPathVariable + "=cudnn, but cuDNN cannot run a batch of " +
                        std::to_string(batch) + " samples: " + why + ". Use " + kPathVariable +
                        "=auto (im2col where cuDNN cannot) or im2col");
}

DeviceConv2D::Path DeviceConv2D::path_for(const float* x, std::int64_t batch, bool training,
                                          float* z) {
  const auto known = paths_.find(batch);
  if (known == paths_.end()) {
    const Path path = decide(x, batch, training, z);
    paths_.emplace(batch, path);
    // The im2col matrix of auto's timing is not needed while every batch size runs on cuDNN.
    if (path == Path::cudnn && std::all_of(paths_.begin(), paths_.end(),
                                           [](const auto& p) { return p.second == Path::cudnn; }))
      cols_.reset();
    return path;
  }
  // A batch size that an inference forward put on cuDNN: its first training forward searches the
  // backward algorithms (before its step can be captured: that step runs directly first).
  if (known->second == Path::cudnn && training && !cudnn_->backward_searched(batch)) {
    std::string why;
    try {
      if (!find_cudnn_backward(operand(x, batch * in_size_, stage_a_), z, batch))
        why = cudnn_->choices(batch);
    } catch (const RunError& e) {
      if (mode_ == Mode::cudnn) throw;
      why = e.what();
    }
    if (!why.empty()) {
      if (mode_ == Mode::cudnn) refuse_cudnn(batch, why);
      spdlog::debug("{}, batch {}: no cuDNN backward ({}); im2col", who_, batch, why);
      known->second = Path::im2col;
    }
  }
  return known->second;
}

// The first forward of `batch`: cuDNN's searches (forward; backward too when training), then under
// auto one timed forward of each path. z is the forward's output buffer (overwritten).
DeviceConv2D::Path DeviceConv2D::decide(const float* x, std::int64_t batch, bool training,
                                        float* z) {
  if (!cudnn_) return Path::im2col;
  const bool forced = mode_ == Mode::cudnn;
  if (batch > CudnnConvolution::max_batch(cudnn_->geometry())) {
    const std::string why =
        "a tensor of 2^31 elements or more, more than cuDNN's legacy API describes";
    if (forced) refuse_cudnn(batch, why);
    return Path::im2col;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(ctx_.stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone)
    throw RunError(who_ + ": the first forward of a batch of " + std::to_string(batch) +
                   " samples chooses its convolution algorithm, which cannot be captured in a CUDA "
                   "graph");

  std::string why_not;  // why cuDNN does not run this batch size
  float cudnn_ms = 0.0f;
  try {
    const float* xs = operand(x, batch * in_size_, stage_a_);
    bool found = cudnn_->find_forward(xs, kernel_krsc(), z, batch);
    if (found && training) found = find_cudnn_backward(xs, z, batch);
    if (!found)
      why_not = cudnn_->choices(batch);
    else if (!forced)
      cudnn_ms = best_time_ms(ctx_.stream, [&] { forward_cudnn(x, batch, z); });
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

  const float im2col_ms = best_time_ms(ctx_.stream, [&] { forward_im2col(x, batch, z); });
  const Path path = cudnn_ms < im2col_ms ? Path::cudnn : Path::im2col;
  spdlog::debug(
      "{}, batch {}: forward on cuDNN {:.4f} ms (its search timed the convolution alone at {:.4f} "
      "ms; {}), on im2col {:.4f} ms: {}",
      who_, batch, cudnn_ms, cudnn_->forward_ms(batch), cudnn_->choices(batch), im2col_ms,
      path == Path::cudnn ? "cuDNN" : "im2col");
  return path;
}

const float* DeviceConv2D::forward(const float* x, std::int64_t batch, bool training,
                                   std::int64_t /*sample_offset*/) {
  x_ = x;
  batch_ = batch;
  cols_hold_x_ = false;
  const std::int64_t rows = batch * out_pixels_;
  const bool keep_pre =
      activation_ != nn::ActivationKind::linear && activation_ != nn::ActivationKind::relu;
  out_.resize(*ctx_.allocator, rows * filters_);
  if (keep_pre) pre_.resize(*ctx_.allocator, rows * filters_);
  path_ = Path::im2col;
  if (batch == 0) return out_.data();
  float* z = keep_pre ? pre_.data() : out_.data();
  path_ = path_for(x, batch, training, z);
  cols_hold_x_ = false;  // auto's timing may have left it set
  if (path_ == Path::cudnn)
    forward_cudnn(x, batch, z);
  else
    forward_im2col(x, batch, z);
  if (keep_pre)
    activation_forward(activation_, pre_.data(), out_.data(), rows, filters_, ctx_.stream);
  return out_.data();
}

// dK through cuDNN in its layout, then back to Keras'; dx straight into dx_. The kernel in cuDNN's
// layout is the forward's (the weights do not change between a forward and its backward).
const float* DeviceConv2D::backward_cudnn(const float* dz, float* kernel_grad,
                                          bool need_input_grad) {
  const float* d = operand(dz, batch_ * out_size_, stage_b_);
  if (kernel_grad) {
    kernel_grad_krsc_.resize(*ctx_.allocator, kernel_size_);
    cudnn_->backward_filter(operand(x_, batch_ * in_size_, stage_a_), d, kernel_grad_krsc_.data(),
                            batch_);
    krsc_to_hwio(kernel_grad_krsc_.data(), kernel_grad, patch_, filters_, ctx_.stream);
  }
  if (need_input_grad) cudnn_->backward_data(d, kernel_krsc_.data(), dx_.data(), batch_);
  return need_input_grad ? dx_.data() : nullptr;
}

const float* DeviceConv2D::backward(const float* dy, bool need_input_grad) {
  const std::int64_t rows = batch_ * out_pixels_;
  float* kernel_grad = params_.at(0).grad;
  float* bias_grad = use_bias_ ? params_.at(1).grad : nullptr;
  if (need_input_grad) dx_.resize(*ctx_.allocator, batch_ * in_size_);
  if (batch_ == 0) {  // no samples: zero gradients
    if (kernel_grad)
      check(cudaMemsetAsync(kernel_grad, 0, static_cast<std::size_t>(kernel_size_) * sizeof(float),
                            ctx_.stream),
            "cudaMemsetAsync (Conv2D kernel gradient)");
    if (bias_grad)
      check(cudaMemsetAsync(bias_grad, 0, static_cast<std::size_t>(filters_) * sizeof(float),
                            ctx_.stream),
            "cudaMemsetAsync (Conv2D bias gradient)");
    return need_input_grad ? dx_.data() : nullptr;
  }
  // dz = dL/d(conv + bias): through the activation, relu's derivative read from its output (as
  // the host layer does).
  const float* dz = dy;
  if (activation_ != nn::ActivationKind::linear) {
    dz_.resize(*ctx_.allocator, rows * filters_);
    const float* pre = activation_ == nn::ActivationKind::relu ? out_.data() : pre_.data();
    activation_backward(activation_, pre, out_.data(), dy, dz_.data(), rows, filters_, ctx_.stream);
    dz = dz_.data();
  }
  if (bias_grad) bias_gradient(dz, rows, bias_grad);
  if (!kernel_grad && !need_input_grad) return nullptr;
  if (path_ == Path::cudnn) return backward_cudnn(dz, kernel_grad, need_input_grad);
  const float* kernel =
      need_input_grad ? operand(params_.at(0).value, kernel_size_, stage_kernel_) : nullptr;

  if (identity_) {
    const float* d = operand(dz, rows * filters_, stage_b_);
    if (kernel_grad) gemm_weights(operand(x_, rows * patch_, stage_a_), d, kernel_grad, rows);
    if (need_input_grad) ctx_.gemm->backward_data(d, kernel, dx_.data(), rows, patch_, filters_);
    return need_input_grad ? dx_.data() : nullptr;
  }

  cols_.resize(*ctx_.allocator, std::min(batch_, chunk_) * out_pixels_ * patch_);
  for (std::int64_t b0 = 0; b0 < batch_; b0 += chunk_) {
    const std::int64_t n = std::min(chunk_, batch_ - b0);
    const std::int64_t chunk_rows = n * out_pixels_;
    const float* d = operand(dz + b0 * out_size_, chunk_rows * filters_, stage_b_);
    if (kernel_grad) {
      if (!cols_hold_x_) layers::im2col(x_ + b0 * in_size_, cols_.data(), n, geom_, ctx_.stream);
      if (b0 == 0) {
        gemm_weights(cols_.data(), d, kernel_grad, chunk_rows);
      } else {  // later chunks add their part, in chunk order
        dk_part_.resize(*ctx_.allocator, kernel_size_);
        ctx_.gemm->backward_weights(cols_.data(), d, dk_part_.data(), chunk_rows, patch_, filters_);
        layers::add_in_place(kernel_grad, dk_part_.data(), kernel_size_, ctx_.stream);
      }
    }
    if (need_input_grad) {  // dcols = dz K^T overwrites the im2col matrix, then the gather
      ctx_.gemm->backward_data(d, kernel, cols_.data(), chunk_rows, patch_, filters_);
      layers::col2im(cols_.data(), dx_.data() + b0 * in_size_, n, geom_, ctx_.stream);
    }
  }
  cols_hold_x_ = false;
  return need_input_grad ? dx_.data() : nullptr;
}

}  // namespace tandem::cuda::layers
