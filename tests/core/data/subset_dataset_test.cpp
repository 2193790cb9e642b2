#include <gtest/gtest.h>

#include <numeric>

#include "data/datasets.hpp"
#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

std::shared_ptr<Dataset> parent() {
  data::SyntheticSpec s;
  s.samples = 100;
  s.x_shape = {3};
  s.task = data::SyntheticTask::classes;
  s.classes = 5;
  s.seed = 9;
  return data::make_synthetic_dataset(s);
}

TEST(SubsetDataset, ReadsParentSamplesShiftedByBegin) {
  auto p = parent();
  auto sub = make_subset(p, 90, 10);  // a 10% validation split: the LAST samples, as in Keras
  EXPECT_EQ(sub->size(), 10);
  EXPECT_EQ(sub->x_shape(), p->x_shape());
  EXPECT_EQ(sub->y_shape(), p->y_shape());
  std::vector<std::int64_t> idx{9, 0, 4}, pidx{99, 90, 94};
  std::vector<float> x(9), y(3), px(9), py(3);
  sub->read(idx, x.data(), y.data());
  p->read(pidx, px.data(), py.data());
  EXPECT_EQ(x, px);
  EXPECT_EQ(y, py);
  EXPECT_NE(sub->describe().find("[90, 100)"), std::string::npos) << sub->describe();
  // An error names the parent's sample, the file's row (it said "sample 5 of samples [90, 100)
  // of ...", which reads as row 5).
  EXPECT_EQ(sub->sample_place(5), "sample 95 of " + p->describe());
}

TEST(SubsetDataset, TrainAndValidationPartsCoverTheParent) {
  auto p = parent();
  auto train = make_subset(p, 0, 80), val = make_subset(p, 80, 20);
  std::vector<std::int64_t> all(100), t(80), v(20);
  std::iota(all.begin(), all.end(), 0);
  std::iota(t.begin(), t.end(), 0);
  std::iota(v.begin(), v.end(), 0);
  std::vector<float> x(300), y(100), tx(240), ty(80), vx(60), vy(20);
  p->read(all, x.data(), y.data());
  train->read(t, tx.data(), ty.data());
  val->read(v, vx.data(), vy.data());
  tx.insert(tx.end(), vx.begin(), vx.end());
  ty.insert(ty.end(), vy.begin(), vy.end());
  EXPECT_EQ(tx, x);
  EXPECT_EQ(ty, y);
}

TEST(SubsetDataset, BoundsAreChecked) {
  auto p = parent();
  EXPECT_NO_THROW(make_subset(p, 100, 0));
  EXPECT_NO_THROW(make_subset(p, 0, 100));
  EXPECT_THROW(make_subset(p, -1, 10), DataError);
  EXPECT_THROW(make_subset(p, 95, 10), DataError);
  EXPECT_THROW(make_subset(p, 0, -1), DataError);
  EXPECT_THROW(make_subset(nullptr, 0, 0), DataError);
  auto sub = make_subset(p, 10, 5);
  std::vector<float> x(3), y(1);
  const std::int64_t bad = 5;  // inside the parent, outside the subset
  EXPECT_THROW(sub->read({&bad, 1}, x.data(), y.data()), DataError);
}

TEST(SubsetDataset, SubsetOfSubset) {
  auto p = parent();
  auto inner = make_subset(make_subset(p, 20, 50), 10, 5);  // parent samples [30, 35)
  std::vector<std::int64_t> idx{0, 4}, pidx{30, 34};
  std::vector<float> x(6), y(2), px(6), py(2);
  inner->read(idx, x.data(), y.data());
  p->read(pidx, px.data(), py.data());
  EXPECT_EQ(x, px);
  EXPECT_EQ(y, py);
}

}  // namespace
}  // namespace tandem
