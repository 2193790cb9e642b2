#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "data/datasets.hpp"
#include "util/config_object.hpp"
#include "tandem/error.hpp"
#include "tandem/rng.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using data::SyntheticSpec;
using data::SyntheticTask;

SyntheticSpec spec(SyntheticTask task, Shape y_shape, std::uint64_t seed = 0) {
  SyntheticSpec s;
  s.samples = 1000;
  s.x_shape = {4, 3};
  s.task = task;
  s.classes = 7;
  s.y_shape = std::move(y_shape);
  s.seed = seed;
  return s;
}

struct Read {
  std::vector<float> x, y;
};

Read read(const Dataset& ds, const std::vector<std::int64_t>& idx) {
  Read r;
  r.x.resize(idx.size() * static_cast<std::size_t>(shape_size(ds.x_shape())));
  r.y.resize(idx.size() * static_cast<std::size_t>(shape_size(ds.y_shape())));
  ds.read(idx, r.x.data(), r.y.data());
  return r;
}

TEST(SyntheticDataset, SameSeedSameDataOtherSeedOtherData) {
  auto a = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}, 5));
  auto b = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}, 5));
  auto c = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}, 6));
  std::vector<std::int64_t> idx(100);
  std::iota(idx.begin(), idx.end(), 0);
  EXPECT_EQ(read(*a, idx).x, read(*b, idx).x);
  EXPECT_EQ(read(*a, idx).y, read(*b, idx).y);
  EXPECT_NE(read(*a, idx).x, read(*c, idx).x);
}

TEST(SyntheticDataset, SampleIsIndependentOfOrderAndBatch) {
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::regression, {2}, 3));
  const Read batch = read(*ds, {9, 500, 3, 9});
  for (std::size_t k = 0; k < 4; ++k) {
    const std::int64_t i = std::vector<std::int64_t>{9, 500, 3, 9}[k];
    const Read one = read(*ds, {i});
    EXPECT_TRUE(std::equal(one.x.begin(), one.x.end(), batch.x.begin() + 12 * k)) << i;
    EXPECT_TRUE(std::equal(one.y.begin(), one.y.end(), batch.y.begin() + 2 * k)) << i;
  }
  EXPECT_NE(read(*ds, {1}).x, read(*ds, {2}).x);
}

TEST(SyntheticDataset, SampleFollowsDocumentedGenerator) {
  // Sample i: x from Rng(derive(seed, i)).uniform(), then y from the same stream.
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}, 11));
  const Read r = read(*ds, {42});
  Rng rng(Rng::derive(11, 42));
  for (float v : r.x) EXPECT_EQ(v, rng.uniform());
  EXPECT_EQ(r.y[0], static_cast<float>(rng.below(2)));
}

// A batch of 19 samples of 37 values (two groups of eight streams and three more; on a CPU with
// AVX-512 the x rows are filled eight at a time, 16 steps at a time, and the last 5 values of a
// row one by one) reads every sample as the generator defines it, for each task whose x is
// uniform: x's 37 values by uniform(), then y's from the same stream.
TEST(SyntheticDataset, BatchesFollowTheDocumentedGeneratorSampleBySample) {
  std::vector<std::int64_t> idx(19);
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<std::int64_t>(997 - 37 * k);
  for (const SyntheticTask task :
       {SyntheticTask::binary, SyntheticTask::classes, SyntheticTask::regression}) {
    const Shape y_shape = task == SyntheticTask::classes ? Shape{} : Shape{3};
    SyntheticSpec s = spec(task, y_shape, 13);
    s.x_shape = {37};
    auto ds = data::make_synthetic_dataset(s);
    const Read r = read(*ds, idx);
    const std::size_t y_row = static_cast<std::size_t>(shape_size(y_shape));
    for (std::size_t k = 0; k < idx.size(); ++k) {
      Rng rng(Rng::derive(13, static_cast<std::uint64_t>(idx[k])));
      for (std::size_t e = 0; e < 37; ++e) ASSERT_EQ(r.x[37 * k + e], rng.uniform()) << k;
      for (std::size_t e = 0; e < y_row; ++e) {
        const float want = task == SyntheticTask::binary    ? static_cast<float>(rng.below(2))
                           : task == SyntheticTask::classes ? static_cast<float>(rng.below(7))
                                                            : rng.uniform();
        ASSERT_EQ(r.y[y_row * k + e], want) << k;
      }
    }
  }
}

TEST(SyntheticDataset, BinaryLabels) {
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}));
  EXPECT_EQ(ds->y_shape(), Shape{1});
  std::vector<std::int64_t> idx(1000);
  std::iota(idx.begin(), idx.end(), 0);
  const Read r = read(*ds, idx);
  double ones = 0;
  for (float v : r.y) {
    ASSERT_TRUE(v == 0.0f || v == 1.0f) << v;
    ones += v;
  }
  EXPECT_NEAR(ones / 1000, 0.5, 0.08);
  for (float v : r.x) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
  }
}

TEST(SyntheticDataset, ClassLabelsAreScalarIndices) {
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::classes, {}));
  EXPECT_EQ(ds->y_shape(), Shape{});
  std::vector<std::int64_t> idx(700);
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<int> seen(7, 0);
  for (float v : read(*ds, idx).y) {
    ASSERT_EQ(v, std::floor(v));
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 7.0f);
    ++seen[static_cast<std::size_t>(v)];
  }
  for (int c : seen) EXPECT_GT(c, 50);
}

TEST(SyntheticDataset, RegressionTargetsHaveTheirShape) {
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::regression, {2, 3}));
  EXPECT_EQ(ds->y_shape(), (Shape{2, 3}));
  const Read r = read(*ds, {0, 1});
  ASSERT_EQ(r.y.size(), 12u);
  for (float v : r.y) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_NE(r.y[0], r.y[1]);
}

TEST(SyntheticDataset, LargeDatasetIsNotStored) {
  // 131072 x 8000 floats would be 4 GB; creating it and reading its last sample is instant.
  SyntheticSpec s;
  s.samples = 131072;
  s.x_shape = {8000};
  s.y_shape = {1};
  const auto t0 = std::chrono::steady_clock::now();
  auto ds = data::make_synthetic_dataset(s);
  const Read r = read(*ds, {131071, 0});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(ds->size(), 131072);
  EXPECT_EQ(r.x.size(), 16000u);
  EXPECT_NE(ds->describe().find("131072 samples"), std::string::npos) << ds->describe();
}

TEST(SyntheticDataset, OutOfRangeIndexIsAnError) {
  auto ds = data::make_synthetic_dataset(spec(SyntheticTask::binary, {1}));
  EXPECT_THROW(read(*ds, {1000}), DataError);
  EXPECT_THROW(read(*ds, {-1}), DataError);
}

// The ConfigError a synthetic spec gets, or "" when it is accepted.
std::string error_of(const nlohmann::json& spec) {
  try {
    ConfigObject c(spec, "data");
    data::parse_synthetic_spec(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// repeated_token: every label says whether the first token appears again, checked by a scan of
// the sequence; about half the samples are positive; every token is an id in [1, vocabulary).
TEST(SyntheticDataset, RepeatedTokenLabelsSayWhetherTheFirstTokenComesBack) {
  SyntheticSpec s;
  s.samples = 4000;
  s.x_shape = {12};
  s.task = SyntheticTask::repeated_token;
  s.vocabulary = 20;
  s.y_shape = {1};
  s.seed = 3;
  auto ds = data::make_synthetic_dataset(s);
  std::vector<std::int64_t> idx(4000);
  std::iota(idx.begin(), idx.end(), 0);
  const Read r = read(*ds, idx);
  int positives = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const float* seq = r.x.data() + i * 12;
    bool again = false;
    for (int t = 0; t < 12; ++t) {
      EXPECT_EQ(seq[t], std::floor(seq[t]));
      EXPECT_GE(seq[t], 1.0f);
      EXPECT_LT(seq[t], 20.0f);
      again = again || (t > 0 && seq[t] == seq[0]);
    }
    EXPECT_EQ(r.y[i], again ? 1.0f : 0.0f) << "sample " << i;
    positives += again;
  }
  EXPECT_NEAR(positives, 2000, 150);
}

TEST(SyntheticDataset, RepeatedTokenSpecIsChecked) {
  const nlohmann::json good = {{"samples", 10}, {"x_shape", {8}}, {"task", "repeated_token"},
                               {"vocabulary", 5}};
  EXPECT_EQ(error_of(good), "");
  nlohmann::json flat = good;
  flat["x_shape"] = {2, 4};
  EXPECT_NE(error_of(flat).find("data.x_shape"), std::string::npos) << error_of(flat);
  nlohmann::json tiny = good;
  tiny["vocabulary"] = 2;
  EXPECT_NE(error_of(tiny).find("a vocabulary of 3 to 2^24"), std::string::npos) << error_of(tiny);
  nlohmann::json stray = {{"samples", 10}, {"x_shape", {8}}, {"vocabulary", 5}};
  EXPECT_NE(error_of(stray).find("only used with \"task\": \"repeated_token\" or"),
            std::string::npos)
      << error_of(stray);
}

// sentence_pair: two arrays per sample (tokens, then segment ids: zeros then ones, at least two
// of each); every label says whether segment A's first token appears in segment B, by a scan;
// half are positive, and a repeat inside A (the distractor) is in about half the samples of
// either label, so the tokens alone cannot tell.
TEST(SyntheticDataset, SentencePairLabelsSayWhetherTheFirstTokenOfAIsInB) {
  SyntheticSpec s;
  s.samples = 4000;
  s.x_shape = {10};
  s.task = SyntheticTask::sentence_pair;
  s.vocabulary = 20;
  s.y_shape = {1};
  s.seed = 4;
  auto ds = data::make_synthetic_dataset(s);
  EXPECT_EQ(ds->x_shape(), Shape{20});
  EXPECT_EQ(ds->x_parts(), (std::vector<Shape>{{10}, {10}}));
  std::vector<std::int64_t> idx(4000);
  std::iota(idx.begin(), idx.end(), 0);
  const Read r = read(*ds, idx);
  int positives = 0, repeats_in_a[2] = {0, 0}, labels[2] = {0, 0};
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const float* tokens = r.x.data() + i * 20;
    const float* segments = tokens + 10;
    int split = 0;
    while (split < 10 && segments[split] == 0.0f) ++split;
    for (int t = split; t < 10; ++t) ASSERT_EQ(segments[t], 1.0f) << "sample " << i;
    ASSERT_GE(split, 2);
    ASSERT_LE(split, 8);
    bool in_a = false, in_b = false;
    for (int t = 1; t < 10; ++t) {
      EXPECT_GE(tokens[t], 1.0f);
      EXPECT_LT(tokens[t], 20.0f);
      (t < split ? in_a : in_b) |= tokens[t] == tokens[0];
    }
    EXPECT_EQ(r.y[i], in_b ? 1.0f : 0.0f) << "sample " << i;
    positives += in_b;
    ++labels[in_b];
    repeats_in_a[in_b] += in_a;
  }
  EXPECT_NEAR(positives, 2000, 150);
  for (int label : {0, 1}) EXPECT_NEAR(repeats_in_a[label], labels[label] / 2, 120) << label;
}

TEST(SyntheticDataset, SentencePairSpecIsChecked) {
  const nlohmann::json good = {{"samples", 10}, {"x_shape", {4}}, {"task", "sentence_pair"},
                               {"vocabulary", 5}};
  EXPECT_EQ(error_of(good), "");
  nlohmann::json short_pair = good;
  short_pair["x_shape"] = {3};
  EXPECT_NE(error_of(short_pair).find("at 'data.x_shape': task 'sentence_pair' takes a sequence"),
            std::string::npos)
      << error_of(short_pair);
  nlohmann::json two_labels = good;
  two_labels["y_shape"] = {2};
  EXPECT_NE(error_of(two_labels).find("data.y_shape"), std::string::npos) << error_of(two_labels);
  nlohmann::json no_vocabulary = good;
  no_vocabulary.erase("vocabulary");
  EXPECT_NE(error_of(no_vocabulary).find("data.vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace tandem
