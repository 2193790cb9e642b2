// The pool behind GPU plans' pinned batch memory, over an ordinary allocator that counts.
#include "parallel/pinned_memory.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace tandem::detail {
namespace TANDEM_TEST_FILE {

int live_blocks = 0;
bool fail_next = false;

void* counting_allocate(std::size_t bytes) {
  if (fail_next) {
    fail_next = false;
    return nullptr;
  }
  ++live_blocks;
  return std::malloc(bytes);
}

void counting_free(void* block) {
  --live_blocks;
  std::free(block);
}

TEST(HostBlockPool, ReleasedBlocksAreHandedOutAgain) {
  live_blocks = 0;
  {
    auto pool = std::make_shared<HostBlockPool>(&counting_allocate, &counting_free, 2);
    float* first = nullptr;
    {
      auto a = pool->take(1000);
      ASSERT_TRUE(a);
      first = a.get();
      a[999] = 1.5f;  // the whole block is usable
    }
    EXPECT_EQ(pool->cached(), 1u);
    auto again = pool->take(1000);
    EXPECT_EQ(again.get(), first) << "a block of the same size is reused";
    auto other = pool->take(10);
    EXPECT_NE(other.get(), first);
    EXPECT_EQ(pool->allocations(), 2);
    // Several of one size in flight at once (prefetch), then all back: at most 2 are kept.
    std::vector<std::shared_ptr<float[]>> held;
    for (int i = 0; i < 4; ++i) held.push_back(pool->take(1000));
    EXPECT_EQ(pool->allocations(), 6);
    held.clear();
    EXPECT_EQ(pool->cached(), 2u) << "at most 2 blocks of one size are kept, the rest freed";
    again.reset();
    EXPECT_EQ(pool->cached(), 2u);
    other.reset();
    EXPECT_EQ(pool->cached(), 3u);
    EXPECT_EQ(live_blocks, 3);
  }
  EXPECT_EQ(live_blocks, 0) << "every block freed when the pool and its blocks are gone";
}

TEST(HostBlockPool, BlocksOutliveThePoolHandle) {
  live_blocks = 0;
  std::shared_ptr<float[]> kept;
  {
    auto pool = std::make_shared<HostBlockPool>(&counting_allocate, &counting_free);
    kept = pool->take(64);
  }
  kept[63] = 2.0f;  // the pool lives on through the block's deleter
  EXPECT_EQ(live_blocks, 1);
  kept.reset();
  EXPECT_EQ(live_blocks, 0);
}

TEST(HostBlockPool, FailedAllocationIsNullAndCountsNothing) {
  live_blocks = 0;
  auto pool = std::make_shared<HostBlockPool>(&counting_allocate, &counting_free);
  fail_next = true;
  EXPECT_FALSE(pool->take(16));
  EXPECT_EQ(pool->allocations(), 0);
  EXPECT_TRUE(pool->take(16));
}

}  // namespace
}  // namespace tandem::detail
