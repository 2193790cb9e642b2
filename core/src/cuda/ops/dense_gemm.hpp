// Private (CUDA module): the three GEMMs of a Dense layer through cuBLASLt, row-major as Keras
// stores them (x: batch x in, W: in x out, y: batch x out), with the bias and relu fused into the
// forward product's epilogue.
//
// Precision: "fp32" computes in full float32; "tf32" lets the tensor cores round the inputs to
// TF32 (10-bit mantissa) and accumulate in float32 - PyTorch's allow_tf32, Keras' default on
// Ampere and later. "bf16" and "fp16" (mixed precision, util/precision.hpp) round both operands to
// bfloat16 or half first (low_precision.hpp, into scratch of their own), multiply them on the
// tensor cores, accumulate and write float32: the caller's matrices, bias and results stay
// float32. Algorithms are chosen once per shape and kept; those whose split-K reduction
// could add in a varying order are excluded, so results are the same bits run to run.
//
// Ownership: owns its cuBLASLt handle, layouts and workspace (from the allocator, which must
// outlive it). Thread-safety: one thread at a time; all work on `stream`.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "cuda/ops/device_allocator.hpp"

namespace tandem::cuda {

enum class Precision { fp32, tf32, bf16, fp16 };

class DenseGemm {
 public:
  enum class Epilogue { none, bias, relu_bias };

  DenseGemm(DeviceAllocator& allocator, cudaStream_t stream, Precision precision);
  ~DenseGemm();
  DenseGemm(const DenseGemm&) = delete;
  DenseGemm& operator=(const DenseGemm&) = delete;

  Precision precision() const { return precision_; }

  /// y = x W (+ bias) (then relu), per the epilogue; bias has `out` elements.
  void forward(const float* x, const float* w, const float* bias, float* y, std::int64_t batch,
               std::int64_t in, std::int64_t out, Epilogue epilogue);
  /// dx = dy W^T.
  void backward_data(const float* dy, const float* w, float* dx, std::int64_t batch,
                     std::int64_t in, std::int64_t out);
  /// dW = x^T dy.
  void backward_weights(const float* x, const float* dy, float* dw, std::int64_t batch,
                        std::int64_t in, std::int64_t out);

  /// The general column-major product C (m x n) = op(A) op(B) (for the benchmarks' cuBLAS
  /// floor, and the backend's other products).
  void matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
              const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
              std::int64_t ldc, Epilogue epilogue, const float* bias);
  /// `batch` such products, without epilogue, the i-th matrices at a + i * stride_a (b, c alike).
  void matmul_batched(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                      const float* a, std::int64_t lda, std::int64_t stride_a, const float* b,
                      std::int64_t ldb, std::int64_t stride_b, float* c, std::int64_t ldc,
                      std::int64_t stride_c, std::int64_t batch);

 private:
  struct Plan;
  // trans_a, trans_b, m, n, k, lda, ldb, ldc, epilogue, batch, stride_a, stride_b, stride_c, and
  // the alignment in bytes that every pointer of the product has (a power of two, at most 256:
  // cuBLASLt's algorithms assume 256 unless told less, and a pipeline's micro-batch starts
  // anywhere in its batch).
  using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, std::int64_t, int, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, std::uint32_t>;
  Plan& plan_for(const Key& key);
  /// In bf16 or fp16: `count` floats from `x` rounded into `buffer` (grown as needed); the
  /// rounded copy, which the product then reads. Else `x` itself.
  const void* operand(const float* x, std::int64_t count, DeviceBuffer& buffer);
  bool mixed() const { return precision_ == Precision::bf16 || precision_ == Precision::fp16; }

  DeviceAllocator& allocator_;
  cudaStream_t stream_;
  Precision precision_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, Plan*> plans_;
  DeviceBuffer low_a_, low_b_;  // the rounded operands of the last mixed-precision product
};

}  // namespace tandem::cuda
