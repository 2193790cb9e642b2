// Tests of the CUDA replica's gradient buckets (core/src/cuda/replica/gradient_buckets.hpp) on the
// CPU: which layers' gradients are summed together across GPUs, and after which layer's backward.
#include "cuda/replica/gradient_buckets.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem::cuda {
namespace TANDEM_TEST_FILE {

using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Layer ranges that tile [0, total) from per-layer sizes (0: a layer without trainable ones).
Ranges tiled(const std::vector<std::int64_t>& sizes) {
  Ranges r;
  std::int64_t at = 0;
  for (auto n : sizes) {
    r.push_back({at, at + n});
    at += n;
  }
  return r;
}

void expect_bucket(const GradientBucket& b, std::size_t layer, std::int64_t begin,
                   std::int64_t end) {
  EXPECT_EQ(b.after_layer, layer);
  EXPECT_EQ(b.begin, begin);
  EXPECT_EQ(b.end, end);
}

// seed-mlp: 8000->4000->2000->500->300->1 (kernels and biases, 64-float aligned): the last three
// layers fill the first bucket (>= 1 MiB), the two large ones a bucket each.
TEST(GradientBuckets, SeedMlpReducesTheLastLayersFirst) {
  const std::vector<std::int64_t> sizes = {32000000 + 4032, 8000000 + 2048, 1000000 + 512,
                                           150016 + 320, 320 + 64};
  const Ranges r = tiled(sizes);
  const std::int64_t total = r.back().second;
  const auto b = plan_gradient_buckets(r, total, 1 << 18, 1 << 22);
  ASSERT_EQ(b.size(), 3u);
  expect_bucket(b[0], 2, r[2].first, total);
  expect_bucket(b[1], 1, r[1].first, r[2].first);
  expect_bucket(b[2], 0, 0, r[1].first);
}

// Small layers gather until the cap; layers without trainable gradients (pooling, Flatten,
// Dropout) sit anywhere; the first layer always closes the last bucket, however small.
TEST(GradientBuckets, SmallLayersGatherAndEveryFloatIsInOneBucket) {
  const std::vector<std::int64_t> sizes = {64, 0, 300, 0, 0, 200, 500, 0, 100};
  const Ranges r = tiled(sizes);
  const std::int64_t total = r.back().second;
  const auto b = plan_gradient_buckets(r, total, 250, 700);
  ASSERT_EQ(b.size(), 2u);
  expect_bucket(b[0], 6, r[6].first, total);  // 100 alone < 250; with 500 it is enough
  expect_bucket(b[1], 0, 0, r[6].first);      // 200 + 300 < 700: on to layer 0
  EXPECT_EQ(b[1].end - b[1].begin, 64 + 300 + 200);
  // Cover: each float in exactly one bucket, buckets back to front.
  std::vector<int> covered(static_cast<std::size_t>(total), 0);
  for (const auto& bucket : b)
    for (std::int64_t i = bucket.begin; i < bucket.end; ++i) ++covered[static_cast<std::size_t>(i)];
  for (int c : covered) EXPECT_EQ(c, 1);
}

TEST(GradientBuckets, OneLayerIsOneBucketAndNoTrainableLayersNone) {
  const auto one = plan_gradient_buckets(tiled({0, 10, 0}), 10, 1 << 18, 1 << 22);
  ASSERT_EQ(one.size(), 1u);
  expect_bucket(one[0], 1, 0, 10);
  EXPECT_TRUE(plan_gradient_buckets(tiled({0, 0}), 0, 1, 1).empty());
}

TEST(GradientBuckets, RangesThatDoNotTileAreRefused) {
  EXPECT_THROW(plan_gradient_buckets({{0, 10}, {12, 20}}, 20, 5, 5), RunError);  // a gap
  EXPECT_THROW(plan_gradient_buckets({{10, 20}, {0, 10}}, 20, 5, 5), RunError);  // out of order
  EXPECT_THROW(plan_gradient_buckets({{5, 10}}, 10, 5, 5), RunError);            // [0, 5) uncovered
}

}  // namespace
}  // namespace tandem::cuda
