// bfloat16 GEMM on the CPU: operands rounded to bfloat16 into per-thread buffers, then one oneDNN
// matmul primitive (brgemm on AVX-512 BF16: bf16 products, float32 sums, float32 C) per shape,
// kept per thread. Measured against dnnl_sgemm on the seed-mlp's products (2 threads): 1.8-2.0x.
#include <dnnl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "backend/bfloat16.hpp"
#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/bf16_buffer.hpp"
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

// bf16_bits over n values. The baseline build's SSE2 loop spends most of its time packing 32-bit
// lanes into 16-bit ones; the same code compiled for AVX-512 (vpmovdw) rounds 2.4x as fast,
// about as fast as memory moves the values (16M values: 11 against 4.5 ms on 2 threads). Every
// CPU with AVX-512 BF16 has AVX-512 F and BW; the baseline loop serves any other caller.
[[gnu::always_inline]] inline void round_values(const float* from, std::int64_t n,
                                                std::uint16_t* to) {
  for (std::int64_t i = 0; i < n; ++i) to[i] = backend::bf16_bits(from[i]);
}

// The tile edge of the transposed rounding.
constexpr std::int64_t kTransposeTile = 64;

// Columns [c0, c1) of `from` (rows x cols) rounded into rows [c0, c1) of `to` (cols x rows),
// tile by tile. Compiled for AVX-512 too, as round_values: 15 against 21 ms for 2048 x 8000.
[[gnu::always_inline]] inline void transposed_tiles(const float* from, std::int64_t rows,
                                                    std::int64_t cols, std::int64_t c0,
                                                    std::int64_t c1, std::uint16_t* to) {
  for (std::int64_t t = c0; t < c1; t += kTransposeTile) {
    const std::int64_t t_end = std::min(c1, t + kTransposeTile);
    for (std::int64_t r0 = 0; r0 < rows; r0 += kTransposeTile) {
      const std::int64_t r1 = std::min(rows, r0 + kTransposeTile);
      for (std::int64_t c = t; c < t_end; ++c) {
        std::uint16_t* out = to + c * rows;
        for (std::int64_t r = r0; r < r1; ++r) out[r] = backend::bf16_bits(from[r * cols + c]);
      }
    }
  }
}

// Rows [r0, r1) of columns [c0, c1) of `from` (cols wide) into `to` ((c1 - c0) wide).
[[gnu::always_inline]] inline void column_slice(const float* from, std::int64_t cols,
                                                std::int64_t c0, std::int64_t c1, std::int64_t r0,
                                                std::int64_t r1, std::uint16_t* to) {
  for (std::int64_t r = r0; r < r1; ++r)
    round_values(from + r * cols + c0, c1 - c0, to + r * (c1 - c0));
}

// BA16a64b2a's block: 32 rows (16 pairs) by 64 columns.
constexpr std::int64_t kBlockRows = 32, kBlockCols = 64, kBlockValues = kBlockRows * kBlockCols;

// Column blocks [b0, b1) of round_to_bf16_ba16a64b2a.
[[gnu::always_inline]] inline void amx_blocks(const float* from, std::int64_t rows,
                                              std::int64_t cols, std::int64_t b0, std::int64_t b1,
                                              std::uint16_t* to) {
  const std::int64_t row_blocks = (rows + kBlockRows - 1) / kBlockRows;
  for (std::int64_t cb = b0; cb < b1; ++cb) {
    const std::int64_t col0 = cb * kBlockCols;
    const bool full_cols = col0 + kBlockCols <= cols;
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      std::uint16_t* block = to + (cb * row_blocks + rb) * kBlockValues;
      for (std::int64_t pair = 0; pair < kBlockRows / 2; ++pair) {
        const std::int64_t r = rb * kBlockRows + 2 * pair;
        std::uint16_t* out = block + pair * 2 * kBlockCols;
        if (full_cols && r + 1 < rows) {
          const float* even = from + r * cols + col0;
          const float* odd = even + cols;
          for (std::int64_t c = 0; c < kBlockCols; ++c) {
            out[2 * c] = backend::bf16_bits(even[c]);
            out[2 * c + 1] = backend::bf16_bits(odd[c]);
          }
          continue;
        }
        for (std::int64_t c = 0; c < kBlockCols; ++c) {  // an edge: zeros past the matrix
          const bool in_col = col0 + c < cols;
          out[2 * c] = in_col && r < rows ? backend::bf16_bits(from[r * cols + col0 + c]) : 0;
          out[2 * c + 1] =
              in_col && r + 1 < rows ? backend::bf16_bits(from[(r + 1) * cols + col0 + c]) : 0;
        }
      }
    }
  }
}

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

void round_to_bf16(const float* from, std::int64_t n, std::uint16_t* to) {
  parallel_for(n, kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    run_loop<round_values>(from + b, e - b, to + b);
  });
}

void round_to_bf16_transposed(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to) {
  // Square tiles: a tile's source rows (64 floats each) stay in the L1 cache while its
  // destination rows (64 values each) are written whole. Threads split the tile columns.
  const std::int64_t col_tiles = (cols + kTransposeTile - 1) / kTransposeTile;
  const std::int64_t min_tiles = std::max<std::int64_t>(
      1, kMemoryBoundChunk / std::max<std::int64_t>(1, kTransposeTile * rows));
  parallel_for(col_tiles, min_tiles, [&](std::int64_t t0, std::int64_t t1) {
    const std::int64_t c0 = t0 * kTransposeTile, c1 = std::min(cols, t1 * kTransposeTile);
    run_loop<transposed_tiles>(from, rows, cols, c0, c1, to);
  });
}

void round_columns_to_bf16(const float* from, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                           std::int64_t c1, std::uint16_t* to) {
  const std::int64_t min_rows =
      std::max<std::int64_t>(1, kMemoryBoundChunk / std::max<std::int64_t>(1, c1 - c0));
  parallel_for(rows, min_rows, [&](std::int64_t r0, std::int64_t r1) {
    run_loop<column_slice>(from, cols, c0, c1, r0, r1, to);
  });
}

void round_to_bf16_ba16a64b2a(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to) {
  const std::int64_t col_blocks = (cols + kBlockCols - 1) / kBlockCols;
  const std::int64_t min_blocks =
      std::max<std::int64_t>(1, kMemoryBoundChunk / std::max<std::int64_t>(1, kBlockCols * rows));
  parallel_for(col_blocks, min_blocks, [&](std::int64_t b0, std::int64_t b1) {
    run_loop<amx_blocks>(from, rows, cols, b0, b1, to);
  });
}

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
