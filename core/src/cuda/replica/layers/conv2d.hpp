// Private (CUDA module): the device twin of nn::Conv2D (Keras Conv2D, channels_last), as an
// implicit im2col and cuBLASLt GEMMs through the replica's DenseGemm (so at the run's precision,
// fp32 or tf32):
//   forward   z = im2col(x) K + b, K the Keras HWIO kernel viewed as a (kh*kw*in) x filters
//             row-major matrix (no transpose); relu and linear fused into the GEMM's epilogue,
//             any other activation by cuda/ops/activations.hpp over z;
//   backward  dK = im2col(x)^T dz, db = column sums of dz, dx = col2im(dz K^T), col2im as a gather
//             (one thread per input element, no atomics).
// A 1x1 kernel with stride 1 needs no im2col: x is its own im2col matrix. The batch is processed
// in chunks whose im2col matrix stays under ~256 MiB; with a single chunk the forward's im2col is
// kept for backward. Operands of the GEMMs that are not 256-byte aligned (cuBLASLt's algorithm
// choice assumes it) are staged through aligned copies. Padding is TensorFlow's SAME
// (nn::window_along), strides and dilation as the host layer.
//
// Ownership: owns its buffers (from ctx.allocator), borrows ctx (which outlives it) and the bound
// parameters. Thread-safety: one thread at a time; all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/window_math.hpp"
#include "nn/activation_fn.hpp"

namespace tandem::cuda::layers {

class DeviceConv2D final : public DeviceLayer {
 public:
  /// config: the host layer's config(); shapes per sample: (rows, cols, in) -> (out_rows,
  /// out_cols, filters). Throws ConfigError / ShapeError naming the layer when they disagree.
  DeviceConv2D(const nlohmann::json& config, const Shape& input_shape, const Shape& output_shape,
               DeviceContext& ctx);
  /// kernel (kh*kw*in*filters), then bias (filters) when use_bias.
  void bind(std::vector<DeviceParameter> params) override;
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  const float* operand(const float* p, std::int64_t n, DeviceBuffer& stage);
  void gemm_forward(const float* cols, const float* kernel, const float* bias, float* z,
                    std::int64_t rows);
  void gemm_weights(const float* cols, const float* dz, float* dk, std::int64_t rows);
  void bias_gradient(const float* dz, std::int64_t rows, float* db);
  void copy(float* dst, const float* src, std::int64_t n);

  DeviceContext& ctx_;
  std::string who_;
  window::Geometry2D geom_;
  std::int64_t filters_ = 0;
  nn::ActivationKind activation_ = nn::ActivationKind::linear;
  bool use_bias_ = true;
  std::int64_t patch_ = 0;        // kh * kw * in: the im2col matrix's columns
  std::int64_t out_pixels_ = 0;   // out_rows * out_cols: its rows per sample
  std::int64_t in_size_ = 0;      // floats per input sample
  std::int64_t out_size_ = 0;     // floats per output sample
  std::int64_t kernel_size_ = 0;  // floats of the kernel
  bool identity_ = false;         // 1x1, stride 1, no padding: x is its own im2col matrix
  std::int64_t chunk_ = 1;        // samples per im2col chunk

  const float* x_ = nullptr;  // the last forward's input (the caller keeps it)
  std::int64_t batch_ = 0;
  bool cols_hold_x_ = false;  // cols_ holds the im2col matrix of the whole last input
  DeviceBuffer out_, pre_, dz_, dx_, cols_;
  DeviceBuffer dk_part_, db_part_, sums_scratch_, zero_bias_;
  DeviceBuffer stage_a_, stage_b_, stage_kernel_, stage_bias_, stage_out_;
};

}  // namespace tandem::cuda::layers
