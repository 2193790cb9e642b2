// Private (CUDA module): one 2-D convolution geometry through cuDNN: forward, backward data and
// backward filter of NHWC float activations (CUDNN_TENSOR_NHWC) with a filter in cuDNN's NHWC
// filter layout, (filters, kh, kw, in) row-major ("KRSC"; a Keras HWIO kernel transposed). It is
// a cross-correlation, as Keras' Conv2D, with strides, dilation and zero padding that cuDNN only
// has symmetric (as much after the input as before it): supports() says which geometries it takes.
//
// Precision: fp32 computes in true float32 (CUDNN_FMA_MATH: no TF32 tensor cores); tf32 lets cuDNN
// use tensor-op math (CUDNN_DEFAULT_MATH, TF32 on Ampere and later), like DenseGemm.
//
// Algorithms: each of the three operations chooses its algorithm per batch size, the first time
// that batch size comes (or when find_*() is called), with cudnnFind*AlgorithmEx on the real
// buffers: the fastest one that cuDNN marks deterministic (CUDNN_DETERMINISTIC: no atomics, so a
// rerun gives the same bits) and whose workspace fits kMaxWorkspaceBytes. The choice is kept; the
// search synchronizes the stream and runs every candidate, so it belongs to a step that is not
// captured in a CUDA graph (it refuses to run while the stream is being captured). An
// operation's first run with a batch size may grow the shared workspace to what its choice needs;
// after that it only queues work on the stream: no allocation, no synchronization.
//
// Uses cuDNN's legacy convolution API (cudnnConvolutionForward and friends), deprecated in cuDNN 9
// but complete, and the only one with a built-in algorithm search; its types stay inside the .cpp.
//
// Ownership: owns its descriptors and per-batch plans; shares one cuDNN handle (bound to the stream
// with cudnnSetStream) and one workspace (from the allocator) with every other CudnnConvolution on
// the same allocator and stream; the allocator must outlive it, and `stream` must be the
// allocator's stream (the workspace is reused in stream order). Thread-safety: one thread at a
// time per stream (the replica's); instances on different streams are independent.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/ops/dense_gemm.hpp"
#include "cuda/ops/device_allocator.hpp"

namespace tandem::cuda {

class CudnnConvolution {
 public:
  /// The most workspace an algorithm may use: 256 MiB, the budget of the im2col path's im2col
  /// matrix (conv2d.cpp), so neither path needs much more memory than the other; faster algorithms
  /// that need more (FFT ones on large images) are passed over.
  static constexpr std::size_t kMaxWorkspaceBytes = std::size_t{256} << 20;

  /// One convolution: per-sample NHWC input (in_rows, in_cols, in_channels), `filters` kernels of
  /// kernel_rows x kernel_cols taps, strides, dilation and the zero padding on each side.
  struct Geometry {
    std::int64_t in_rows = 0, in_cols = 0, in_channels = 0;
    std::int64_t kernel_rows = 1, kernel_cols = 1, filters = 0;
    std::int64_t stride_rows = 1, stride_cols = 1;
    std::int64_t dilation_rows = 1, dilation_cols = 1;
    std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;

    std::int64_t out_rows() const;  // (in + top + bottom - dilated kernel) / stride + 1
    std::int64_t out_cols() const;
  };

  /// Why cuDNN cannot compute `g`, in words, or "" when it can: padding that is not the same on
  /// both sides of an axis (TensorFlow's SAME with an even kernel or a stride pads one more row or
  /// column after the input than before it, and cuDNN pads both sides equally), sizes that are not
  /// positive, or a per-sample tensor or the filter with 2^31 elements or more (cuDNN's legacy
  /// descriptors count in int). Pure arithmetic: needs no GPU.
  static std::string unsupported_reason(const Geometry& g);
  static bool supports(const Geometry& g) { return unsupported_reason(g).empty(); }
  /// The largest batch whose input and output tensors cuDNN can describe (< 2^31 elements each).
  static std::int64_t max_batch(const Geometry& g);

  /// Creates the descriptors (and, for the first instance on this allocator and stream, the cuDNN
  /// handle) for the device of `allocator`. Throws RunError when `g` is not supported (the reason)
  /// or when cuDNN fails (what failed, in words).
  CudnnConvolution(const Geometry& g, DeviceAllocator& allocator, cudaStream_t stream,
                   Precision precision);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  const Geometry& geometry() const { return geometry_; }
  Precision precision() const { return precision_; }
  /// "3x3 convolution (strides 1x1, dilation 1x1, padding 1x1) of 28x28x1 inputs into 32 filters".
  std::string describe() const;

  /// y = conv(x, w) for `batch` samples: x (batch, in_rows, in_cols, in_channels), w (filters,
  /// kernel_rows, kernel_cols, in_channels), y (batch, out_rows, out_cols, filters); y overwritten.
  void forward(const float* x, const float* w, float* y, std::int64_t batch);
  /// dx = dL/dx from dy = dL/dy; dx overwritten.
  void backward_data(const float* dy, const float* w, float* dx, std::int64_t batch);
  /// dw = dL/dw summed over the batch, in the filter layout above; dw overwritten (not added to).
  void backward_filter(const float* x, const float* dy, float* dw, std::int64_t batch);

  /// The algorithm searches, run now on these buffers unless `batch` was searched before (their
  /// outputs are overwritten; inputs only read, their values do not matter). True when an
  /// algorithm was found; false when none qualifies (then the operation throws for this batch).
  /// Throws RunError when the stream is being captured or cuDNN fails.
  bool find_forward(const float* x, const float* w, float* y, std::int64_t batch);
  bool find_backward_data(const float* dy, const float* w, float* dx, std::int64_t batch);
  bool find_backward_filter(const float* x, const float* dy, float* dw, std::int64_t batch);

  /// Whether the searches of `batch` ran: all three (backward) or the forward's.
  bool forward_searched(std::int64_t batch) const;
  bool backward_searched(std::int64_t batch) const;
  /// The time cuDNN's search measured for the chosen forward algorithm of `batch`, in
  /// milliseconds; negative when none was found or searched.
  float forward_ms(std::int64_t batch) const;
  /// The choices of `batch` in words ("forward: algorithm 1 (0.052 ms, 0 B of workspace); ..."),
  /// for logs and errors.
  std::string choices(std::int64_t batch) const;

 private:
  struct Impl;  // cuDNN's types (deprecated in cuDNN 9) stay in the .cpp

  Geometry geometry_;
  Precision precision_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cuda
