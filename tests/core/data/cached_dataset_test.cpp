// make_cached(): a dataset kept in memory as it is read hands back each sample's x and y row as
// its parent gave them — every target and weight (one per position too) — and writes nothing
// into y for data without targets (it wrote one value per sample there, past the caller's
// buffer).
#include <gtest/gtest.h>

#include <vector>

#include "data/datasets.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

// x = (i, -i); y = the targets (i, 2i) then three weights (i + 0.5, ...), or nothing at all.
class CountingDataset final : public Dataset {
 public:
  explicit CountingDataset(bool labeled) : labeled_(labeled) {}
  std::int64_t size() const override { return 5; }
  Shape x_shape() const override { return {2}; }
  Shape y_shape() const override { return labeled_ ? Shape{2} : Shape{0}; }
  std::int64_t weight_count() const override { return labeled_ ? 3 : 0; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    reads += static_cast<int>(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const auto i = static_cast<float>(indices[k]);
      x[2 * k] = i;
      x[2 * k + 1] = -i;
      if (!labeled_) continue;
      const float row[5] = {i, 2 * i, i + 0.5f, i + 1.5f, i + 2.5f};
      for (std::size_t c = 0; c < 5; ++c) y[5 * k + c] = row[c];
    }
  }
  std::string describe() const override { return "counting"; }
  mutable int reads = 0;

 private:
  bool labeled_;
};

TEST(CachedDataset, EveryTargetAndWeightComesBackFromTheCache) {
  auto parent = std::make_shared<CountingDataset>(true);
  auto cached = data::make_cached(parent, "data.train.cache");
  EXPECT_EQ(cached->y_row(), 5);
  const std::vector<std::int64_t> order{3, 1, 4};
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> x(6), y(15);
    cached->read(order, x.data(), y.data());
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto i = static_cast<float>(order[k]);
      EXPECT_EQ(x[2 * k + 1], -i);
      EXPECT_EQ(std::vector<float>(y.begin() + 5 * k, y.begin() + 5 * k + 5),
                (std::vector<float>{i, 2 * i, i + 0.5f, i + 1.5f, i + 2.5f}))
          << "pass " << pass << ", sample " << order[k];
    }
  }
  EXPECT_EQ(parent->reads, 3);  // the second pass came from the cache
}

TEST(CachedDataset, DataWithoutTargetsWritesNothingIntoY) {
  auto cached = data::make_cached(std::make_shared<CountingDataset>(false), "data.test.cache");
  EXPECT_EQ(cached->y_row(), 0);
  const std::vector<std::int64_t> order{0, 2, 2, 4};
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> x(8), y(4, 7.0f);  // y: none of the samples' values, only canaries
    cached->read(order, x.data(), y.data());
    EXPECT_EQ(x, (std::vector<float>{0, 0, 2, -2, 2, -2, 4, -4}));
    EXPECT_EQ(y, std::vector<float>(4, 7.0f)) << "pass " << pass;
  }
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
