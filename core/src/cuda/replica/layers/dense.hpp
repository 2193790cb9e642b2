// Private (CUDA module): the device twin of nn::Dense — y = activation(x W + b) over the last
// axis, W the Keras (in x units) kernel, through the replica's DenseGemm (cuBLASLt, at the run's
// precision): the bias and a relu fused into the GEMM's epilogue, other activations as one
// kernel over the product (activations.hpp). Backward: dW = x^T dz, db = column sums of dz
// (fixed order), dx = dz W^T.
//
// Ownership: owns its buffers (from ctx.allocator); borrows ctx and the bound parameters.
// Thread-safety: one thread at a time; all work on ctx.stream.
#pragma once

#include <nlohmann/json.hpp>

#include "cuda/replica/device_layer.hpp"
#include "nn/activation_fn.hpp"

namespace tandem::cuda::layers {

class DeviceDense final : public DeviceLayer {
 public:
  DeviceDense(const nlohmann::json& config, const Shape& input_shape, const Shape& output_shape,
              DeviceContext& ctx);
  /// kernel (in x units), then bias (units) when use_bias.
  void bind(std::vector<DeviceParameter> params) override;
  const float* forward(const float* x, std::int64_t batch, bool training,
                       std::int64_t sample_offset) override;
  const float* backward(const float* dy, bool need_input_grad) override;

 private:
  std::string who_;
  DeviceContext& ctx_;
  std::int64_t in_ = 0, units_ = 0, rows_per_sample_ = 1;
  nn::ActivationKind activation_;
  bool use_bias_ = true;
  bool fused_ = false;  // the activation (linear or relu) runs in the GEMM's epilogue
  const float* input_ = nullptr;
  std::int64_t rows_ = 0;
  DeviceBuffer pre_, output_, grad_pre_, grad_input_, scratch_;
};

}  // namespace tandem::cuda::layers
