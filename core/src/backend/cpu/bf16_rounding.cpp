// The bulk bf16 roundings. Each layout has a baseline loop (plain C++, any x86-64) and, where the
// compiler's vectorisation of that loop leaves time on the table, an AVX-512 version with
// intrinsics; avx512_copy.hpp picks one at run time and tests run both.
//
// Measured on seed-mlp's operands (2 threads of an AMX Xeon, huge-page buffers):
// - plain: the baseline loop compiled for AVX-512 (vpmovdw) rounds as fast as memory moves the
//   values (16M values: 4.5 ms);
// - transposed, 2048 x 8000: 5.3-5.9 ms against 9-10 for 64 x 64 scalar tiles compiled for
//   AVX-512 with the source in the L3 cache, 7.8 against 10.5 from memory. Two rows are rounded
//   into one vector of (even, odd) pairs of 16-bit values, 16 such vectors are transposed as 32-bit
//   words, and each lands as 32 values of one output row;
// - blocked (BA16a64b2a), 4000 x 4000: 2.0-2.8 ms against 7.0-7.8 in the L3 cache, 3.5 against
//   8.5 from memory (28 GB/s, about what this VM's memory gives). The same pairs are the
//   layout's own unit, so a block is 64 stores; and threads take row blocks, so each reads its
//   rows front to back instead of 64-column strips down the whole matrix.
#include "backend/cpu/bf16_rounding.hpp"

// GCC 12's AVX-512 intrinsics pass a deliberately undefined vector (_mm512_undefined_epi32) as the
// unused merge source, which -Wmaybe-uninitialized reports at every inlined use (GCC bug 105593,
// fixed in GCC 13). The report points into the header, so silencing it around the include keeps
// the warning for this file's own code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>

#include "backend/bfloat16.hpp"
#include "backend/cpu/avx512_copy.hpp"
#include "backend/cpu/parallel.hpp"

namespace tandem::cpu {

namespace {

using backend::bf16_bits;

// ---- Baseline loops -------------------------------------------------------------------------

[[gnu::always_inline]] inline void round_values(const float* from, std::int64_t n,
                                                std::uint16_t* to) {
  for (std::int64_t i = 0; i < n; ++i) to[i] = bf16_bits(from[i]);
}

// Rows [r0, r1) of columns [c0, c1) of `from` (cols wide) into `to` ((c1 - c0) wide).
[[gnu::always_inline]] inline void column_slice(const float* from, std::int64_t cols,
                                                std::int64_t c0, std::int64_t c1, std::int64_t r0,
                                                std::int64_t r1, std::uint16_t* to) {
  for (std::int64_t r = r0; r < r1; ++r)
    round_values(from + r * cols + c0, c1 - c0, to + r * (c1 - c0));
}

// The transposed rounding's unit of work: 16 columns of `from`, all its rows.
constexpr std::int64_t kStripColumns = 16;
// The baseline's square tiles: a tile's source rows stay in the L1 cache while its destination
// rows are written whole.
constexpr std::int64_t kTransposeTile = 64;

// Columns [c0, c1) of `from` (rows x cols) rounded into rows [c0, c1) of `to` (cols x rows).
void transposed_baseline(const float* from, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                         std::int64_t c1, std::uint16_t* to) {
  for (std::int64_t t = c0; t < c1; t += kTransposeTile) {
    const std::int64_t t_end = std::min(c1, t + kTransposeTile);
    for (std::int64_t r0 = 0; r0 < rows; r0 += kTransposeTile) {
      const std::int64_t r1 = std::min(rows, r0 + kTransposeTile);
      for (std::int64_t c = t; c < t_end; ++c) {
        std::uint16_t* out = to + c * rows;
        for (std::int64_t r = r0; r < r1; ++r) out[r] = bf16_bits(from[r * cols + c]);
      }
    }
  }
}

// BA16a64b2a's block: 32 rows (16 pairs) by 64 columns.
constexpr std::int64_t kBlockRows = 32, kBlockCols = 64, kBlockValues = kBlockRows * kBlockCols;

std::int64_t blocks_of(std::int64_t n, std::int64_t per_block) {
  return (n + per_block - 1) / per_block;
}

// The block of M (rows x cols) at row block rb and column block cb, M(r, c) given by value(r, c)
// inside the matrix and zero past it.
template <class Value>
[[gnu::always_inline]] inline void fill_block(std::int64_t rows, std::int64_t cols, std::int64_t rb,
                                              std::int64_t cb, Value value, std::uint16_t* block) {
  for (std::int64_t pair = 0; pair < kBlockRows / 2; ++pair) {
    const std::int64_t r = rb * kBlockRows + 2 * pair;
    std::uint16_t* out = block + pair * 2 * kBlockCols;
    for (std::int64_t c = 0; c < kBlockCols; ++c) {
      const std::int64_t col = cb * kBlockCols + c;
      out[2 * c] = r < rows && col < cols ? value(r, col) : 0;
      out[2 * c + 1] = r + 1 < rows && col < cols ? value(r + 1, col) : 0;
    }
  }
}

// Row blocks [rb0, rb1) of round_to_bf16_ba16a64b2a (M stored plainly), all their column blocks.
void blocked_baseline(const float* from, std::int64_t rows, std::int64_t cols, std::int64_t rb0,
                      std::int64_t rb1, std::uint16_t* to) {
  const std::int64_t row_blocks = blocks_of(rows, kBlockRows);
  const auto value = [&](std::int64_t r, std::int64_t c) { return bf16_bits(from[r * cols + c]); };
  for (std::int64_t rb = rb0; rb < rb1; ++rb)
    for (std::int64_t cb = 0; cb < blocks_of(cols, kBlockCols); ++cb)
      fill_block(rows, cols, rb, cb, value, to + (cb * row_blocks + rb) * kBlockValues);
}

// Column blocks [cb0, cb1) of round_to_bf16_ba16a64b2a with M stored transposed, all their row
// blocks.
void blocked_transposed_baseline(const float* from, std::int64_t rows, std::int64_t cols,
                                 std::int64_t cb0, std::int64_t cb1, std::uint16_t* to) {
  const std::int64_t row_blocks = blocks_of(rows, kBlockRows);
  const auto value = [&](std::int64_t r, std::int64_t c) { return bf16_bits(from[c * rows + r]); };
  for (std::int64_t cb = cb0; cb < cb1; ++cb)
    for (std::int64_t rb = 0; rb < row_blocks; ++rb)
      fill_block(rows, cols, rb, cb, value, to + (cb * row_blocks + rb) * kBlockValues);
}

// ---- AVX-512 versions -----------------------------------------------------------------------

#define TANDEM_AVX512_INLINE [[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline

// bf16_bits of 16 floats (given as their bits), one per 32-bit lane, in the lane's low half.
TANDEM_AVX512_INLINE __m512i bf16_lanes(__m512i bits) {
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i half = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, half), 16);
  return _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40));  // a quiet NaN
}

// The first n of 16 lanes (none when n <= 0).
TANDEM_AVX512_INLINE __mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? __mmask16{0xffff} : n <= 0 ? __mmask16{0} : __mmask16((1u << n) - 1);
}

// Up to 16 values of two rows, rounded and paired: lane i holds (even[i], odd[i]) as the low and
// high 16 bits. Lanes outside `lanes` and a null row's are zeros.
TANDEM_AVX512_INLINE __m512i paired_rows(const float* even, const float* odd, __mmask16 lanes) {
  const __m512i low = even ? bf16_lanes(_mm512_maskz_loadu_epi32(lanes, even)) : __m512i{};
  const __m512i high = odd ? bf16_lanes(_mm512_maskz_loadu_epi32(lanes, odd)) : __m512i{};
  return _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
}

// Row r of `from` at column c, or null past the last row.
TANDEM_AVX512_INLINE const float* row_at(const float* from, std::int64_t rows, std::int64_t cols,
                                         std::int64_t r, std::int64_t c) {
  return r < rows ? from + r * cols + c : nullptr;
}

// The 16 x 16 matrix of 32-bit words in w[0..15] (row i in w[i]) transposed in place.
TANDEM_AVX512_INLINE void transpose_words(__m512i* w) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {  // 2 x 2 blocks of words
    t[2 * i] = _mm512_unpacklo_epi32(w[2 * i], w[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(w[2 * i], w[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // 4 x 4 blocks
    w[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    w[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    w[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    w[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i)  // 128-bit lanes: 8 x 8 blocks
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(w[8 * i + j], w[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_i32x4(w[8 * i + j], w[8 * i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {  // 16 x 16
    w[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    w[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

// transposed_baseline's columns [c0, c1), c0 a multiple of kStripColumns: strip by strip, 32
// rows at a time. Word j of pair vector i is (row r + 2i, row r + 2i + 1) of column c + j, so
// after the transpose vector j is rows r .. r + 31 of column c + j: 32 values of output row c + j.
[[gnu::target("avx512f,avx512bw")]] void transposed_avx512(const float* from, std::int64_t rows,
                                                           std::int64_t cols, std::int64_t c0,
                                                           std::int64_t c1, std::uint16_t* to) {
  for (std::int64_t c = c0; c < c1; c += kStripColumns) {
    const std::int64_t strip = std::min(kStripColumns, c1 - c);
    const __mmask16 lanes = first_lanes(strip);
    for (std::int64_t r = 0; r < rows; r += 32) {
      // The next 32 rows' lines: no hardware prefetcher follows a column down the rows (the
      // source is usually out of the caches: 7.8 against 10.5 ms for 2048 x 8000).
      for (std::int64_t ahead = r + 32; ahead < std::min(rows, r + 64); ++ahead)
        _mm_prefetch(reinterpret_cast<const char*>(from + ahead * cols + c), _MM_HINT_T0);
      __m512i w[16];
      for (int i = 0; i < 16; ++i)
        w[i] = paired_rows(row_at(from, rows, cols, r + 2 * i, c),
                           row_at(from, rows, cols, r + 2 * i + 1, c), lanes);
      transpose_words(w);
      const std::int64_t left = rows - r;
      const __mmask32 kept = left >= 32 ? ~__mmask32{0} : __mmask32((1u << left) - 1);
      for (std::int64_t j = 0; j < strip; ++j)
        _mm512_mask_storeu_epi16(to + (c + j) * rows + r, kept, w[j]);
    }
  }
}

// blocked_baseline's row blocks [rb0, rb1): each row pair of a block is 4 vectors of pairs.
[[gnu::target("avx512f,avx512bw")]] void blocked_avx512(const float* from, std::int64_t rows,
                                                        std::int64_t cols, std::int64_t rb0,
                                                        std::int64_t rb1, std::uint16_t* to) {
  const std::int64_t row_blocks = blocks_of(rows, kBlockRows);
  for (std::int64_t rb = rb0; rb < rb1; ++rb)
    for (std::int64_t cb = 0; cb < blocks_of(cols, kBlockCols); ++cb) {
      std::uint16_t* block = to + (cb * row_blocks + rb) * kBlockValues;
      for (std::int64_t pair = 0; pair < kBlockRows / 2; ++pair) {
        const std::int64_t r = rb * kBlockRows + 2 * pair;
        for (std::int64_t c = 0; c < kBlockCols; c += 16) {
          const std::int64_t col = cb * kBlockCols + c;
          const __m512i pairs =
              paired_rows(row_at(from, rows, cols, r, col), row_at(from, rows, cols, r + 1, col),
                          first_lanes(cols - col));
          _mm512_storeu_si512(block + pair * 2 * kBlockCols + 2 * c, pairs);
        }
      }
    }
}

// blocked_transposed_baseline's column blocks [cb0, cb1). Column c of M is row c of `from`, and
// a row pair of M at one column two adjacent floats there: 32 rows of M at column c round into
// one vector of 16 pairs. 16 such vectors (16 columns) transposed as 32-bit words are 16 pair rows
// of the block, 16 columns wide.
[[gnu::target("avx512f,avx512bw")]] void blocked_transposed_avx512(
    const float* from, std::int64_t rows, std::int64_t cols, std::int64_t cb0, std::int64_t cb1,
    std::uint16_t* to) {
  const std::int64_t row_blocks = blocks_of(rows, kBlockRows);
  for (std::int64_t cb = cb0; cb < cb1; ++cb)
    for (std::int64_t group = 0; group < kBlockCols; group += 16)
      for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
        const std::int64_t r0 = rb * kBlockRows;
        const __mmask16 low = first_lanes(rows - r0), high = first_lanes(rows - r0 - 16);
        __m512i w[16];
        for (std::int64_t j = 0; j < 16; ++j) {
          const std::int64_t c = cb * kBlockCols + group + j;
          if (c >= cols) {
            w[j] = _mm512_setzero_si512();
            continue;
          }
          const float* column = from + c * rows + r0;
          const __m256i first =
              _mm512_cvtepi32_epi16(bf16_lanes(_mm512_maskz_loadu_epi32(low, column)));
          const __m256i second =
              _mm512_cvtepi32_epi16(bf16_lanes(_mm512_maskz_loadu_epi32(high, column + 16)));
          w[j] = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
        }
        transpose_words(w);
        std::uint16_t* block = to + (cb * row_blocks + rb) * kBlockValues;
        for (std::int64_t pair = 0; pair < 16; ++pair)
          _mm512_storeu_si512(block + pair * 2 * kBlockCols + 2 * group, w[pair]);
      }
}

#undef TANDEM_AVX512_INLINE

}  // namespace

void round_to_bf16(const float* from, std::int64_t n, std::uint16_t* to) {
  parallel_for(n, kMemoryBoundChunk, [&](std::int64_t b, std::int64_t e) {
    run_loop<round_values>(from + b, e - b, to + b);
  });
}

void round_to_bf16_transposed(const float* from, std::int64_t rows, std::int64_t cols,
                              std::uint16_t* to) {
  const std::int64_t strips = blocks_of(cols, kStripColumns);
  const std::int64_t min_strips = std::max<std::int64_t>(
      1, kMemoryBoundChunk / std::max<std::int64_t>(1, kStripColumns * rows));
  parallel_for(strips, min_strips, [&](std::int64_t s0, std::int64_t s1) {
    const std::int64_t c0 = s0 * kStripColumns, c1 = std::min(cols, s1 * kStripColumns);
    run_either<transposed_baseline, transposed_avx512>(from, rows, cols, c0, c1, to);
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
                              bool transposed, std::uint16_t* to) {
  if (transposed) {  // threads take column blocks: 64 rows of `from` each
    const std::int64_t col_blocks = blocks_of(cols, kBlockCols);
    const std::int64_t min_blocks =
        std::max<std::int64_t>(1, kMemoryBoundChunk / std::max<std::int64_t>(1, kBlockCols * rows));
    parallel_for(col_blocks, min_blocks, [&](std::int64_t cb0, std::int64_t cb1) {
      run_either<blocked_transposed_baseline, blocked_transposed_avx512>(from, rows, cols, cb0, cb1,
                                                                         to);
    });
    return;
  }
  const std::int64_t row_blocks = blocks_of(rows, kBlockRows);
  const std::int64_t min_blocks =
      std::max<std::int64_t>(1, kMemoryBoundChunk / std::max<std::int64_t>(1, kBlockRows * cols));
  parallel_for(row_blocks, min_blocks, [&](std::int64_t rb0, std::int64_t rb1) {
    run_either<blocked_baseline, blocked_avx512>(from, rows, cols, rb0, rb1, to);
  });
}

}  // namespace tandem::cpu
