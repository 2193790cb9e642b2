// fill_uniform_rows against Rng::fill_uniform row by row (itself checked against xoshiro256**'s
// published outputs in rng_test.cpp): the same bits in every row, nothing written outside the
// rows, and every Rng left in the state the row-by-row fill leaves (its next draws equal too).
// Row counts around the eight-stream vectors (1, 7, 8, 9, 16, 23) and lengths around their
// 16-step blocks (0, 1, 15, 16, 17, 33, 8,000) so that each edge of the AVX-512 loop is crossed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tandem/rng.hpp"
#include "util/uniform_rows.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

std::vector<Rng> streams(std::size_t rows, std::uint64_t seed) {
  std::vector<Rng> rngs;
  for (std::size_t r = 0; r < rows; ++r) rngs.emplace_back(Rng::derive(seed, r));
  return rngs;
}

TEST(UniformRows, EqualsFillingEachRowFromItsOwnRng) {
  SCOPED_TRACE(uniform_rows_vectorized() ? "AVX-512 loop" : "row-by-row loop only (no AVX-512)");
  for (const std::size_t rows : {1, 7, 8, 9, 16, 23})
    for (const std::int64_t n : {0, 1, 15, 16, 17, 33, 8000}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", n " + std::to_string(n));
      const std::int64_t stride = n + 3;  // a gap after each row that must stay untouched
      const float sentinel = -1.0f;
      std::vector<float> want(rows * static_cast<std::size_t>(stride) + 1, sentinel);
      std::vector<float> got = want;
      std::vector<Rng> expected = streams(rows, 5), actual = streams(rows, 5);
      for (std::size_t r = 0; r < rows; ++r)
        expected[r].fill_uniform(want.data() + static_cast<std::int64_t>(r) * stride, n);
      fill_uniform_rows(actual, got.data(), n, stride);
      ASSERT_EQ(got, want);
      for (std::size_t r = 0; r < rows; ++r) {
        EXPECT_EQ(actual[r].state(), expected[r].state()) << "row " << r;
        EXPECT_EQ(actual[r].next_u64(), expected[r].next_u64()) << "row " << r;
      }
    }
}

TEST(UniformRows, KeepsEachRngsCachedNormal) {
  std::vector<Rng> rngs = streams(8, 11), copies = streams(8, 11);
  for (std::size_t r = 0; r < rngs.size(); ++r) {
    rngs[r].normal();  // leaves the second Box-Muller value cached
    copies[r].normal();
  }
  std::vector<float> a(8 * 16), b(8 * 16);
  fill_uniform_rows(rngs, a.data(), 16, 16);
  for (std::size_t r = 0; r < copies.size(); ++r) copies[r].fill_uniform(b.data() + r * 16, 16);
  EXPECT_EQ(a, b);
  for (std::size_t r = 0; r < rngs.size(); ++r) {
    const float cached = copies[r].normal();
    EXPECT_FALSE(std::isnan(cached));
    EXPECT_EQ(rngs[r].normal(), cached) << "row " << r;
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
