// make_class_weighted(): Keras' class_weight_to_sample_weights, by hand: the class of a one-hot
// (or scored) target is its argmax, of a single value its rounding; absent classes weigh 1; a
// sample's own weight is multiplied in; the DataLoader hands the weight on as the row's last
// value and refuses weights that are NaN, infinite or negative, naming the sample.
#include <gtest/gtest.h>

#include <cmath>

#include "data/data_loader.hpp"
#include "data/dataset.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

// Samples whose x is their index and whose targets (and weights, when given) are listed.
class ListedDataset final : public Dataset {
 public:
  ListedDataset(Shape y_shape, std::vector<float> targets, std::vector<float> weights = {})
      : y_shape_(std::move(y_shape)), targets_(std::move(targets)), weights_(std::move(weights)) {}
  std::int64_t size() const override {
    return static_cast<std::int64_t>(targets_.size()) / width();
  }
  Shape x_shape() const override { return {1}; }
  Shape y_shape() const override { return y_shape_; }
  std::int64_t weight_count() const override { return weights_.empty() ? 0 : 1; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const std::int64_t row = width() + (weighted() ? 1 : 0);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      const auto kk = static_cast<std::int64_t>(k);
      x[k] = static_cast<float>(i);
      for (std::int64_t c = 0; c < width(); ++c)
        y[kk * row + c] = targets_[static_cast<std::size_t>(i * width() + c)];
      if (weighted()) y[kk * row + width()] = weights_[static_cast<std::size_t>(i)];
    }
  }
  std::string describe() const override { return "listed"; }

 private:
  std::int64_t width() const { return shape_size(y_shape_); }
  Shape y_shape_;
  std::vector<float> targets_, weights_;
};

const std::map<std::int64_t, double> kWeights = {{0, 0.5}, {1, 4.0}};

// (y, weight) pairs of every sample in order.
std::vector<float> read_all(const Dataset& d) {
  const std::int64_t row = d.y_row();
  std::vector<std::int64_t> all(static_cast<std::size_t>(d.size()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  std::vector<float> x(all.size()), y(all.size() * static_cast<std::size_t>(row));
  d.read(all, x.data(), y.data());
  return y;
}

TEST(ClassWeightedDataset, ClassIndicesAreRoundedAndAbsentClassesWeighOne) {
  // Labels 0, 1, 2 (absent from the weights), 0.6 (rounds to 1), 1.5 (rounds to 2).
  auto labels = std::make_shared<ListedDataset>(Shape{}, std::vector<float>{0, 1, 2, 0.6f, 1.5f});
  auto weighted = make_class_weighted(labels, kWeights, "class_weight");
  EXPECT_TRUE(weighted->weighted());
  EXPECT_EQ(weighted->y_shape(), Shape{});
  EXPECT_EQ(read_all(*weighted),
            (std::vector<float>{0, 0.5f, 1, 4.0f, 2, 1.0f, 0.6f, 4.0f, 1.5f, 1.0f}));
}

TEST(ClassWeightedDataset, OneHotTargetsWeighByTheirArgmaxAndOwnWeightsMultiply) {
  auto one_hot = std::make_shared<ListedDataset>(
      Shape{3}, std::vector<float>{0, 1, 0, 1, 0, 0, 0.2f, 0.3f, 0.5f}, std::vector<float>{2, 3, 5});
  auto weighted = make_class_weighted(one_hot, kWeights, "class_weight");
  EXPECT_EQ(read_all(*weighted),
            (std::vector<float>{0, 1, 0, 8.0f, 1, 0, 0, 1.5f, 0.2f, 0.3f, 0.5f, 5.0f}));
}

TEST(ClassWeightedDataset, TargetsWithoutOneClassPerSampleAreRefused) {
  auto grid = std::make_shared<ListedDataset>(Shape{2, 2}, std::vector<float>(8, 0.0f));
  try {
    make_class_weighted(grid, kWeights, "class_weight");
    ADD_FAILURE() << "targets of shape (2, 2) accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("at 'class_weight'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(None, 2, 2)"), std::string::npos) << e.what();
  }
}

TEST(ClassWeightedDataset, TheLoaderPassesWeightsOnAndRefusesBadOnes) {
  auto labels = std::make_shared<ListedDataset>(Shape{}, std::vector<float>{0, 1, 1, 0},
                                                std::vector<float>{1, 2, 3, 4});
  DataLoader loader(labels, {4, false, 0, 0});
  loader.start_epoch(0);
  Batch batch;
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.y.shape(), (Shape{4, 2}));
  EXPECT_EQ(std::vector<float>(batch.y.values().begin(), batch.y.values().end()),
            (std::vector<float>{0, 1, 1, 2, 1, 3, 0, 4}));

  for (const float bad : {std::nanf(""), -1.0f, INFINITY}) {
    auto broken = std::make_shared<ListedDataset>(Shape{}, std::vector<float>{0, 1, 1, 0},
                                                  std::vector<float>{1, 2, bad, 4});
    DataLoader l(broken, {2, false, 0, 0});
    l.start_epoch(0);
    Batch b;
    ASSERT_TRUE(l.next(b));  // samples 0 and 1
    try {
      l.next(b);
      ADD_FAILURE() << "weight " << bad << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("listed: sample 2 has weight"), std::string::npos)
          << e.what();
    }
  }
}

// Three steps' labels, then a weight for each step (Keras' temporal weights); sample i's weights
// are i, i + 1, i + 2, but for one sample's bad value at step 1.
class StepWeightedDataset final : public Dataset {
 public:
  explicit StepWeightedDataset(std::int64_t bad_sample = -1, float bad = 0)
      : bad_sample_(bad_sample), bad_(bad) {}
  std::int64_t size() const override { return 4; }
  Shape x_shape() const override { return {1}; }
  Shape y_shape() const override { return {3}; }
  std::int64_t weight_count() const override { return 3; }
  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const auto i = static_cast<float>(indices[k]);
      x[k] = i;
      for (std::size_t t = 0; t < 3; ++t) {
        y[k * 6 + t] = static_cast<float>(t);
        y[k * 6 + 3 + t] = indices[k] == bad_sample_ && t == 1 ? bad_ : i + static_cast<float>(t);
      }
    }
  }
  std::string describe() const override { return "steps"; }

 private:
  std::int64_t bad_sample_;
  float bad_;
};

TEST(ClassWeightedDataset, TheLoaderChecksEveryWeightOfASampleWithWeightsByPosition) {
  auto steps = std::make_shared<StepWeightedDataset>();
  EXPECT_EQ(steps->y_row(), 6);
  DataLoader loader(steps, {2, false, 0, 0});
  loader.start_epoch(0);
  Batch batch;
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.y.shape(), (Shape{2, 6}));
  EXPECT_EQ(std::vector<float>(batch.y.values().begin(), batch.y.values().end()),
            (std::vector<float>{0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 2, 3}));

  for (const float bad : {std::nanf(""), -1.0f, INFINITY}) {
    DataLoader l(std::make_shared<StepWeightedDataset>(2, bad), {2, false, 0, 0});
    l.start_epoch(0);
    Batch b;
    ASSERT_TRUE(l.next(b));  // samples 0 and 1
    try {
      l.next(b);
      ADD_FAILURE() << "weight " << bad << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("steps: sample 2 has weight"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("at position 1 of 3"), std::string::npos) << e.what();
    }
  }
  // class_weight weighs a sample once: weights by position cannot take it.
  try {
    make_class_weighted(steps, kWeights, "class_weight");
    ADD_FAILURE() << "class weights over weights by position accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gives each sample 3 weights (one per position)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
