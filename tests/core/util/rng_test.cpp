// Rng against xoshiro256** as published (Blackman and Vigna), seeded by splitmix64: the first
// outputs for seed 0 (0x99ec5f36cb75f2b4 is the algorithm's well-known first value from
// splitmix64(0)) and uniform()'s 24 bits for seed 42, computed by a Python transcription of the
// reference C code; fill_uniform equals as many uniform() calls and leaves the same state.
#include <gtest/gtest.h>

#include <vector>

#include "tandem/rng.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(Rng, IsXoshiro256StarStarSeededBySplitmix64) {
  Rng rng(0);
  EXPECT_EQ(rng.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(rng.next_u64(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(rng.next_u64(), 0x1a5f849d4933e6e0ULL);
  EXPECT_EQ(rng.next_u64(), 0x6aa594f1262d2d2cULL);
  Rng other(42);
  for (const double top24 : {1406987.0, 6358233.0, 11409235.0})
    EXPECT_EQ(other.uniform(), static_cast<float>(top24 / 16777216.0));
}

TEST(Rng, FillUniformIsTheSameAsCallingUniform) {
  Rng one_by_one(7), filled(7);
  std::vector<float> want(1001), got(1001);
  for (float& v : want) v = one_by_one.uniform();
  filled.fill_uniform(got.data(), static_cast<std::int64_t>(got.size()));
  EXPECT_EQ(got, want);
  for (float v : got) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_EQ(filled.state(), one_by_one.state());
  EXPECT_EQ(filled.next_u64(), one_by_one.next_u64());
  filled.fill_uniform(got.data(), 0);  // nothing drawn
  EXPECT_EQ(filled.state(), one_by_one.state());
}

}  // namespace
}  // namespace tandem
