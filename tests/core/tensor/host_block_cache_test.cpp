// HostBlockCache keeps large freed blocks for the next allocation of the same size, newest first,
// within its capacity; Tensor's allocator reuses them and still hands out zeroed values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "tandem/tensor.hpp"
#include "tensor/host_block_cache.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

void* block(std::int64_t bytes) {
  return std::aligned_alloc(64, static_cast<std::size_t>(bytes));
}

TEST(HostBlockCache, GivesBackAKeptBlockOfTheSameSizeNewestFirst) {
  HostBlockCache cache({.capacity_bytes = 8 * kMiB, .min_block_bytes = kMiB});
  void* a = block(2 * kMiB);
  void* b = block(2 * kMiB);
  void* c = block(3 * kMiB);
  ASSERT_TRUE(cache.keep(a, 2 * kMiB));
  ASSERT_TRUE(cache.keep(b, 2 * kMiB));
  ASSERT_TRUE(cache.keep(c, 3 * kMiB));
  EXPECT_EQ(cache.held_bytes(), 7 * kMiB);
  EXPECT_EQ(cache.take(4 * kMiB), nullptr);  // no block of that size
  EXPECT_EQ(cache.take(2 * kMiB), b);
  EXPECT_EQ(cache.take(2 * kMiB), a);
  EXPECT_EQ(cache.take(2 * kMiB), nullptr);
  EXPECT_EQ(cache.held_bytes(), 3 * kMiB);
  EXPECT_EQ(cache.take(3 * kMiB), c);
  EXPECT_EQ(cache.held_bytes(), 0);
  std::free(a);
  std::free(b);
  std::free(c);
}

TEST(HostBlockCache, EvictsTheOldestToStayWithinItsCapacity) {
  HostBlockCache cache({.capacity_bytes = 5 * kMiB, .min_block_bytes = kMiB});
  void* a = block(2 * kMiB);
  void* b = block(2 * kMiB);
  void* c = block(2 * kMiB);
  ASSERT_TRUE(cache.keep(a, 2 * kMiB));
  ASSERT_TRUE(cache.keep(b, 2 * kMiB));
  ASSERT_TRUE(cache.keep(c, 2 * kMiB));  // 6 MiB > 5: a is freed
  EXPECT_EQ(cache.held_bytes(), 4 * kMiB);
  EXPECT_EQ(cache.take(2 * kMiB), c);
  EXPECT_EQ(cache.take(2 * kMiB), b);
  EXPECT_EQ(cache.take(2 * kMiB), nullptr);
  std::free(b);
  std::free(c);
}

TEST(HostBlockCache, RefusesBlocksBelowTheMinimumOrAboveTheCapacity) {
  HostBlockCache cache({.capacity_bytes = 4 * kMiB, .min_block_bytes = kMiB});
  void* small = block(kMiB - 64);
  void* huge = block(5 * kMiB);
  EXPECT_FALSE(cache.keep(small, kMiB - 64));
  EXPECT_FALSE(cache.keep(huge, 5 * kMiB));
  EXPECT_EQ(cache.held_bytes(), 0);
  std::free(small);  // still ours
  std::free(huge);
}

int freed_blocks = 0;
void counting_free(void* block) {
  ++freed_blocks;
  std::free(block);
}

TEST(HostBlockCache, KeepsAtMostTheBlocksPerSizeAndFreesWithItsOwnFunction) {
  freed_blocks = 0;
  {
    HostBlockCache cache({.capacity_bytes = 64 * kMiB, .max_blocks_per_size = 2}, &counting_free);
    void* a = block(kMiB);
    void* b = block(kMiB);
    void* c = block(kMiB);
    ASSERT_TRUE(cache.keep(a, kMiB));
    ASSERT_TRUE(cache.keep(b, kMiB));
    EXPECT_FALSE(cache.keep(c, kMiB));  // a third of one size: still the caller's
    EXPECT_TRUE(cache.keep(block(2 * kMiB), 2 * kMiB));
    EXPECT_EQ(cache.held_blocks(), 3);
    std::free(c);
    EXPECT_EQ(freed_blocks, 0);
  }
  EXPECT_EQ(freed_blocks, 3);  // what it held, given back through counting_free
}

TEST(HostBlockCache, ReleaseFreesEverythingItHolds) {
  HostBlockCache cache({.capacity_bytes = 8 * kMiB, .min_block_bytes = kMiB});
  ASSERT_TRUE(cache.keep(block(2 * kMiB), 2 * kMiB));
  ASSERT_TRUE(cache.keep(block(3 * kMiB), 3 * kMiB));
  cache.release();
  EXPECT_EQ(cache.held_bytes(), 0);
  EXPECT_EQ(cache.take(2 * kMiB), nullptr);
}

// What the loader does every step: a 16 MiB batch dropped, the next one of the same shape
// allocated. Its memory is the dropped one's, and it reads as zeros all the same.
TEST(HostBlockCache, TensorsReuseTheMemoryOfDroppedTensorsAndStillStartAtZero) {
  const Shape shape{512, 8192};  // 16 MiB
  const float* first_data = nullptr;
  {
    Tensor first(shape);
    first.fill(3.5f);
    first_data = first.data();
  }
  Tensor second(shape);
  EXPECT_EQ(second.data(), first_data);
  std::int64_t nonzero = 0;
  for (std::int64_t i = 0; i < second.size(); ++i) nonzero += second[i] != 0.0f;
  EXPECT_EQ(nonzero, 0);
  // A live tensor's memory is never handed out twice.
  Tensor third(shape);
  EXPECT_NE(third.data(), second.data());
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
