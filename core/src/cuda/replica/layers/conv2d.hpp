// Private (CUDA module): the device twin of nn::Conv2D (Keras Conv2D, channels_last), on two paths
// that compute the same function:
//
// im2col: an implicit im2col and cuBLASLt GEMMs through the replica's DenseGemm (so at the run's
// precision, fp32 or tf32):
//   forward   z = im2col(x) K + b, K the Keras HWIO kernel viewed as a (kh*kw*in) x filters
//             row-major matrix (no transpose); relu and linear fused into the GEMM's epilogue,
//             any other activation by cuda/ops/activations.hpp over z;
//   backward  dK = im2col(x)^T dz, db = column sums of dz, dx = col2im(dz K^T), col2im as a gather
//             (one thread per input element, no atomics).
// A 1x1 kernel with stride 1 needs no im2col: x is its own im2col matrix. The batch is processed
// in chunks whose im2col matrix stays under ~256 MiB; with a single chunk the forward's im2col is
// kept for backward. Operands of the GEMMs that are not 256-byte aligned (cuBLASLt's algorithm
// choice assumes it) are staged through aligned copies.
//
// cudnn: cuda/ops/cudnn_convolution.hpp (cuDNN's deterministic algorithms, found per batch size,
// at the run's precision) on NHWC activations, the kernel transposed HWIO -> KRSC before the
// forward (conv2d_layout.hpp; kept for the backward) and the kernel gradient KRSC -> HWIO after
// the backward filter; the bias and the activation stay ours (cuda/ops/kernels.hpp's
// bias_activation, then activations.hpp for the activations other than linear and relu), the bias
// gradient is the im2col path's column sums. cuDNN pads symmetrically only, so a geometry whose
// SAME padding is asymmetric (an even kernel, or some strides) stays on im2col.
//
// Which path: the environment variable TANDEM_CONV2D, read when the layer is built: "im2col",
// "cudnn" or "auto" (the default, also when empty; case-insensitive; anything else is a
// ConfigError naming the variable). auto decides per batch size, on the first forward of that
// batch size: when cuDNN can compute the geometry and finds algorithms for it (the backward ones
// too for a training forward), one whole forward of each path (the cuDNN one with its kernel
// transpose and bias kernel, which cuDNN's own search time leaves out) is timed on the stream
// (CUDA events, after a warm-up run, the best of three) and the faster one is kept for that batch
// size; where cuDNN fails or finds nothing, im2col (logged at debug level; a cuDNN that cannot
// even start is a warning). A batch size first seen in inference searches its backward algorithms
// on its first training forward (and falls back to im2col if there are none). cudnn forces cuDNN:
// a geometry (or batch size) it cannot compute is a ConfigError naming the layer and why. The
// searches and timings synchronize, so they happen only in the first step of a batch size (never
// captured in a CUDA graph: the replica captures a step the second time it comes); after that both
// paths only queue work on ctx.stream, with buffers that no longer grow. The choices are timings,
// so two runs (or two replicas) may pick differently and differ in the last bits; within a run a
// step's results are the same bits every time.
//
// Padding is TensorFlow's SAME (nn::window_along), strides and dilation as the host layer.
//
// Ownership: owns its buffers (from ctx.allocator) and its CudnnConvolution, borrows ctx (which
// outlives it) and the bound parameters. Thread-safety: one thread at a time; all work on
// ctx.stream.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cuda/ops/cudnn_convolution.hpp"
#include "cuda/replica/device_layer.hpp"
#include "cuda/replica/layers/window_math.hpp"
#include "nn/activation_fn.hpp"

namespace tandem::cuda::layers {

class DeviceConv2D final : public DeviceLayer {
 public:
  /// config: the host layer's config(); shapes per sample: (rows, cols, in) -> (out_rows,
  /// out_cols, filters). Throws ConfigError / ShapeError naming the layer when they disagree, and
  /// ConfigError when TANDEM_CONV2D is not a path or forces cuDNN where cuDNN cannot compute it.
  DeviceConv2D(const nlohmann::json& config, const Shape& input_shape, const Shape& output_shape,
               DeviceContext& ctx);
  /// kernel (kh*kw*in*filters), then bias (filters) when use_bias.
  void bind(std::vector<DeviceParameter> params) override;
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  enum class Path { im2col, cudnn };
  enum class Mode { im2col, cudnn, automatic };  // TANDEM_CONV2D

  /// TANDEM_CONV2D, or a ConfigError naming it and the values it takes.
  static Mode mode_from_environment();

  // The path of `batch`: chosen on its first forward (decide), kept after.
  Path path_for(const float* x, std::int64_t batch, bool training, float* z);
  Path decide(const float* x, std::int64_t batch, bool training, float* z);
  bool find_cudnn_backward(const float* x, const float* dy, std::int64_t batch);
  [[noreturn]] void refuse_cudnn(std::int64_t batch, const std::string& why) const;

  // z = conv(x) + b (relu fused when the activation is relu), on each path.
  void forward_im2col(const float* x, std::int64_t batch, float* z);
  void forward_cudnn(const float* x, std::int64_t batch, float* z);
  const float* kernel_krsc();  // the kernel in cuDNN's layout, transposed now
  const float* backward_cudnn(const float* dz, float* kernel_grad, bool need_input_grad);

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

  Mode mode_ = Mode::automatic;
  std::unique_ptr<CudnnConvolution> cudnn_;  // null when only im2col may run
  std::map<std::int64_t, Path> paths_;       // batch size -> its path, once chosen
  Path path_ = Path::im2col;                 // the last forward's

  const float* x_ = nullptr;  // the last forward's input (the caller keeps it)
  std::int64_t batch_ = 0;
  bool cols_hold_x_ = false;  // cols_ holds the im2col matrix of the whole last input
  DeviceBuffer out_, pre_, dz_, dx_, cols_;
  DeviceBuffer dk_part_, db_part_, sums_scratch_, zero_bias_;
  DeviceBuffer stage_a_, stage_b_, stage_kernel_, stage_bias_, stage_out_;
  DeviceBuffer kernel_krsc_, kernel_grad_krsc_;  // the cuDNN path's kernel and its gradient
};

}  // namespace tandem::cuda::layers
