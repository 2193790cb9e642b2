// Mixup and CutMix in the DataLoader: on samples whose every pixel holds their index and whose
// targets are one-hot, each mixed row must be exactly l x_i + (1 - l) x_j with the same l in its
// targets (mixup), or x_i with a box of x_j whose area is (1 - l) of the image (CutMix), j
// another sample of the same global batch; draws follow the global batch, not the shard, and
// the epoch; l follows Beta(alpha, alpha); data that cannot be mixed and bad keys are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "data/data_loader.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"
#include "train/run_config.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

constexpr std::int64_t kRows = 4, kCols = 5, kClasses = 3;

// Sample i: a kRows x kCols x 1 image of the value i + 1; targets one-hot of i % kClasses.
class ConstantImages final : public Dataset {
 public:
  explicit ConstantImages(std::int64_t n, bool indices = false) : n_(n), indices_(indices) {}
  std::int64_t size() const override { return n_; }
  Shape x_shape() const override { return {kRows, kCols, 1}; }
  Shape y_shape() const override { return indices_ ? Shape{} : Shape{kClasses}; }
  void read(std::span<const std::int64_t> samples, float* x, float* y) const override {
    for (std::size_t k = 0; k < samples.size(); ++k) {
      std::fill(x + k * kRows * kCols, x + (k + 1) * kRows * kCols,
                static_cast<float>(samples[k] + 1));
      if (indices_) {
        y[k] = static_cast<float>(samples[k] % kClasses);
        continue;
      }
      std::fill(y + k * kClasses, y + (k + 1) * kClasses, 0.0f);
      y[k * kClasses + samples[k] % kClasses] = 1.0f;
    }
  }
  std::string describe() const override { return "constant images"; }

 private:
  std::int64_t n_;
  bool indices_;
};

DataLoaderOptions mixing(MixOptions::Kind kind, double alpha, std::int64_t batch = 16) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.prefetch = 0;
  o.seed = 9;
  o.mix.kind = kind;
  o.mix.alpha = alpha;
  return o;
}

std::vector<Batch> epoch(DataLoader& loader, int e) {
  loader.start_epoch(e);
  std::vector<Batch> batches;
  Batch b;
  while (loader.next(b)) batches.push_back(b);
  return batches;
}

// Each row's sample index in batch b of an unmixed loader with the same order.
std::vector<std::vector<std::int64_t>> plain_indices(std::shared_ptr<Dataset> data,
                                                     DataLoaderOptions o, int e) {
  o.mix = MixOptions{};
  DataLoader loader(std::move(data), o);
  std::vector<std::vector<std::int64_t>> out;
  for (const Batch& b : epoch(loader, e)) {
    out.emplace_back();
    for (std::int64_t k = 0; k < b.size(); ++k)
      out.back().push_back(static_cast<std::int64_t>(b.x[k * kRows * kCols]) - 1);
  }
  return out;
}

struct Mixed {
  std::int64_t i = 0, j = 0;  // the row's own sample and its partner
  double l = 1;               // the weight of its own
};

// Reads every row of an epoch: its own sample and its partner (from the unmixed order and
// mix_partner), and l as the targets give it, checking the targets are the blend of the two
// one-hot rows. `pixel_l` returns l as x gives it.
template <class PixelWeight>
std::vector<Mixed> read_epoch(std::shared_ptr<Dataset> data, const DataLoaderOptions& o, int e,
                              PixelWeight pixel_l) {
  const auto plain = plain_indices(data, o, e);
  DataLoader loader(data, o);
  std::vector<Mixed> rows;
  const auto batches = epoch(loader, e);
  for (std::size_t bi = 0; bi < batches.size(); ++bi) {
    const Batch& b = batches[bi];
    const MixPlace place{o.seed, e, static_cast<std::int64_t>(bi), b.size(), 0};
    for (std::int64_t k = 0; k < b.size(); ++k) {
      Mixed m;
      m.i = plain[bi][k];
      m.j = plain[bi][mix_partner(place, k)];
      EXPECT_NE(m.i, m.j);
      m.l = pixel_l(b.x.data() + k * kRows * kCols, m);
      const float* y = b.y.data() + k * kClasses;
      for (std::int64_t c = 0; c < kClasses; ++c) {
        const double expected =
            (m.i % kClasses == c ? m.l : 0.0) + (m.j % kClasses == c ? 1 - m.l : 0.0);
        EXPECT_NEAR(y[c], expected, 2e-5) << "row " << k << " of batch " << bi;
      }
      rows.push_back(m);
    }
  }
  return rows;
}

double variance_of(const std::vector<Mixed>& rows) {
  double mean = 0, var = 0;
  for (const Mixed& m : rows) mean += m.l / rows.size();
  for (const Mixed& m : rows) var += (m.l - mean) * (m.l - mean) / rows.size();
  return var;
}

TEST(BatchMixing, MixupBlendsEachSampleWithAnotherOfItsBatchAndItsTargetsByTheSameWeight) {
  const auto data = std::make_shared<ConstantImages>(1024);
  for (const double alpha : {0.4, 4.0}) {
    const auto rows = read_epoch(data, mixing(MixOptions::Kind::mixup, alpha, 64), 0,
                                 [](const float* x, const Mixed& m) {
                                   for (std::int64_t e = 1; e < kRows * kCols; ++e)
                                     EXPECT_EQ(x[e], x[0]);  // one blend for the whole image
                                   return (x[0] - (m.j + 1.0)) / static_cast<double>(m.i - m.j);
                                 });
    ASSERT_EQ(rows.size(), 1024u);
    // Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1)).
    double mean = 0;
    for (const Mixed& m : rows) mean += m.l / rows.size();
    EXPECT_NEAR(mean, 0.5, 0.04) << alpha;
    EXPECT_NEAR(variance_of(rows), 1.0 / (4 * (2 * alpha + 1)), 0.02) << alpha;
  }
}

TEST(BatchMixing, CutMixPastesABoxOfThePartnerAndWeighsTheTargetsByItsArea) {
  const auto data = std::make_shared<ConstantImages>(512);
  int boxes = 0;
  const auto rows = read_epoch(
      data, mixing(MixOptions::Kind::cutmix, 1.0, 32), 0, [&](const float* x, const Mixed& m) {
        // Pixels are the sample's or the partner's, the partner's forming one rectangle.
        std::int64_t top = kRows, left = kCols, bottom = -1, right = -1, count = 0;
        for (std::int64_t r = 0; r < kRows; ++r)
          for (std::int64_t c = 0; c < kCols; ++c) {
            const float v = x[r * kCols + c];
            EXPECT_TRUE(v == m.i + 1 || v == m.j + 1) << v;
            if (v != m.j + 1) continue;
            ++count;
            top = std::min(top, r), bottom = std::max(bottom, r);
            left = std::min(left, c), right = std::max(right, c);
          }
        if (count > 0) {
          ++boxes;
          EXPECT_EQ(count, (bottom - top + 1) * (right - left + 1)) << "not a rectangle";
        }
        return 1.0 - static_cast<double>(count) / (kRows * kCols);
      });
  ASSERT_EQ(rows.size(), 512u);
  EXPECT_GT(boxes, 256);
}

TEST(BatchMixing, DrawsFollowTheGlobalBatchAndTheEpochNotTheShard) {
  const auto data = std::make_shared<ConstantImages>(100);
  for (const auto kind : {MixOptions::Kind::mixup, MixOptions::Kind::cutmix}) {
    DataLoader whole(data, mixing(kind, 1.0, 10));
    DataLoaderOptions first = mixing(kind, 1.0, 10), second = first;
    first.shard_count = second.shard_count = 2;
    second.shard_index = 1;
    DataLoader a(data, first), b(data, second);
    const auto all = epoch(whole, 3), part_a = epoch(a, 3), part_b = epoch(b, 3);
    ASSERT_EQ(all.size(), part_a.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      std::vector<float> joined(part_a[i].x.data(), part_a[i].x.data() + part_a[i].x.size());
      joined.insert(joined.end(), part_b[i].x.data(), part_b[i].x.data() + part_b[i].x.size());
      ASSERT_EQ(joined, std::vector<float>(all[i].x.data(), all[i].x.data() + all[i].x.size()));
    }
    const auto again = epoch(whole, 3), next = epoch(whole, 4);
    EXPECT_EQ(std::vector<float>(again[0].x.data(), again[0].x.data() + again[0].x.size()),
              std::vector<float>(all[0].x.data(), all[0].x.data() + all[0].x.size()));
    EXPECT_NE(std::vector<float>(next[0].y.data(), next[0].y.data() + next[0].y.size()),
              std::vector<float>(all[0].y.data(), all[0].y.data() + all[0].y.size()));
  }
}

std::string config_error(const nlohmann::json& data_keys) {
  nlohmann::json c = test::tiny_regression_config();
  c["data"].update(data_keys);
  try {
    parse_run_config(c, "");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BatchMixing, DataThatCannotBeMixedAndBadKeysAreConfigErrors) {
  const auto indices = std::make_shared<ConstantImages>(10, true);
  try {
    DataLoader loader(indices, mixing(MixOptions::Kind::mixup, 1.0));
    FAIL() << "class indices were mixed";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.mixup"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"label_mode\": \"categorical\""), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(config_error({{"mixup", {{"alpha", 0.2}}}}), "");
  EXPECT_NE(config_error({{"mixup", {{"alpha", 0}}}}).find("data.mixup.alpha"), std::string::npos);
  EXPECT_NE(config_error({{"cutmix", {{"probability", 1.5}}}}).find("data.cutmix.probability"),
            std::string::npos);
  EXPECT_NE(config_error({{"mixup", {{"beta", 1}}}}).find("data.mixup.beta"), std::string::npos);
  EXPECT_NE(
      config_error({{"mixup", nlohmann::json::object()}, {"cutmix", nlohmann::json::object()}})
          .find("not both"),
      std::string::npos);
}

}  // namespace
}  // namespace tandem
