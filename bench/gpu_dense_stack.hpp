// bench/gpu_mlp_steps only: a stack of Dense layers resident on one GPU, timed as the device-
// resident step of seed-mlp and fashion-mlp (the engine trains through its CUDA replica instead).
//
// Parameters live in one flat device array in Keras weight order (layer 0's kernel, in x out
// row-major, then its bias, then layer 1's, ...), gradients in a second array of the same layout,
// so one fused optimizer launch (kernels.hpp) and one all-reduce cover them all. forward() keeps
// every layer's output for backward(); relu is fused into the GEMM's epilogue, tanh and sigmoid
// run as one kernel over the GEMM's output.
//
// Ownership: owns its buffers (from the allocator, which must outlive it) and its DenseGemm.
// Thread-safety: one thread at a time; all work queued on `stream`.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"
#include "cuda/ops/kernels.hpp"

namespace tandem::cuda {

struct DenseSpec {
  std::int64_t units = 0;
  Activation activation = Activation::linear;
};

class DenseStack {
 public:
  DenseStack(DeviceAllocator& allocator, cudaStream_t stream, Precision precision,
             std::int64_t input_width, std::vector<DenseSpec> layers);

  std::int64_t input_width() const { return widths_.front(); }
  std::int64_t output_width() const { return widths_.back(); }
  std::int64_t parameter_count() const { return parameter_count_; }
  float* parameters() { return parameters_.data(); }
  float* gradients() { return gradients_.data(); }

  /// Host <-> device copies of every parameter (parameter_count() floats, Keras order); they
  /// complete before returning.
  void upload_parameters(const float* host);
  void download_parameters(float* host);

  /// x: batch x input_width on the device. Returns the output (batch x output_width), valid until
  /// the next forward(). The batch may change from call to call (a last partial batch).
  const float* forward(const float* x, std::int64_t batch);
  /// dy: dLoss/d(output) for the last forward(); sets gradients() (nothing is accumulated).
  void backward(const float* dy);

 private:
  std::int64_t kernel_offset(std::size_t layer) const { return offsets_[layer]; }
  std::int64_t bias_offset(std::size_t layer) const {
    return offsets_[layer] + widths_[layer] * widths_[layer + 1];
  }

  DeviceAllocator& allocator_;
  cudaStream_t stream_;
  DenseGemm gemm_;
  std::vector<DenseSpec> layers_;
  std::vector<std::int64_t> widths_;   // input, then each layer's units
  std::vector<std::int64_t> offsets_;  // each layer's kernel in the flat arrays
  std::int64_t parameter_count_ = 0;
  DeviceBuffer parameters_, gradients_;
  std::vector<DeviceBuffer> outputs_;  // each layer's output (after its activation)
  DeviceBuffer grad_a_, grad_b_, scratch_;
  const float* input_ = nullptr;
  std::int64_t batch_ = 0;
};

}  // namespace tandem::cuda
