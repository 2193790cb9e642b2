// bfloat16 GEMM on the CPU: operands rounded to bfloat16 into per-thread buffers, then one oneDNN
// matmul primitive (brgemm on AVX-512 BF16: bf16 products, float32 sums, float32 C) per shape,
// kept per thread. Measured against dnnl_sgemm on the seed-mlp's products (2 threads): 1.8-2.0x.
#include <dnnl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "backend/cpu/bf16_buffer.hpp"
#include "backend/cpu/bf16_rounding.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/packed_bf16_matmul.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::cpu {

namespace {

// A product's shape and operand layouts, and the team it was planned for.
using Key =
    std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, int>;

// What one thread keeps: its bfloat16 operand buffers and its products.
struct ThreadState {
  Bf16Buffer a, b;
  std::map<Key, std::unique_ptr<PackedBf16Matmul>> products;
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

// gemm_bf16 of operands already rounded to bfloat16 bits (same layouts).
void matmul_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 std::int64_t batch, const std::uint16_t* a, const std::uint16_t* b,
                 const float* bias, float* c) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {  // an empty sum
    for (std::int64_t i = 0; i < batch * m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const Key key{trans_a, trans_b, m, n, k, batch, bias != nullptr, compute_threads()};
  std::unique_ptr<PackedBf16Matmul>& product = thread_state().products[key];
  if (!product) {
    const auto layout = [](bool transposed) {
      return transposed ? Bf16Layout::transposed : Bf16Layout::row_major;
    };
    product = std::make_unique<PackedBf16Matmul>(
        Bf16MatmulDesc{m, n, k, layout(trans_a), layout(trans_b), bias != nullptr, false, batch});
  }
  product->run(a, b, bias, c);
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               std::int64_t batch, const float* a, const float* b, const float* bias, float* c) {
  ThreadState& s = thread_state();
  const std::int64_t a_size = batch * m * k, b_size = batch * k * n;
  std::uint16_t* a_low = s.a.grown_to(a_size);
  std::uint16_t* b_low = s.b.grown_to(b_size);
  round_to_bf16(a, a_size, a_low);
  round_to_bf16(b, b_size, b_low);
  matmul_bf16(trans_a, trans_b, m, n, k, batch, a_low, b_low, bias, c);
}

std::string bf16_unavailable() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) return "";
  return "this CPU (as oneDNN sees it) lacks the AVX-512 BF16 instructions (avx512_bf16 in "
         "/proc/cpuinfo: Intel Cooper Lake or Sapphire Rapids and later, AMD Zen 4 and later) "
         "that bf16 products need";
}

}  // namespace tandem::cpu
