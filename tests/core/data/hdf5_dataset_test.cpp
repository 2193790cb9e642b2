#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "core/data/data_test_util.hpp"
#include "data/datasets.hpp"
#include "io/hdf5_lock.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

constexpr std::int64_t kRows = 12000;

using test::data_error_of;

// Writes one dataset, chunked along the samples and deflate-compressed when chunk_rows > 0.
void write_dataset(hid_t loc, const char* name, hid_t mem_type, hid_t file_type,
                   const std::vector<hsize_t>& dims, const void* values, hsize_t chunk_rows) {
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk_rows > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = chunk_rows;
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl, 1);
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t dset = H5Dcreate2(loc, name, file_type, space, lcpl, dcpl, H5P_DEFAULT);
  ASSERT_GE(dset, 0) << name;
  ASSERT_GE(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << name;
  H5Dclose(dset);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
}

float x_value(std::int64_t i, std::int64_t j) {
  return static_cast<float>(i * 10 + j);
}
float y_value(std::int64_t i) {
  return static_cast<float>(i) * 0.5f;
}

class Hdf5Dataset : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("hdf5");
    file_ = (dir_ / "data.h5").string();
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    hid_t f = H5Fcreate(file_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    std::vector<std::int32_t> x(kRows * 5);
    std::vector<double> y(kRows);
    std::vector<float> y1(kRows);
    std::vector<std::uint8_t> img(kRows * 6);
    for (std::int64_t i = 0; i < kRows; ++i) {
      for (std::int64_t j = 0; j < 5; ++j)
        x[static_cast<std::size_t>(i * 5 + j)] = static_cast<std::int32_t>(x_value(i, j));
      y[static_cast<std::size_t>(i)] = static_cast<double>(y_value(i));
      y1[static_cast<std::size_t>(i)] = static_cast<float>(i % 3);
      for (std::int64_t j = 0; j < 6; ++j)
        img[static_cast<std::size_t>(i * 6 + j)] = static_cast<std::uint8_t>((i + j) % 256);
    }
    const hsize_t n = kRows;
    write_dataset(f, "x", H5T_NATIVE_INT32, H5T_STD_I32LE, {n, 5}, x.data(), 1000);
    write_dataset(f, "y", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {n}, y.data(), 1000);
    write_dataset(f, "y1", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {n, 1}, y1.data(), 0);
    write_dataset(f, "grp/images", H5T_NATIVE_UINT8, H5T_STD_U8LE, {n, 2, 3}, img.data(), 512);
    write_dataset(f, "short", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {n - 1}, y1.data(), 0);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    const char names[3][4] = {"abc", "def", "ghi"};
    write_dataset(f, "names", str, str, {3}, names, 0);
    H5Tclose(str);
    H5Fclose(f);
  }

  static std::shared_ptr<Dataset> open(const std::string& x, const std::string& y,
                                       data::Hdf5ReadOptions options = {}) {
    return data::open_hdf5_dataset({file_, {x}, {y}, ""}, options);
  }

  static data::Hdf5ReadOptions small_cache() {
    data::Hdf5ReadOptions o;
    o.whole_limit_bytes = 0;
    o.block_bytes = 8 << 10;
    o.cache_blocks = 3;
    return o;
  }

  // Reads `order` in batches and checks every sample against what was written.
  static void expect_matches(const Dataset& ds, const std::vector<std::int64_t>& order,
                             std::size_t batch) {
    std::vector<float> x(batch * 5), y(batch);
    for (std::size_t first = 0; first < order.size(); first += batch) {
      const std::size_t n = std::min(batch, order.size() - first);
      ds.read({order.data() + first, n}, x.data(), y.data());
      for (std::size_t k = 0; k < n; ++k) {
        const std::int64_t i = order[first + k];
        for (std::int64_t j = 0; j < 5; ++j)
          ASSERT_EQ(x[k * 5 + static_cast<std::size_t>(j)], x_value(i, j)) << i;
        ASSERT_EQ(y[k], y_value(i)) << i;
      }
    }
  }

  static std::vector<std::int64_t> shuffled() {
    std::vector<std::int64_t> order(kRows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(42));
    return order;
  }

  static ssize_t open_objects() {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  }

  static std::filesystem::path dir_;
  static std::string file_;
};
std::filesystem::path Hdf5Dataset::dir_;
std::string Hdf5Dataset::file_;

TEST_F(Hdf5Dataset, SmallDataLoadsWholeAndReadsShuffled) {
  auto ds = open("x", "y");
  EXPECT_EQ(ds->size(), kRows);
  EXPECT_EQ(ds->x_shape(), Shape{5});
  EXPECT_EQ(ds->y_shape(), Shape{});
  ASSERT_TRUE(data::hdf5_stats(*ds).has_value());
  EXPECT_TRUE(data::hdf5_stats(*ds)->whole);
  expect_matches(*ds, shuffled(), 256);
}

TEST_F(Hdf5Dataset, BlockCacheReadsShuffledIndices) {
  auto ds = open("x", "y", small_cache());
  const auto stats = *data::hdf5_stats(*ds);
  EXPECT_FALSE(stats.whole);
  EXPECT_EQ(stats.block_rows, 1000);  // aligned to the 1000-row chunks
  expect_matches(*ds, shuffled(), 256);
  EXPECT_GT(data::hdf5_stats(*ds)->direct_rows, 0);
  // Unsorted indices with repeats, first and last rows.
  expect_matches(*ds, {5, 5, kRows - 1, 0, 999, 1000, 5}, 7);
}

TEST_F(Hdf5Dataset, BlockCacheServesSequentialReadsFromBlocks) {
  auto ds = open("x", "y", small_cache());
  std::vector<std::int64_t> order(kRows);
  std::iota(order.begin(), order.end(), 0);
  expect_matches(*ds, order, 100);
  const auto stats = *data::hdf5_stats(*ds);
  EXPECT_LE(stats.block_loads, kRows / 1000);  // each block read once
  EXPECT_GE(stats.block_hits, kRows / 2);
  EXPECT_LE(stats.direct_rows, 1000);
}

TEST_F(Hdf5Dataset, ShapesAndTypeConversion) {
  auto ds = open("grp/images", "y1", small_cache());
  EXPECT_EQ(ds->x_shape(), (Shape{2, 3}));
  EXPECT_EQ(ds->y_shape(), Shape{1});
  std::vector<std::int64_t> idx{300, 7};
  std::vector<float> x(12), y(2);
  ds->read(idx, x.data(), y.data());
  EXPECT_EQ(x[0], 300 % 256);
  EXPECT_EQ(x[5], (300 + 5) % 256);
  EXPECT_EQ(x[6 + 4], 7 + 4);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 1.0f);
}

TEST_F(Hdf5Dataset, MissingDatasetListsExistingNames) {
  const std::string msg = data_error_of([&] { open("images", "y"); });
  EXPECT_NE(msg.find(file_), std::string::npos) << msg;
  EXPECT_NE(msg.find("no dataset 'images'"), std::string::npos) << msg;
  for (const char* name : {"'x'", "'y'", "'y1'", "'grp/images'", "'names'"})
    EXPECT_NE(msg.find(name), std::string::npos) << name << " in " << msg;
}

// Something by that name that is no dataset says what it is; every one of these said "no dataset
// 'x'", listing the datasets there are.
TEST_F(Hdf5Dataset, AGroupABrokenLinkOrABoolArraySaysWhatItIs) {
  const auto made =
      test::run_python(dir_ / "links.py",
                       "import h5py, numpy as np, os, sys\n"
                       "os.chdir(sys.argv[1])\n"
                       "with h5py.File('links.h5', 'w') as f:\n"
                       "    f['y'] = np.zeros(4, np.float32)\n"
                       "    f.create_group('grp')['inner'] = np.zeros((4, 2), np.float32)\n"
                       "    f['soft'] = h5py.SoftLink('/nowhere')\n"
                       "    f['ext'] = h5py.ExternalLink('gone.h5', '/x')\n"
                       "    f['out'] = h5py.ExternalLink('other.h5', '/x')\n"
                       "    f['via'] = h5py.SoftLink('/out')\n"
                       "    f['flags'] = np.array([True, False, True, True])\n"
                       "with h5py.File('other.h5', 'w') as f:\n"
                       "    f['x'] = np.ones((4, 2), np.float32)\n",
                       dir_.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string file = (dir_ / "links.h5").string();
  const auto error_of = [&](const std::string& x) {
    return data_error_of([&] { data::open_hdf5_dataset({file, {x}, {"y"}, ""}); });
  };
  std::string e = error_of("grp");
  EXPECT_NE(e.find(file + ": 'grp' is a group, not a dataset"), std::string::npos) << e;
  e = error_of("soft");
  EXPECT_NE(e.find("'soft' is a soft link to '/nowhere', which leads to nothing"),
            std::string::npos)
      << e;
  // External links are not followed, to a file that is there or not, directly or through a
  // soft link: they may name any file (a FIFO would block the open).
  for (const auto& [name, target] : std::vector<std::pair<std::string, std::string>>{
           {"ext", "gone.h5:/x"}, {"out", "other.h5:/x"}, {"via", "other.h5:/x"}}) {
    e = error_of(name);
    EXPECT_NE(e.find("'" + name + "' leads through an external link to '" + target +
                     "', which Tandem does not follow"),
              std::string::npos)
        << e;
  }
  e = error_of("flags");
  EXPECT_NE(e.find("'flags' has an enum type (h5py writes NumPy bool arrays so)"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(data::open_hdf5_dataset({file, {"grp/inner"}, {"y"}, ""}));
  EXPECT_NE(error_of("none").find("no dataset 'none'"), std::string::npos);
}

TEST_F(Hdf5Dataset, MismatchedFirstDimensions) {
  const std::string msg = data_error_of([&] { open("x", "short"); });
  EXPECT_NE(msg.find("'x' has 12000 samples"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'short' has 11999"), std::string::npos) << msg;
}

TEST_F(Hdf5Dataset, NonNumericDataset) {
  const std::string msg = data_error_of([&] { open("names", "y"); });
  EXPECT_NE(msg.find(file_), std::string::npos) << msg;
  EXPECT_NE(msg.find("'names' has a non-numeric type (string)"), std::string::npos) << msg;
}

// Found by hdf5_dataset_fuzz: samples of no values (a (n, 0) dataset) were copied from a null
// pointer. Samples must hold 1 to 2^31 - 1 values, so that no size computed from them overflows.
TEST_F(Hdf5Dataset, SamplesWithNoValuesOrTooManyAreRefused) {
  const std::string file = (dir_ / "odd-shapes.h5").string();
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const std::vector<float> four(4, 1.0f);
    write_dataset(f, "empty_rows", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {4, 0}, four.data(), 0);
    write_dataset(f, "y", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {4}, four.data(), 0);
    // Declared, never written: 4 samples of 2^32 values each (HDF5 allocates nothing).
    const hsize_t dims[2] = {4, hsize_t{1} << 32};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk[2] = {1, 1024};
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dset = H5Dcreate2(f, "huge_rows", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(dset, 0);
    H5Dclose(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  for (const char* x : {"empty_rows", "huge_rows"}) {
    const std::string msg = data_error_of([&] { data::open_hdf5_dataset({file, {x}, {"y"}, ""}); });
    EXPECT_NE(msg.find(std::string("'") + x + "' has the shape (4, "), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected samples of 1 to 2147483647 values"), std::string::npos) << msg;
  }
}

// Datasets declared larger than what was written (a preallocating writer that died, a shape set
// before the data) would train on fill values: a 2 KB file could claim 2^31 samples of zeros.
TEST_F(Hdf5Dataset, SamplesDeclaredButNeverWrittenAreRefused) {
  const std::string file = (dir_ / "unwritten.h5").string();
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const std::vector<float> ten(10, 1.0f);
    write_dataset(f, "written", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {10}, ten.data(), 0);
    // "none": 2^31 - 1 samples of 784 values declared, nothing written.
    const hsize_t none_dims[2] = {(hsize_t{1} << 31) - 1, 784};
    hid_t none_space = H5Screate_simple(2, none_dims, nullptr);
    hid_t none_dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t none_chunk[2] = {64, 784};
    H5Pset_chunk(none_dcpl, 2, none_chunk);
    hid_t none =
        H5Dcreate2(f, "none", H5T_IEEE_F32LE, none_space, H5P_DEFAULT, none_dcpl, H5P_DEFAULT);
    ASSERT_GE(none, 0);
    H5Dclose(none);
    H5Pclose(none_dcpl);
    H5Sclose(none_space);
    // "part": 10 samples in chunks of 2, only the first 4 written.
    const hsize_t part_dims[1] = {10}, part_chunk[1] = {2}, start[1] = {0}, count[1] = {4};
    hid_t part_space = H5Screate_simple(1, part_dims, nullptr);
    hid_t part_dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(part_dcpl, 1, part_chunk);
    hid_t part =
        H5Dcreate2(f, "part", H5T_IEEE_F32LE, part_space, H5P_DEFAULT, part_dcpl, H5P_DEFAULT);
    ASSERT_GE(part, 0);
    H5Sselect_hyperslab(part_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mem = H5Screate_simple(1, count, nullptr);
    ASSERT_GE(H5Dwrite(part, H5T_NATIVE_FLOAT, mem, part_space, H5P_DEFAULT, ten.data()), 0);
    H5Sclose(mem);
    H5Dclose(part);
    H5Pclose(part_dcpl);
    H5Sclose(part_space);
    H5Fclose(f);
  }
  std::string msg = data_error_of([&] {
    data::open_hdf5_dataset({file, {"none"}, {"written"}, ""});
  });
  EXPECT_NE(
      msg.find(file +
               ": dataset 'none' declares 2147483647 samples but no value of it was ever written"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("dataset.resize(n, axis=0)"), std::string::npos) << msg;
  msg = data_error_of([&] { data::open_hdf5_dataset({file, {"written"}, {"part"}, ""}); });
  EXPECT_NE(msg.find("dataset 'part' declares 10 samples but only part of it was written (2 of its "
                     "5 chunks stored)"),
            std::string::npos)
      << msg;
  EXPECT_NO_THROW(data::open_hdf5_dataset({file, {"written"}, {"written"}, ""}));
}

// Values kept in other files read as the fill value where they are missing, without an error:
// a virtual dataset whose source file is gone, an external file shorter than the data.
TEST_F(Hdf5Dataset, VirtualAndExternalStorageAreRefusedWithTheWayOut) {
  const auto made = test::run_python(
      dir_ / "borrowed.py",
      "import h5py, numpy as np, os, sys\n"
      "os.chdir(sys.argv[1])\n"
      "x = np.ones((16, 4), np.float32)\n"
      "with h5py.File('virtual.h5', 'w') as f:\n"
      "    layout = h5py.VirtualLayout(shape=(16, 4), dtype='f4')\n"
      "    layout[:] = h5py.VirtualSource('gone.h5', 'x', shape=(16, 4))\n"
      "    f.create_virtual_dataset('x', layout, fillvalue=0)\n"
      "    f['y'] = np.zeros(16, np.float32)\n"
      "open('raw.bin', 'wb').write(x.tobytes()[:100])\n"
      "with h5py.File('external.h5', 'w') as f:\n"
      "    f.create_dataset('x', shape=(16, 4), dtype='f4', external=[('raw.bin', 0, "
      "h5py.h5f.UNLIMITED)])\n"
      "    f['y'] = np.zeros(16, np.float32)\n",
      dir_.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  for (const auto& [file, kind] : std::vector<std::pair<std::string, std::string>>{
           {"virtual.h5", "is a virtual dataset"},
           {"external.h5", "is stored in external files"}}) {
    const std::string path = (dir_ / file).string();
    const std::string msg = data_error_of([&] {
      data::open_hdf5_dataset({path, {"x"}, {"y"}, ""});
    });
    EXPECT_NE(msg.find(path + ": dataset 'x' " + kind), std::string::npos) << msg;
    EXPECT_NE(msg.find("out['x'] = f['x'][()]"), std::string::npos) << msg;
  }
}

TEST_F(Hdf5Dataset, MissingOrForeignFile) {
  const std::string missing = (dir_ / "missing.h5").string();
  std::string msg = data_error_of([&] { data::open_hdf5_dataset({missing, {"x"}, {"y"}, ""}); });
  EXPECT_NE(msg.find(missing + ": file not found"), std::string::npos) << msg;
  const std::string text = (dir_ / "text.h5").string();
  test::write_text(text, "this is not HDF5\n");
  msg = data_error_of([&] { data::open_hdf5_dataset({text, {"x"}, {"y"}, ""}); });
  EXPECT_NE(msg.find(text + ": not an HDF5 file"), std::string::npos) << msg;
}

TEST_F(Hdf5Dataset, HandlesAreClosedOnSuccessAndFailure) {
  const ssize_t before = open_objects();
  {
    auto ds = open("x", "y", small_cache());
    EXPECT_GT(open_objects(), before);  // file and datasets stay open for block reads
    expect_matches(*ds, {1, 2, 3}, 3);
  }
  EXPECT_EQ(open_objects(), before);
  { auto whole = open("x", "y"); }
  data_error_of([&] { open("x", "missing"); });
  data_error_of([&] { open("names", "y"); });
  data_error_of([&] { open("x", "short"); });
  EXPECT_EQ(open_objects(), before);
}

TEST_F(Hdf5Dataset, OutOfRangeIndexIsAnError) {
  auto ds = open("x", "y", small_cache());
  std::vector<float> x(5), y(1);
  const std::int64_t bad = kRows;
  EXPECT_THROW(ds->read({&bad, 1}, x.data(), y.data()), DataError);
}

// "sample_weight": one weight per sample, read after the sample's targets, whole or through the
// block cache; the targets' shapes do not count it.
TEST_F(Hdf5Dataset, SampleWeightsFollowEachSamplesTargets) {
  for (const bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "whole" : "block cache");
    auto ds = data::open_hdf5_dataset({file_, {"x"}, {"y"}, "y1"},
                                      whole ? data::Hdf5ReadOptions{} : small_cache());
    EXPECT_TRUE(ds->weighted());
    EXPECT_EQ(ds->y_shape(), Shape{});
    EXPECT_EQ(ds->y_parts(), std::vector<Shape>{Shape{}});
    const std::vector<std::int64_t> idx{4, 11999, 3000, 4};
    std::vector<float> x(idx.size() * 5), y(idx.size() * 2);
    ds->read(idx, x.data(), y.data());
    for (std::size_t k = 0; k < idx.size(); ++k) {
      EXPECT_EQ(y[2 * k], y_value(idx[k])) << idx[k];
      EXPECT_EQ(y[2 * k + 1], static_cast<float>(idx[k] % 3)) << idx[k];
      EXPECT_EQ(x[5 * k + 1], x_value(idx[k], 1)) << idx[k];
    }
  }
  EXPECT_FALSE(open("x", "y")->weighted());
}

// Weights of several values per sample (Keras' temporal weights, one per position of the
// targets; the objective checks their count against the model) follow the targets in order.
TEST_F(Hdf5Dataset, SampleWeightsPerPositionFollowTheTargetsInOrder) {
  for (const bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "whole" : "block cache");
    auto ds = data::open_hdf5_dataset({file_, {"y1"}, {"y"}, "grp/images"},
                                      whole ? data::Hdf5ReadOptions{} : small_cache());
    EXPECT_EQ(ds->weight_count(), 6);
    EXPECT_EQ(ds->y_row(), 7);
    EXPECT_EQ(ds->y_shape(), Shape{});
    const std::vector<std::int64_t> idx{300, 7, 11999};
    std::vector<float> x(idx.size()), y(idx.size() * 7);
    ds->read(idx, x.data(), y.data());
    for (std::size_t k = 0; k < idx.size(); ++k) {
      EXPECT_EQ(y[7 * k], y_value(idx[k])) << idx[k];
      for (std::int64_t j = 0; j < 6; ++j)
        EXPECT_EQ(y[7 * k + 1 + static_cast<std::size_t>(j)],
                  static_cast<float>((idx[k] + j) % 256))
            << idx[k] << " position " << j;
    }
  }
}

TEST_F(Hdf5Dataset, SampleWeightsOfAnotherCountAreRefused) {
  std::string msg = data_error_of([&] { data::open_hdf5_dataset({file_, {"x"}, {"y"}, "short"}); });
  EXPECT_NE(msg.find("'short' has 11999"), std::string::npos) << msg;
  msg = data_error_of([&] { data::open_hdf5_dataset({file_, {"x"}, {"y"}, "weights"}); });
  EXPECT_NE(msg.find("no dataset 'weights'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tandem
