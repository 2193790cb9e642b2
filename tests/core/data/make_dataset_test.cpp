#include <gtest/gtest.h>
#include <hdf5.h>

#include <functional>

#include "core/data/data_test_util.hpp"
#include "io/hdf5_lock.hpp"
#include "data/dataset.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

// The ConfigError message of f(), or a marker when it throws something else or nothing.
std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not a ConfigError) ") + e.what();
  }
  return "(no error)";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

json synthetic() {
  return {{"type", "synthetic"}, {"samples", 64}, {"x_shape", {8}}, {"task", "binary"}};
}

TEST(MakeDataset, SyntheticSpecWithDefaults) {
  auto ds = make_dataset(synthetic(), "data.train", "");
  EXPECT_EQ(ds->size(), 64);
  EXPECT_EQ(ds->x_shape(), Shape{8});
  EXPECT_EQ(ds->y_shape(), Shape{1});
  auto cls = make_dataset({{"type", "synthetic"},
                           {"samples", 5},
                           {"x_shape", {2, 2}},
                           {"task", "classes"},
                           {"classes", 3},
                           {"seed", 4}},
                          "d", "");
  EXPECT_EQ(cls->y_shape(), Shape{});
  auto reg = make_dataset({{"type", "synthetic"},
                           {"samples", 5},
                           {"x_shape", {2}},
                           {"task", "regression"},
                           {"y_shape", {3}}},
                          "d", "");
  EXPECT_EQ(reg->y_shape(), Shape{3});
}

TEST(MakeDataset, UnknownTypeNamesPathAndChoices) {
  const auto msg = config_error_of([] { make_dataset({{"type", "csvv"}}, "data.train", ""); });
  EXPECT_TRUE(has(msg, "'data.train.type'")) << msg;
  EXPECT_TRUE(has(msg, "unknown dataset type 'csvv'")) << msg;
  EXPECT_TRUE(has(msg, "'synthetic'")) << msg;
}

TEST(MakeDataset, MissingTypeAndNonObjectSpec) {
  EXPECT_TRUE(has(config_error_of([] { make_dataset(json::object(), "data.train", ""); }),
                  "'data.train.type': required key is missing"));
  EXPECT_TRUE(
      has(config_error_of([] { make_dataset(json::array(), "data.train", ""); }), "'data.train'"));
}

TEST(MakeDataset, UnknownKeyIsAnErrorBeforeAnyFileIsOpened) {
  json spec = synthetic();
  spec["shufle"] = true;
  auto msg = config_error_of([&] { make_dataset(spec, "data.train", ""); });
  EXPECT_TRUE(has(msg, "'data.train.shufle': unknown key")) << msg;
  // The typo wins over the missing file: the spec is checked first.
  msg = config_error_of([] {
    make_dataset(
        {{"type", "idx"}, {"x", "/nonexistent/x.gz"}, {"y", "/nonexistent/y.gz"}, {"scal", 1.0}},
        "data.train", "");
  });
  EXPECT_TRUE(has(msg, "'data.train.scal': unknown key")) << msg;
}

TEST(MakeDataset, WrongTypesAndRanges) {
  json spec = synthetic();
  spec["samples"] = "ten";
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "data.train", ""); }),
                  "'data.train.samples': expected an integer, got a string"));
  spec["samples"] = -5;
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "data.train", ""); }),
                  "'data.train.samples': expected an integer from 1 to 2147483647, got -5"));
  spec = synthetic();
  spec["x_shape"] = {8, 0};
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "d", ""); }), "'d.x_shape[1]'"));
  spec = synthetic();
  spec["task"] = "ranking";
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "d", ""); }), "'d.task'"));
  spec = synthetic();
  spec["classes"] = 3;  // only for task "classes"
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "d", ""); }), "'d.classes'"));
  spec["task"] = "classes";
  spec["y_shape"] = {1};
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "d", ""); }), "'d.y_shape'"));
  spec = synthetic();
  spec["seed"] = -1;
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(spec, "d", ""); }), "'d.seed'"));
  json idx = {{"type", "idx"}, {"x", "a.gz"}, {"y", "b.gz"}, {"scale", 0}};
  EXPECT_TRUE(has(config_error_of([&] { make_dataset(idx, "d", ""); }), "'d.scale'"));
  idx = {{"type", "idx"}, {"x", 3}, {"y", "b.gz"}};
  EXPECT_TRUE(
      has(config_error_of([&] { make_dataset(idx, "d", ""); }), "'d.x': expected a string"));
  EXPECT_TRUE(has(config_error_of([&] {
                    make_dataset({{"type", "hdf5"}}, "d", "");
                  }),
                  "'d.path': required key is missing"));
}

TEST(MakeDataset, IdxRelativeFilesResolveAgainstBaseDir) {
  const auto dir = test::scratch_dir("make-dataset");
  std::string x_payload(6 * 4, '\x10'), y_payload{0, 1, 2, 3, 4, 5};
  test::write_gz(dir / "x.gz", test::idx_bytes(0x08, {6, 2, 2}, x_payload));
  test::write_gz(dir / "y.gz", test::idx_bytes(0x08, {6}, y_payload));
  auto ds =
      make_dataset({{"type", "idx"}, {"x", "x.gz"}, {"y", "y.gz"}}, "data.train", dir.string());
  EXPECT_EQ(ds->size(), 6);
  EXPECT_EQ(ds->x_shape(), (Shape{2, 2}));
  EXPECT_TRUE(has(ds->describe(), (dir / "x.gz").string())) << ds->describe();
  // A missing relative file is a DataError naming the resolved path.
  try {
    make_dataset({{"type", "idx"}, {"x", "nope.gz"}, {"y", "y.gz"}}, "data.train", dir.string());
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_TRUE(has(e.what(), (dir / "nope.gz").string())) << e.what();
  }
}

TEST(MakeDataset, FashionMnistTestSetFromSpec) {
  auto ds = make_dataset(
      {{"type", "idx"}, {"x", "t10k-images-idx3-ubyte.gz"}, {"y", "t10k-labels-idx1-ubyte.gz"}},
      "data.validation", test::fashion_mnist_dir().string());
  EXPECT_EQ(ds->size(), 10000);
  EXPECT_EQ(ds->x_shape(), (Shape{28, 28}));
  EXPECT_EQ(ds->y_shape(), Shape{});
}

TEST(MakeDataset, Hdf5SpecWithDefaultDatasetNames) {
  const auto dir = test::scratch_dir("make-dataset-h5");
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    hid_t f = H5Fcreate((dir / "train.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const float x[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    const std::int64_t y[4] = {3, 2, 1, 0};
    const hsize_t xd[2] = {4, 2}, yd[1] = {4};
    hid_t xs = H5Screate_simple(2, xd, nullptr), ys = H5Screate_simple(1, yd, nullptr);
    hid_t xset = H5Dcreate2(f, "x", H5T_IEEE_F32LE, xs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t yset = H5Dcreate2(f, "y", H5T_STD_I64LE, ys, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(xset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
    H5Dwrite(yset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, y);
    H5Dclose(xset);
    H5Dclose(yset);
    H5Sclose(xs);
    H5Sclose(ys);
    H5Fclose(f);
  }
  auto ds = make_dataset({{"type", "hdf5"}, {"path", "train.h5"}}, "data.train", dir.string());
  EXPECT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->x_shape(), Shape{2});
  EXPECT_EQ(ds->y_shape(), Shape{});
  std::vector<std::int64_t> idx{2, 0};
  std::vector<float> x(4), y(2);
  ds->read(idx, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<float>{4, 5, 0, 1}));
  EXPECT_EQ(y, (std::vector<float>{1, 3}));
  try {
    make_dataset({{"type", "hdf5"}, {"path", "train.h5"}, {"y", "labels"}}, "data.train",
                 dir.string());
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_TRUE(has(e.what(), "no dataset 'labels' (datasets in the file: 'x', 'y')")) << e.what();
  }
}

TEST(MakeDataset, Hdf5SpecMissingFileIsDataError) {
  const auto dir = test::scratch_dir("make-dataset-h5");
  try {
    make_dataset({{"type", "hdf5"}, {"path", "train.h5"}}, "data.train", dir.string());
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_TRUE(has(e.what(), (dir / "train.h5").string() + ": file not found")) << e.what();
  }
}

}  // namespace
}  // namespace tandem
