#include "cuda/ops/dense_gemm.hpp"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "cuda/ops/cuda_check.hpp"
#include "cuda/ops/low_precision.hpp"
#include "tandem/error.hpp"

namespace tandem::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // Hopper's recommended minimum

// Elements from a stored column-major matrix's first to its last (rows x cols, leading
// dimension ld), over `batch` of them `stride` apart.
std::int64_t extent(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                    std::int64_t stride) {
  return (batch - 1) * stride + ld * (cols - 1) + rows;
}

// The largest power of two, at most 256, that divides every address of `pointers` (null ones
// aside).
std::uint32_t common_alignment(std::initializer_list<const void*> pointers) {
  std::uintptr_t bits = 256;
  for (const void* p : pointers)
    if (p) bits |= reinterpret_cast<std::uintptr_t>(p);
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace

struct DenseGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

DenseGemm::DenseGemm(DeviceAllocator& allocator, cudaStream_t stream, Precision precision)
    : allocator_(allocator), stream_(stream), precision_(precision) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  workspace_bytes_ = kWorkspaceBytes;
  workspace_ = allocator_.allocate(workspace_bytes_);
}

DenseGemm::~DenseGemm() {
  for (auto& [key, plan] : plans_) delete plan;
  if (workspace_) allocator_.release(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

DenseGemm::Plan& DenseGemm::plan_for(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const auto [ta, tb, m, n, k, lda, ldb, ldc, epilogue, batch, stride_a, stride_b, stride_c,
              alignment] = key;
  auto plan = std::make_unique<Plan>();
  // Mixed precision: 16-bit operands, float32 sums (CUBLAS_COMPUTE_32F) and float32 output.
  const cublasComputeType_t compute =
      precision_ == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t operands = precision_ == Precision::bf16   ? CUDA_R_16BF
                                  : precision_ == Precision::fp16 ? CUDA_R_16F
                                                                  : CUDA_R_32F;
  check(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "set TRANSA");
  check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "set TRANSB");
  cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue == static_cast<int>(Epilogue::bias)) ep = CUBLASLT_EPILOGUE_BIAS;
  if (epilogue == static_cast<int>(Epilogue::relu_bias)) ep = CUBLASLT_EPILOGUE_RELU_BIAS;
  check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep),
        "set EPILOGUE");
  // Stored shapes (column-major): A is m x k (k x m when transposed), B is k x n (n x k).
  check(cublasLtMatrixLayoutCreate(&plan->a, operands, ta ? k : m, ta ? m : k, lda), "layout A");
  check(cublasLtMatrixLayoutCreate(&plan->b, operands, tb ? n : k, tb ? k : n, ldb), "layout B");
  check(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, m, n, ldc), "layout C");
  if (batch > 1) {
    const auto count = static_cast<std::int32_t>(batch);
    const std::pair<cublasLtMatrixLayout_t, std::int64_t> strided[] = {
        {plan->a, stride_a}, {plan->b, stride_b}, {plan->c, stride_c}};
    for (const auto& [layout, stride] : strided) {
      check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof count),
            "set BATCH_COUNT");
      check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof stride),
            "set STRIDED_BATCH_OFFSET");
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace_bytes_, sizeof workspace_bytes_),
        "set MAX_WORKSPACE_BYTES");
  // No in-place split-K reduction: its order of additions may vary from run to run.
  const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE |
                                CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                                CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                             &schemes, sizeof schemes),
        "set REDUCTION_SCHEME_MASK");
  // Only algorithms that read and write at the pointers' alignment.
  for (const cublasLtMatmulPreferenceAttributes_t which :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    check(cublasLtMatmulPreferenceSetAttribute(pref, which, &alignment, sizeof alignment),
          "set MIN_ALIGNMENT");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED: no heuristic for this configuration, which is no algorithm (said below).
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) check(st, "cublasLtMatmulAlgoGetHeuristic");
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)
    throw RunError("cuBLASLt has no algorithm for a " + std::to_string(m) + " x " +
                   std::to_string(n) + " x " + std::to_string(k) + " product in " +
                   (precision_ == Precision::bf16   ? "bf16"
                    : precision_ == Precision::fp16 ? "fp16"
                                                    : "float") +
                   (epilogue != static_cast<int>(Epilogue::none) ? " with a bias epilogue" : ""));
  plan->algo = result.algo;
  Plan* raw = plan.release();
  plans_.emplace(key, raw);
  return *raw;
}

const void* DenseGemm::operand(const float* x, std::int64_t count, DeviceBuffer& buffer) {
  if (!mixed()) return x;
  buffer.resize(allocator_, (count + 1) / 2);  // two 16-bit values per float of the buffer
  auto* low = reinterpret_cast<std::uint16_t*>(buffer.data());
  round_to_low(x, low, count, precision_ == Precision::bf16 ? LowFloat::bf16 : LowFloat::fp16,
               stream_);
  return low;
}

void DenseGemm::matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                       std::int64_t ldc, Epilogue epilogue, const float* bias) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty sum: C = 0 (no epilogue applies to nothing). Only a zero-sample shard gets here.
    check(cudaMemsetAsync(c, 0, static_cast<std::size_t>(ldc * n) * sizeof(float), stream_),
          "cudaMemsetAsync");
    return;
  }
  const void* op_a = operand(a, extent(trans_a ? k : m, trans_a ? m : k, lda, 1, 0), low_a_);
  const void* op_b = operand(b, extent(trans_b ? n : k, trans_b ? k : n, ldb, 1, 0), low_b_);
  const std::uint32_t alignment =
      common_alignment({op_a, op_b, c, epilogue != Epilogue::none ? bias : nullptr});
  Plan& plan = plan_for({trans_a, trans_b, m, n, k, lda, ldb, ldc, static_cast<int>(epilogue), 1, 0,
                         0, 0, alignment});
  if (epilogue != Epilogue::none)
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias),
          "set BIAS_POINTER");
  const float one = 1.0f, zero = 0.0f;
  check(cublasLtMatmul(handle_, plan.desc, &one, op_a, plan.a, op_b, plan.b, &zero, c, plan.c, c,
                       plan.c, &plan.algo, workspace_, workspace_bytes_, stream_),
        "cublasLtMatmul");
}

void DenseGemm::matmul_batched(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                               std::int64_t k, const float* a, std::int64_t lda,
                               std::int64_t stride_a, const float* b, std::int64_t ldb,
                               std::int64_t stride_b, float* c, std::int64_t ldc,
                               std::int64_t stride_c, std::int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (batch > std::numeric_limits<std::int32_t>::max())
    throw RunError("cuBLASLt takes at most 2^31 - 1 products in a batch, got " +
                   std::to_string(batch));
  if (k == 0) {
    check(cudaMemsetAsync(c, 0, static_cast<std::size_t>(stride_c * batch) * sizeof(float),
                          stream_),
          "cudaMemsetAsync");
    return;
  }
  const void* op_a =
      operand(a, extent(trans_a ? k : m, trans_a ? m : k, lda, batch, stride_a), low_a_);
  const void* op_b =
      operand(b, extent(trans_b ? n : k, trans_b ? k : n, ldb, batch, stride_b), low_b_);
  Plan& plan = plan_for({trans_a, trans_b, m, n, k, lda, ldb, ldc, static_cast<int>(Epilogue::none),
                         batch, stride_a, stride_b, stride_c, common_alignment({op_a, op_b, c})});
  const float one = 1.0f, zero = 0.0f;
  check(cublasLtMatmul(handle_, plan.desc, &one, op_a, plan.a, op_b, plan.b, &zero, c, plan.c, c,
                       plan.c, &plan.algo, workspace_, workspace_bytes_, stream_),
        "cublasLtMatmul (batched)");
}

// Row-major X (batch x in) is column-major X^T (in x batch); likewise W -> W^T (out x in) and
// Y -> Y^T (out x batch). So Y^T = W^T X^T is the column-major product with A = W (as stored),
// B = X, m = out, n = batch, k = in, and the bias (one per output) is a per-row epilogue bias.
void DenseGemm::forward(const float* x, const float* w, const float* bias, float* y,
                        std::int64_t batch, std::int64_t in, std::int64_t out, Epilogue epilogue) {
  matmul(false, false, out, batch, in, w, out, x, in, y, out, epilogue, bias);
}

// dX^T (in x batch) = W (in x out, column-major: A = W^T stored, transposed) dY^T (out x batch).
void DenseGemm::backward_data(const float* dy, const float* w, float* dx, std::int64_t batch,
                              std::int64_t in, std::int64_t out) {
  matmul(true, false, in, batch, out, w, out, dy, out, dx, in, Epilogue::none, nullptr);
}

// dW^T (out x in) = dY^T (out x batch) X (batch x in: X^T stored, transposed).
void DenseGemm::backward_weights(const float* x, const float* dy, float* dw, std::int64_t batch,
                                 std::int64_t in, std::int64_t out) {
  matmul(false, true, out, in, batch, dy, out, x, in, dw, out, Epilogue::none, nullptr);
}

}  // namespace tandem::cuda
