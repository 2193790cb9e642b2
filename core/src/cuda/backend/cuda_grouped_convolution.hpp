// Private (CUDA backend): the grouped 2-D convolution (backend::ConvolutionDesc::groups > 1:
// Keras' Conv2D groups, DepthwiseConv2D), computed directly by Tandem's kernels
// (cuda/ops/grouped_conv_kernels.cu) — cuDNN pads symmetrically only and the im2col path is one
// GEMM over every channel. Each call stands alone (no state between them).
// Ownership: borrows the backend, which outlives the operation. Thread-safety: one thread at a
// time; all work on the backend's stream.
#pragma once

#include <memory>

#include "backend/ops.hpp"

namespace tandem::cuda {

class CudaBackend;

std::unique_ptr<backend::Convolution2D> make_grouped_convolution(
    const backend::ConvolutionDesc& desc, CudaBackend& ops);

}  // namespace tandem::cuda
