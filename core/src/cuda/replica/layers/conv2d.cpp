// Private (CUDA module): DeviceConv2D (see conv2d.hpp): config parsing and the GEMM orchestration;
// the im2col / col2im kernels are in conv2d.cu. Ownership and thread-safety as the class.
#include "cuda/replica/layers/conv2d.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include "cuda/ops/activations.hpp"
#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/replica/layers/layer_config.hpp"
#include "cuda/replica/layers/layer_kernels.hpp"

namespace tandem::cuda::layers {

namespace {

constexpr std::int64_t kColsBudget = std::int64_t{64} << 20;  // floats (256 MiB) of im2col matrix
constexpr std::int64_t kColumnSumRows = std::int64_t{65535} * 256;  // column_sums' most rows
constexpr std::uintptr_t kGemmAlignment = 256;  // bytes, what DenseGemm's algorithms assume

bool gemm_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kGemmAlignment == 0;
}

}  // namespace

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

const float* DeviceConv2D::forward(const float* x, std::int64_t batch, bool /*training*/,
                                   std::int64_t /*sample_offset*/) {
  x_ = x;
  batch_ = batch;
  cols_hold_x_ = false;
  const std::int64_t rows = batch * out_pixels_;
  const bool keep_pre =
      activation_ != nn::ActivationKind::linear && activation_ != nn::ActivationKind::relu;
  out_.resize(*ctx_.allocator, rows * filters_);
  if (keep_pre) pre_.resize(*ctx_.allocator, rows * filters_);
  if (batch == 0) return out_.data();
  float* z = keep_pre ? pre_.data() : out_.data();
  const float* kernel = operand(params_.at(0).value, kernel_size_, stage_kernel_);
  const float* bias =
      use_bias_ ? operand(params_.at(1).value, filters_, stage_bias_) : zero_bias_.data();
  if (identity_) {
    gemm_forward(operand(x, rows * patch_, stage_a_), kernel, bias, z, rows);
  } else {
    cols_.resize(*ctx_.allocator, std::min(batch, chunk_) * out_pixels_ * patch_);
    for (std::int64_t b0 = 0; b0 < batch; b0 += chunk_) {
      const std::int64_t n = std::min(chunk_, batch - b0);
      layers::im2col(x + b0 * in_size_, cols_.data(), n, geom_, ctx_.stream);
      gemm_forward(cols_.data(), kernel, bias, z + b0 * out_size_, n * out_pixels_);
    }
    cols_hold_x_ = batch <= chunk_;
  }
  if (keep_pre)
    activation_forward(activation_, pre_.data(), out_.data(), rows, filters_, ctx_.stream);
  return out_.data();
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
