// Private (CUDA module): Conv2D's kernel between the Keras layout and cuDNN's. Keras stores the
// kernel HWIO, (kh, kw, in, filters) row-major, which the im2col path reads as a (kh*kw*in) x
// filters matrix; cuDNN's NHWC filter layout is (filters, kh, kw, in), KRSC, the transpose of that
// matrix. Plain declarations (C++17, no Tandem headers), so nvcc and the C++20 layer code share
// them; the kernels are in conv2d_layout.cu.
//
// Each launcher is one kernel launch queued on `stream` (none when the kernel is empty); pointers
// are device memory of the current device, source and destination must not overlap. Pure data
// movement: the values are copied bit for bit. Ownership: none (borrowed pointers).
// Thread-safety: any thread, ordered by the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

/// krsc = the HWIO kernel `hwio` (patch = kh*kw*in rows of `filters`) in cuDNN's KRSC layout
/// (`filters` rows of `patch`): krsc[f * patch + p] = hwio[p * filters + f].
void hwio_to_krsc(const float* hwio, float* krsc, std::int64_t patch, std::int64_t filters,
                  cudaStream_t stream);

/// hwio = a KRSC kernel (a cuDNN filter gradient) in the Keras layout: the inverse of
/// hwio_to_krsc, hwio[p * filters + f] = krsc[f * patch + p].
void krsc_to_hwio(const float* krsc, float* hwio, std::int64_t patch, std::int64_t filters,
                  cudaStream_t stream);

}  // namespace tandem::cuda
