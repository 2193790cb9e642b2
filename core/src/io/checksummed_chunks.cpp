#include "io/checksummed_chunks.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "io/hdf5_handle.hpp"

namespace tandem {

namespace {

constexpr std::size_t kChecksumBytes = 4;

hsize_t product(const std::vector<hsize_t>& dims) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  return n;
}

// The stride in elements of each dimension of a row-major array of `dims`.
std::vector<hsize_t> strides_of(const std::vector<hsize_t>& dims) {
  std::vector<hsize_t> strides(dims.size(), 1);
  for (std::size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * dims[d];
  return strides;
}

// Moves `index` (one entry per dimension, each below `limits`) to the next position in row-major
// order; false after the last.
bool advance(std::vector<hsize_t>& index, const std::vector<hsize_t>& limits) {
  for (std::size_t d = index.size(); d-- > 0;) {
    if (++index[d] < limits[d]) return true;
    index[d] = 0;
  }
  return false;
}

}  // namespace

std::vector<hsize_t> checkpoint_chunk_shape(const std::vector<hsize_t>& dims,
                                            std::size_t element_bytes) {
  std::vector<hsize_t> chunk = dims;
  while (product(chunk) * element_bytes > kMaxChunkBytes) {
    auto largest = std::max_element(chunk.begin(), chunk.end());
    if (*largest <= 1) break;  // one element over the limit: a chunk of one element
    *largest = (*largest + 1) / 2;
  }
  return chunk;
}

std::uint32_t hdf5_fletcher32(std::span<const unsigned char> bytes) {
  const unsigned char* data = bytes.data();
  std::size_t words = bytes.size() / 2;
  std::uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    // 360 words is the most that can be summed before sum2 could overflow 32 bits.
    std::size_t block = std::min<std::size_t>(words, 360);
    words -= block;
    for (; block > 0; --block, data += 2) {
      sum1 += static_cast<std::uint32_t>(data[0]) << 8 | data[1];
      sum2 += sum1;
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (bytes.size() % 2 != 0) {
    sum1 += static_cast<std::uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return sum2 << 16 | sum1;
}

void ChunkWriter::gather(const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                         const std::vector<hsize_t>& origin, std::size_t element_bytes,
                         const unsigned char* values) {
  const std::size_t rank = dims.size();
  const std::vector<hsize_t> strides = strides_of(dims);
  const std::size_t row_bytes = chunk[rank - 1] * element_bytes;
  const hsize_t last = origin[rank - 1];
  const std::size_t copied = std::min(chunk[rank - 1], dims[rank - 1] - last) * element_bytes;
  // One chunk row (the last dimension) at a time, over the other dimensions in order.
  std::vector<hsize_t> row(rank - 1, 0);
  const std::vector<hsize_t> rows(chunk.begin(), chunk.end() - 1);
  unsigned char* out = buffer_.data();
  do {
    bool inside = true;
    hsize_t at = last;
    for (std::size_t d = 0; d + 1 < rank; ++d) {
      inside = inside && origin[d] + row[d] < dims[d];
      at += (origin[d] + row[d]) * strides[d];
    }
    const std::size_t valid = inside ? copied : 0;
    if (valid > 0) std::memcpy(out, values + at * element_bytes, valid);
    std::memset(out + valid, 0, row_bytes - valid);
    out += row_bytes;
  } while (advance(row, rows));
}

void ChunkWriter::write(hid_t dataset, const std::vector<hsize_t>& dims,
                        const std::vector<hsize_t>& chunk, std::size_t element_bytes,
                        const void* values, const std::string& what) {
  const std::size_t chunk_bytes = product(chunk) * element_bytes;
  buffer_.resize(chunk_bytes + kChecksumBytes);
  std::vector<hsize_t> grid(dims.size()), index(dims.size(), 0), origin(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) grid[d] = (dims[d] + chunk[d] - 1) / chunk[d];
  do {
    for (std::size_t d = 0; d < dims.size(); ++d) origin[d] = index[d] * chunk[d];
    gather(dims, chunk, origin, element_bytes, static_cast<const unsigned char*>(values));
    const std::uint32_t sum = hdf5_fletcher32({buffer_.data(), chunk_bytes});
    for (std::size_t b = 0; b < kChecksumBytes; ++b)  // little-endian, as the filter stores it
      buffer_[chunk_bytes + b] = static_cast<unsigned char>(sum >> (8 * b));
    if (H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, origin.data(), buffer_.size(), buffer_.data()) <
        0) {
      const std::string detail = hdf5_error_text();
      throw std::runtime_error("cannot write dataset '" + what + "'" +
                               (detail.empty() ? "" : " (HDF5: " + detail + ")"));
    }
  } while (advance(index, grid));
}

}  // namespace tandem
