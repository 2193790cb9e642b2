#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "core/data/data_test_util.hpp"
#include "data/datasets.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

using data::IdxSpec;

using test::data_error_of;

std::string fashion(const std::string& name) {
  return (test::fashion_mnist_dir() / name).string();
}

// Fashion-MNIST train, loaded once for all tests of the suite.
class IdxFashionMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    train_ = data::open_idx_dataset(
        {fashion("train-images-idx3-ubyte.gz"), fashion("train-labels-idx1-ubyte.gz"), {}});
  }
  static void TearDownTestSuite() { train_.reset(); }
  static std::shared_ptr<Dataset> train_;
};
std::shared_ptr<Dataset> IdxFashionMnist::train_;

TEST_F(IdxFashionMnist, ShapesAndSize) {
  EXPECT_EQ(train_->size(), 60000);
  EXPECT_EQ(train_->x_shape(), (Shape{28, 28}));
  EXPECT_EQ(train_->y_shape(), Shape{});
  EXPECT_NE(train_->describe().find("60000 samples"), std::string::npos) << train_->describe();
}

TEST_F(IdxFashionMnist, EveryClassSixThousandTimesAndPixelsInUnitRange) {
  const std::int64_t n = train_->size(), chunk = 5000;
  std::vector<std::int64_t> counts(10, 0);
  float lo = 1e9f, hi = -1e9f;
  std::vector<float> x(static_cast<std::size_t>(chunk * 784)), y(static_cast<std::size_t>(chunk));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(chunk));
  for (std::int64_t first = 0; first < n; first += chunk) {
    std::iota(idx.begin(), idx.end(), first);
    train_->read(idx, x.data(), y.data());
    for (float label : y) {
      ASSERT_EQ(label, std::floor(label));
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++counts[static_cast<std::size_t>(label)];
    }
    const auto [mn, mx] = std::minmax_element(x.begin(), x.end());
    lo = std::min(lo, *mn);
    hi = std::max(hi, *mx);
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[static_cast<std::size_t>(c)], 6000) << c;
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);  // 255 scales to exactly 1
}

TEST_F(IdxFashionMnist, FirstSampleMatchesRawFileBytes) {
  // Independent decode: labels header is 00 00 08 01, count 60000, then one byte per label.
  const std::string labels = test::read_gz(fashion("train-labels-idx1-ubyte.gz"), 9);
  ASSERT_EQ(labels.size(), 9u);
  EXPECT_EQ(labels.substr(0, 4), std::string("\0\0\x08\x01", 4));
  EXPECT_EQ(static_cast<unsigned char>(labels[8]), 9);  // the first label is 9 (ankle boot)
  const std::string images = test::read_gz(fashion("train-images-idx3-ubyte.gz"), 16 + 784);
  ASSERT_EQ(images.size(), 16u + 784u);

  std::vector<float> x(784), y(1);
  const std::int64_t first = 0;
  train_->read({&first, 1}, x.data(), y.data());
  EXPECT_EQ(y[0], 9.0f);
  for (std::size_t k = 0; k < 784; ++k)
    ASSERT_FLOAT_EQ(x[k], static_cast<unsigned char>(images[16 + k]) / 255.0f) << k;
}

TEST(IdxDataset, FashionMnistTestSetHasTenThousandSamples) {
  auto test = data::open_idx_dataset(
      {fashion("t10k-images-idx3-ubyte.gz"), fashion("t10k-labels-idx1-ubyte.gz"), {}});
  EXPECT_EQ(test->size(), 10000);
}

class IdxFiles : public ::testing::Test {
 protected:
  std::filesystem::path dir_ = test::scratch_dir("idx");

  // 10 images of 3x4 bytes (value = 7 * sample + pixel, mod 256), labels = sample % 4.
  static std::string image_payload() {
    std::string p;
    for (int i = 0; i < 10; ++i)
      for (int k = 0; k < 12; ++k) p.push_back(static_cast<char>((7 * i + k) % 256));
    return p;
  }
  static std::string label_payload(int n = 10) {
    std::string p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<char>(i % 4));
    return p;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
};

TEST_F(IdxFiles, GzAndPlainFilesReadBack) {
  test::write_gz(path("x.gz"), test::idx_bytes(0x08, {10, 3, 4}, image_payload()));
  test::write_text(path("y"), test::idx_bytes(0x08, {10}, label_payload()));
  auto ds = data::open_idx_dataset({path("x.gz"), path("y"), {}});
  ASSERT_EQ(ds->size(), 10);
  EXPECT_EQ(ds->x_shape(), (Shape{3, 4}));
  std::vector<std::int64_t> idx{7, 2};
  std::vector<float> x(24), y(2);
  ds->read(idx, x.data(), y.data());
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_FLOAT_EQ(x[5], (7 * 7 + 5) / 255.0f);
  EXPECT_FLOAT_EQ(x[12 + 11], (7 * 2 + 11) / 255.0f);
}

TEST_F(IdxFiles, ExplicitScaleAndWideTypes) {
  // x as big-endian float32 (type 0x0D): default scale 1; y as int16 (0x0B) with negatives.
  std::string xs, ys;
  for (int i = 0; i < 4; ++i) {
    float f = 0.5f * static_cast<float>(i) - 1.0f;
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int shift = 24; shift >= 0; shift -= 8) xs.push_back(static_cast<char>(u >> shift));
    const auto s = static_cast<std::uint16_t>(static_cast<std::int16_t>(-300 + i));
    ys.push_back(static_cast<char>(s >> 8));
    ys.push_back(static_cast<char>(s & 0xff));
  }
  test::write_gz(path("xf.gz"), test::idx_bytes(0x0D, {4, 1}, xs));
  test::write_gz(path("ys.gz"), test::idx_bytes(0x0B, {4}, ys));
  auto ds = data::open_idx_dataset({path("xf.gz"), path("ys.gz"), {}});
  std::vector<std::int64_t> idx{0, 1, 2, 3};
  std::vector<float> x(4), y(4);
  ds->read(idx, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f}));
  EXPECT_EQ(y, (std::vector<float>{-300, -299, -298, -297}));

  // An explicit scale multiplies x (ubyte data here), never the labels.
  test::write_gz(path("x.gz"), test::idx_bytes(0x08, {10, 3, 4}, image_payload()));
  test::write_gz(path("y.gz"), test::idx_bytes(0x08, {10}, label_payload()));
  auto scaled = data::open_idx_dataset({path("x.gz"), path("y.gz"), 2.0});
  std::vector<float> x12(12), y1(1);
  const std::int64_t one = 1;
  scaled->read({&one, 1}, x12.data(), y1.data());
  EXPECT_EQ(x12[3], 2.0f * (7 + 3));
  EXPECT_EQ(y1[0], 1.0f);
}

TEST_F(IdxFiles, TruncatedGzPayloadNamesFileAndSizes) {
  // A complete gzip stream whose IDX payload stops short of what the header promises.
  const std::string full = test::idx_bytes(0x08, {10, 3, 4}, image_payload());
  test::write_gz(path("short.gz"), full.substr(0, full.size() - 20));
  const std::string msg = data_error_of([&] { data::read_idx_file(path("short.gz")); });
  EXPECT_NE(msg.find(path("short.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated: header promises 120 bytes of data, file has 100"),
            std::string::npos)
      << msg;
}

TEST_F(IdxFiles, CutCompressedFileIsTruncated) {
  // A valid gz file cut in the middle of the compressed stream.
  std::string payload;
  std::uint32_t state = 12345;  // an LCG: bytes that barely compress
  for (int i = 0; i < 2000 * 12; ++i) {
    state = state * 1664525u + 1013904223u;
    payload.push_back(static_cast<char>(state >> 24));
  }
  test::write_gz(path("x.gz"), test::idx_bytes(0x08, {2000, 3, 4}, payload));
  ASSERT_NO_THROW(data::read_idx_file(path("x.gz")));
  const std::string gz = test::read_text(path("x.gz"));
  test::write_text(path("cut.gz"), gz.substr(0, gz.size() / 2));
  const std::string msg = data_error_of([&] { data::read_idx_file(path("cut.gz")); });
  EXPECT_NE(msg.find(path("cut.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("header promises 24000 bytes"), std::string::npos) << msg;
}

// gzip as Python's gzip module reads it: several members are one stream; a member whose CRC and
// length were cut off, or bytes after the last member that start no other, are errors (zlib's
// gzread took both: it stopped where the reader stopped, and skipped what followed a member).
TEST_F(IdxFiles, GzipMembersAreCheckedToTheirEnd) {
  const std::string idx = test::idx_bytes(0x08, {10, 3, 4}, image_payload());
  test::write_gz(path("a.gz"), idx.substr(0, 50));
  test::write_gz(path("b.gz"), idx.substr(50));
  test::write_text(path("two.gz"), test::read_text(path("a.gz")) + test::read_text(path("b.gz")));
  const data::IdxArray two = data::read_idx_file(path("two.gz"));
  EXPECT_EQ(std::string(two.bytes.begin(), two.bytes.end()), image_payload());
  test::write_gz(path("x.gz"), idx);
  const std::string gz = test::read_text(path("x.gz"));
  test::write_text(path("no-trailer.gz"), gz.substr(0, gz.size() - 8));
  std::string msg = data_error_of([&] { data::read_idx_file(path("no-trailer.gz")); });
  EXPECT_NE(msg.find(path("no-trailer.gz") + ": truncated gzip data"), std::string::npos) << msg;
  test::write_text(path("garbage.gz"), gz + "garbage!");
  msg = data_error_of([&] { data::read_idx_file(path("garbage.gz")); });
  EXPECT_NE(msg.find("trailing garbage"), std::string::npos) << msg;
  test::write_text(path("bad-crc.gz"), gz.substr(0, gz.size() - 8) + std::string(8, '\x01'));
  msg = data_error_of([&] { data::read_idx_file(path("bad-crc.gz")); });
  EXPECT_NE(msg.find("corrupt gzip data (incorrect data check)"), std::string::npos) << msg;
}

TEST_F(IdxFiles, TruncatedHeaderAndEmptyFile) {
  test::write_text(path("empty"), "");
  EXPECT_NE(data_error_of([&] { data::read_idx_file(path("empty")); }).find("empty file"),
            std::string::npos);
  test::write_gz(path("hdr.gz"), std::string("\0\0\x08\x03\0\0", 6));
  const std::string msg = data_error_of([&] { data::read_idx_file(path("hdr.gz")); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(IdxFiles, MissingFileNamesPath) {
  test::write_gz(path("y.gz"), test::idx_bytes(0x08, {10}, label_payload()));
  const std::string msg = data_error_of([&] {
    data::open_idx_dataset({path("nope.gz"), path("y.gz"), {}});
  });
  EXPECT_NE(msg.find(path("nope.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
}

TEST_F(IdxFiles, BadMagic) {
  test::write_gz(path("bad.gz"), std::string("\x12\x34\x08\x01\0\0\0\x01\x05", 9));
  std::string msg = data_error_of([&] { data::read_idx_file(path("bad.gz")); });
  EXPECT_NE(msg.find(path("bad.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad magic 12340801"), std::string::npos) << msg;
  // A valid prefix with an unknown type code (0x0A) is rejected too.
  test::write_text(path("type"), std::string("\0\0\x0a\x01\0\0\0\x01\x05", 9));
  msg = data_error_of([&] { data::read_idx_file(path("type")); });
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
}

TEST_F(IdxFiles, TrailingDataIsAnError) {
  test::write_gz(path("long.gz"), test::idx_bytes(0x08, {9}, label_payload(10)));
  const std::string msg = data_error_of([&] { data::read_idx_file(path("long.gz")); });
  EXPECT_NE(msg.find("trailing data"), std::string::npos) << msg;
}

TEST_F(IdxFiles, MismatchedCountsNameBothFiles) {
  test::write_gz(path("x.gz"), test::idx_bytes(0x08, {10, 3, 4}, image_payload()));
  test::write_gz(path("y9.gz"), test::idx_bytes(0x08, {9}, label_payload(9)));
  const std::string msg = data_error_of([&] {
    data::open_idx_dataset({path("x.gz"), path("y9.gz"), {}});
  });
  EXPECT_NE(msg.find(path("x.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find(path("y9.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("10 samples"), std::string::npos) << msg;
}

TEST_F(IdxFiles, OutOfRangeIndexIsAnError) {
  test::write_gz(path("x.gz"), test::idx_bytes(0x08, {10, 3, 4}, image_payload()));
  test::write_gz(path("y.gz"), test::idx_bytes(0x08, {10}, label_payload()));
  auto ds = data::open_idx_dataset({path("x.gz"), path("y.gz"), {}});
  std::vector<float> x(12), y(1);
  const std::int64_t bad = 10;
  EXPECT_THROW(ds->read({&bad, 1}, x.data(), y.data()), DataError);
}

}  // namespace
}  // namespace tandem
