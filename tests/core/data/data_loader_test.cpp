#include "data/data_loader.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "tandem/error.hpp"
#include "tandem/rng.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using namespace std::chrono_literals;

// Sample i: x = (i, -i), y = i. Can fail at one index, or sleep per read.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(std::int64_t n, std::int64_t fail_at = -1,
                        std::chrono::milliseconds delay = 0ms)
      : n_(n), fail_at_(fail_at), delay_(delay) {}
  std::int64_t size() const override { return n_; }
  Shape x_shape() const override { return {2}; }
  Shape y_shape() const override { return {}; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    ++reads;
    if (delay_ > 0ms) std::this_thread::sleep_for(delay_);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (indices[k] == fail_at_) throw DataError("sample " + std::to_string(fail_at_) + " is bad");
      x[2 * k] = static_cast<float>(indices[k]);
      x[2 * k + 1] = -static_cast<float>(indices[k]);
      y[k] = static_cast<float>(indices[k]);
    }
  }
  std::string describe() const override { return "index dataset"; }
  mutable std::atomic<int> reads{0};

 private:
  std::int64_t n_, fail_at_;
  std::chrono::milliseconds delay_;
};

DataLoaderOptions options(std::int64_t batch, bool shuffle, int prefetch, std::uint64_t seed = 1) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.prefetch = prefetch;
  o.seed = seed;
  return o;
}

// The sample order of one epoch, checking each batch's x and y agree with its indices.
std::vector<std::int64_t> epoch_order(DataLoader& loader, int epoch, std::int64_t first = 0) {
  loader.start_epoch(epoch, first);
  std::vector<std::int64_t> order;
  Batch b;
  while (loader.next(b)) {
    EXPECT_EQ(b.x.rank(), 2);
    EXPECT_EQ(b.x.dim(1), 2);
    EXPECT_EQ(b.y.shape(), Shape{b.size()});
    for (std::int64_t k = 0; k < b.size(); ++k) {
      EXPECT_EQ(b.x[2 * k], b.y[k]);
      EXPECT_EQ(b.x[2 * k + 1], -b.y[k]);
      order.push_back(static_cast<std::int64_t>(b.y[k]));
    }
  }
  return order;
}

TEST(DataLoader, EachEpochVisitsEveryIndexOnce) {
  for (int prefetch : {0, 2}) {
    DataLoader loader(std::make_shared<IndexDataset>(103), options(10, true, prefetch));
    EXPECT_EQ(loader.batches_per_epoch(), 11);
    for (int epoch = 0; epoch < 3; ++epoch) {
      auto order = epoch_order(loader, epoch);
      ASSERT_EQ(order.size(), 103u);
      std::sort(order.begin(), order.end());
      for (std::int64_t i = 0; i < 103; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
    }
  }
}

TEST(DataLoader, BatchSizesKeepTheLastPartialBatch) {
  DataLoader loader(std::make_shared<IndexDataset>(10), options(4, true, 2));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  loader.start_epoch(0);
  std::vector<std::int64_t> sizes;
  Batch b;
  while (loader.next(b)) {
    sizes.push_back(b.size());
    EXPECT_EQ(b.x.shape(), (Shape{b.size(), 2}));
  }
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 2}));
  EXPECT_FALSE(loader.next(b));  // stays exhausted
}

TEST(DataLoader, ShuffleIsSeededFisherYatesPerEpoch) {
  auto ds = std::make_shared<IndexDataset>(50);
  DataLoader a(ds, options(7, true, 2, 99)), b(ds, options(7, true, 0, 99));
  DataLoader other_seed(ds, options(7, true, 2, 100));
  const auto e3 = epoch_order(a, 3);
  EXPECT_EQ(e3, epoch_order(b, 3));  // same seed and epoch: same order (replayable)
  EXPECT_EQ(e3, epoch_order(a, 3));
  EXPECT_NE(e3, epoch_order(a, 4));  // another epoch: another order
  EXPECT_NE(e3, epoch_order(other_seed, 3));

  // The documented algorithm, so other tools can reproduce the order.
  std::vector<std::int64_t> expected(50);
  std::iota(expected.begin(), expected.end(), 0);
  Rng rng(Rng::derive(99, 3));
  for (std::size_t i = expected.size() - 1; i > 0; --i)
    std::swap(expected[i], expected[rng.below(i + 1)]);
  EXPECT_EQ(e3, expected);
}

TEST(DataLoader, NoShuffleKeepsOrder) {
  DataLoader loader(std::make_shared<IndexDataset>(23), options(5, false, 3));
  std::vector<std::int64_t> identity(23);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(epoch_order(loader, 0), identity);
  EXPECT_EQ(epoch_order(loader, 7), identity);
}

TEST(DataLoader, ResumeMidEpochEqualsTheTail) {
  auto ds = std::make_shared<IndexDataset>(37);
  for (int prefetch : {0, 2}) {
    DataLoader loader(ds, options(5, true, prefetch, 7));
    const auto full = epoch_order(loader, 2);
    for (std::int64_t first : {0, 1, 3, 7, 8}) {
      const auto tail = epoch_order(loader, 2, first);
      EXPECT_EQ(tail, std::vector<std::int64_t>(
                          full.begin() + std::min<std::int64_t>(first * 5, 37), full.end()))
          << first;
    }
    EXPECT_THROW(loader.start_epoch(2, 9), DataError);
    EXPECT_THROW(loader.start_epoch(2, -1), DataError);
    Batch b;
    EXPECT_THROW(loader.next(b), Error);  // no epoch after a failed start
  }
}

TEST(DataLoader, PrefetchDepthDoesNotChangeBatches) {
  auto ds = std::make_shared<IndexDataset>(61);
  DataLoader sync(ds, options(8, true, 0, 5)), async(ds, options(8, true, 3, 5));
  sync.start_epoch(1);
  async.start_epoch(1);
  // Keep every batch: later batches must not overwrite the storage of earlier ones.
  std::vector<Batch> a, b;
  Batch batch;
  while (sync.next(batch)) a.push_back(batch);
  while (async.next(batch)) b.push_back(batch);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].x.shape(), b[i].x.shape());
    ASSERT_EQ(a[i].y.shape(), b[i].y.shape());
    EXPECT_TRUE(
        std::equal(a[i].x.values().begin(), a[i].x.values().end(), b[i].x.values().begin()));
    EXPECT_TRUE(
        std::equal(a[i].y.values().begin(), a[i].y.values().end(), b[i].y.values().begin()));
  }
  std::vector<std::int64_t> seen;
  for (const auto& bb : a)
    for (float v : bb.y.values()) seen.push_back(static_cast<std::int64_t>(v));
  std::sort(seen.begin(), seen.end());
  for (std::int64_t i = 0; i < 61; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
}

// Batches in storage the caller provides (pinned memory on GPU plans) hold the same values, every
// tensor comes from the allocator, and kept batches are not overwritten by later ones.
TEST(DataLoader, CallerStorageGivesTheSameBatches) {
  auto ds = std::make_shared<IndexDataset>(45);
  std::atomic<int> calls{0};
  DataLoaderOptions o = options(8, true, 2, 9);
  o.allocate = [&calls](std::int64_t count) {
    ++calls;
    std::shared_ptr<float[]> block(new float[static_cast<std::size_t>(count)]);
    std::fill(block.get(), block.get() + count, std::nanf(""));  // not zero-filled
    return block;
  };
  DataLoader plain(ds, options(8, true, 2, 9)), caller(ds, o);
  plain.start_epoch(2);
  caller.start_epoch(2);
  std::vector<Batch> a, b;
  Batch batch;
  while (plain.next(batch)) a.push_back(batch);
  while (caller.next(batch)) b.push_back(batch);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(calls.load(), 2 * static_cast<int>(b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].x.shape(), b[i].x.shape());
    EXPECT_TRUE(
        std::equal(a[i].x.values().begin(), a[i].x.values().end(), b[i].x.values().begin()));
    EXPECT_TRUE(
        std::equal(a[i].y.values().begin(), a[i].y.values().end(), b[i].y.values().begin()));
  }
}

TEST(DataLoader, ReadErrorSurfacesFromNext) {
  for (int prefetch : {0, 1, 3}) {
    // Sample 13 fails; without shuffling it is in batch 3 (batch size 4), after 3 good batches.
    DataLoader loader(std::make_shared<IndexDataset>(20, 13), options(4, false, prefetch));
    loader.start_epoch(0);
    Batch b;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(loader.next(b)) << prefetch;
    try {
      loader.next(b);
      ADD_FAILURE() << "no error, prefetch " << prefetch;
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(), "sample 13 is bad");
    }
    // A new epoch starts cleanly after the failure.
    loader.start_epoch(0, 4);
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(b.y[0], 16.0f);
  }
}

TEST(DataLoader, DestroyingMidEpochDoesNotHang) {
  auto ds = std::make_shared<IndexDataset>(1000, -1, 20ms);
  const auto t0 = std::chrono::steady_clock::now();
  {
    DataLoader loader(ds, options(10, true, 3));
    loader.start_epoch(0);
    Batch b;
    ASSERT_TRUE(loader.next(b));
    loader.start_epoch(1);  // restarting mid-epoch stops the previous prefetch thread
    ASSERT_TRUE(loader.next(b));
  }
  {
    DataLoader never_read(ds, options(10, true, 3));
    never_read.start_epoch(0);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  EXPECT_LT(ds->reads.load(), 20);  // prefetch is bounded, not the whole epoch
}

TEST(DataLoader, PrefetchRunsAhead) {
  auto ds = std::make_shared<IndexDataset>(100);
  DataLoader loader(ds, options(10, true, 3));
  loader.start_epoch(0);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (ds->reads.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ds->reads.load(), 3);  // filled the queue without being asked, then waited
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ds->reads.load(), 3);
}

TEST(DataLoader, MisuseIsReported) {
  auto ds = std::make_shared<IndexDataset>(10);
  EXPECT_THROW({ DataLoader l(ds, options(0, true, 2)); }, ConfigError);
  EXPECT_THROW({ DataLoader l(ds, options(4, true, -1)); }, ConfigError);
  EXPECT_THROW({ DataLoader l(nullptr, options(4, true, 2)); }, DataError);
  DataLoader loader(ds, options(4, true, 2));
  Batch b;
  EXPECT_THROW(loader.next(b), Error);  // before start_epoch
}

TEST(DataLoader, EmptyDatasetHasNoBatches) {
  DataLoader loader(std::make_shared<IndexDataset>(0), options(4, true, 2));
  EXPECT_EQ(loader.batches_per_epoch(), 0);
  loader.start_epoch(0);
  Batch b;
  EXPECT_FALSE(loader.next(b));
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(DataLoader, ShardOfSpreadsTheRemainderOverTheFirstParts) {
  // 31 over 3: 11, 10, 10 at offsets 0, 11, 21; 2 over 3: 1, 1, 0.
  EXPECT_EQ(shard_of(31, 3, 0).offset, 0);
  EXPECT_EQ(shard_of(31, 3, 0).size, 11);
  EXPECT_EQ(shard_of(31, 3, 1).offset, 11);
  EXPECT_EQ(shard_of(31, 3, 1).size, 10);
  EXPECT_EQ(shard_of(31, 3, 2).offset, 21);
  EXPECT_EQ(shard_of(31, 3, 2).size, 10);
  EXPECT_EQ(shard_of(2, 3, 2).size, 0);
  EXPECT_EQ(shard_of(2, 3, 2).offset, 2);
  for (std::int64_t total : {0, 1, 7, 128, 130})
    for (int count : {1, 2, 3, 7}) {
      std::int64_t next = 0;
      for (int i = 0; i < count; ++i) {
        const Shard s = shard_of(total, count, i);
        EXPECT_EQ(s.offset, next);
        next += s.size;
      }
      EXPECT_EQ(next, total);
    }
}

// Every process walks the same global order: the shards of one batch, put side by side, are the
// batch a single process reads, and each shard knows its place in it.
TEST(DataLoader, ShardsOfEveryBatchTileTheGlobalBatch) {
  auto data = std::make_shared<IndexDataset>(50);
  for (int prefetch : {0, 2}) {
    DataLoader whole(data, options(13, true, prefetch, 9));
    std::vector<std::unique_ptr<DataLoader>> shards;
    for (int r = 0; r < 3; ++r) {
      DataLoaderOptions o = options(13, true, prefetch, 9);
      o.shard_index = r;
      o.shard_count = 3;
      shards.push_back(std::make_unique<DataLoader>(data, o));
    }
    for (int epoch = 0; epoch < 2; ++epoch) {
      whole.start_epoch(epoch);
      for (auto& s : shards) s->start_epoch(epoch);
      Batch all;
      int batches = 0;
      while (whole.next(all)) {
        ++batches;
        std::int64_t offset = 0;
        for (int r = 0; r < 3; ++r) {
          Batch part;
          ASSERT_TRUE(shards[static_cast<std::size_t>(r)]->next(part));
          EXPECT_EQ(part.global_size, all.size());
          EXPECT_EQ(part.whole_size(), all.size());
          EXPECT_EQ(part.global_offset, offset);
          EXPECT_EQ(part.size(), shard_of(all.size(), 3, r).size);
          for (std::int64_t k = 0; k < part.size(); ++k) EXPECT_EQ(part.y[k], all.y[offset + k]);
          offset += part.size();
        }
        EXPECT_EQ(offset, all.size());
      }
      EXPECT_EQ(batches, 4);  // 13, 13, 13, 11 (the last: 4, 4, 3)
      Batch none;
      for (auto& s : shards) EXPECT_FALSE(s->next(none));
    }
  }
  DataLoaderOptions bad = options(4, false, 0);
  bad.shard_index = 3;
  bad.shard_count = 3;
  EXPECT_THROW(DataLoader(data, bad), RunError);
}

}  // namespace
}  // namespace tandem
