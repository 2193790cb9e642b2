// ChunkWriter against HDF5's own filter pipeline: the same array written through H5Dwrite (HDF5
// zero-fills each chunk and appends its Fletcher32 checksum) and through ChunkWriter (the chunk
// gathered and checksummed here, handed to H5Dwrite_chunk), then every stored chunk read back raw
// with H5Dread_chunk: the same bytes, checksum included, for 1-, 2- and 3-dimensional arrays
// with edge chunks in each dimension, float32 and 64-bit words, and bytes in chunks of odd
// length (Fletcher32's odd last byte). HDF5 then reads the written array back through its filter,
// which verifies each checksum.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "io/checksummed_chunks.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_lock.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

struct Case {
  std::vector<hsize_t> dims, chunk;
  hid_t type;  // the file's and the memory's
  std::size_t element_bytes;
};

// A file in memory with dataset `name` of the case's shape, chunked, with the Fletcher32 filter.
H5Handle create_dataset(hid_t file, const std::string& name, const Case& c) {
  H5Handle space(H5Screate_simple(static_cast<int>(c.dims.size()), c.dims.data(), nullptr),
                 H5Sclose);
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  EXPECT_GE(H5Pset_chunk(dcpl.get(), static_cast<int>(c.chunk.size()), c.chunk.data()), 0);
  EXPECT_GE(H5Pset_fletcher32(dcpl.get()), 0);
  return H5Handle(
      H5Dcreate2(file, name.c_str(), c.type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose);
}

// Every stored chunk of `dataset`, raw (after the filter), in row-major chunk order.
std::vector<std::vector<unsigned char>> raw_chunks(hid_t dataset, const Case& c) {
  std::vector<std::vector<unsigned char>> chunks;
  std::vector<hsize_t> index(c.dims.size(), 0), offset(c.dims.size());
  for (;;) {
    for (std::size_t d = 0; d < c.dims.size(); ++d) offset[d] = index[d] * c.chunk[d];
    hsize_t bytes = 0;
    EXPECT_GE(H5Dget_chunk_storage_size(dataset, offset.data(), &bytes), 0);
    std::vector<unsigned char> raw(bytes);
    std::uint32_t filters = 99;
    EXPECT_GE(H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &filters, raw.data()), 0);
    EXPECT_EQ(filters, 0u);  // the filter was applied
    chunks.push_back(std::move(raw));
    std::size_t d = c.dims.size();
    while (d-- > 0) {
      if (++index[d] * c.chunk[d] < c.dims[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return chunks;
  }
}

TEST(ChecksummedChunks, WritesTheBytesHdf5sFilterWrites) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const std::vector<Case> cases = {
      {{10}, {4}, H5T_NATIVE_FLOAT, 4},
      {{1000}, {1000}, H5T_NATIVE_FLOAT, 4},  // 2,000 words: Fletcher32 folds every 360
      {{37, 29}, {20, 16}, H5T_NATIVE_FLOAT, 4},
      {{7, 5}, {3, 2}, H5T_NATIVE_FLOAT, 4},
      {{6, 4}, {6, 4}, H5T_NATIVE_FLOAT, 4},
      {{5, 3, 4}, {2, 3, 3}, H5T_NATIVE_FLOAT, 4},
      {{9}, {4}, H5T_NATIVE_UINT64, 8},
      {{11}, {5}, H5T_NATIVE_UINT8, 1},  // chunks of 5 bytes: an odd last byte
      {{3, 7}, {3, 3}, H5T_NATIVE_UINT8, 1},
  };
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  ASSERT_GE(H5Pset_fapl_core(fapl.get(), 1 << 16, false), 0);
  H5Handle file(H5Fcreate("chunks-test", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  ASSERT_TRUE(file.valid());
  ChunkWriter writer;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    hsize_t count = 1;
    for (hsize_t d : c.dims) count *= d;
    std::vector<unsigned char> values(count * c.element_bytes);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<unsigned char>(i * 37 + 11 + k);
    H5Handle filtered = create_dataset(file.get(), "filtered" + std::to_string(k), c);
    H5Handle direct = create_dataset(file.get(), "direct" + std::to_string(k), c);
    ASSERT_GE(H5Dwrite(filtered.get(), c.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    writer.write(direct.get(), c.dims, c.chunk, c.element_bytes, values.data(), "direct");
    const auto want = raw_chunks(filtered.get(), c);
    EXPECT_EQ(raw_chunks(direct.get(), c), want);
    std::vector<unsigned char> back(values.size());
    ASSERT_GE(H5Dread(direct.get(), c.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
    EXPECT_EQ(back, values);
    // The checksum is the chunk's last four bytes, little-endian, over the rest.
    const auto& first = want.front();
    const std::size_t data_bytes = first.size() - 4;
    const std::uint32_t stored = first[data_bytes] | first[data_bytes + 1] << 8 |
                                 first[data_bytes + 2] << 16 |
                                 static_cast<std::uint32_t>(first[data_bytes + 3]) << 24;
    EXPECT_EQ(hdf5_fletcher32({first.data(), data_bytes}), stored);
  }
}

TEST(ChecksummedChunks, ADamagedDirectChunkFailsItsRead) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const Case c{{8, 8}, {4, 4}, H5T_NATIVE_FLOAT, 4};
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  ASSERT_GE(H5Pset_fapl_core(fapl.get(), 1 << 16, false), 0);
  H5Handle file(H5Fcreate("damaged-test", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  H5Handle dataset = create_dataset(file.get(), "kernel", c);
  std::vector<float> values(64, 0.5f);
  ChunkWriter().write(dataset.get(), c.dims, c.chunk, 4, values.data(), "kernel");
  // Rewrite one chunk with a byte changed but the old checksum kept.
  const hsize_t offset[2] = {4, 0};
  std::vector<unsigned char> raw(4 * 4 * 4 + 4);
  std::uint32_t filters = 0;
  ASSERT_GE(H5Dread_chunk(dataset.get(), H5P_DEFAULT, offset, &filters, raw.data()), 0);
  raw[5] ^= 0x40;
  ASSERT_GE(H5Dwrite_chunk(dataset.get(), H5P_DEFAULT, 0, offset, raw.size(), raw.data()), 0);
  std::vector<float> back(64);
  H5E_auto2_t report = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &report, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  EXPECT_LT(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()),
            0);
  H5Eset_auto2(H5E_DEFAULT, report, data);
  H5Eclear2(H5E_DEFAULT);
}

TEST(ChecksummedChunks, ChunksHalveTheLargestAxisUntilFourMiB) {
  EXPECT_EQ(checkpoint_chunk_shape({8000, 4000}, 4), (std::vector<hsize_t>{1000, 1000}));
  EXPECT_EQ(checkpoint_chunk_shape({4000}, 4), (std::vector<hsize_t>{4000}));
  EXPECT_EQ(checkpoint_chunk_shape({3, 3, 64, 64}, 4), (std::vector<hsize_t>{3, 3, 64, 64}));
  EXPECT_EQ(checkpoint_chunk_shape({1048577}, 4), (std::vector<hsize_t>{524289}));
  EXPECT_EQ(checkpoint_chunk_shape({1048577}, 8), (std::vector<hsize_t>{262145}));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
