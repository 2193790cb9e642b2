// Checksummed chunks: how a checkpoint's arrays are chunked, and their chunks written already
// filtered.
//
// Every non-empty array of a checkpoint is stored chunked, each chunk followed by HDF5's
// Fletcher32 checksum (docs/checkpoint-format.md). Written through H5Dwrite, HDF5 fills each
// new chunk with zeros in a buffer of its own, copies the values in, then copies that into a
// second buffer to append the checksum — two fresh chunk-sized buffers a chunk, whose pages
// were half the cost of saving a 494 MB checkpoint on this project's VMs. ChunkWriter gathers each
// chunk once into a buffer it keeps, appends the checksum exactly as HDF5's filter does, and
// hands the result to H5Dwrite_chunk as a chunk that has been through the filter: the same
// bytes in the file, which HDF5, h5py and Keras check on every read as before.
//
// Use only while holding hdf5_mutex() (io/hdf5_lock.hpp), on one thread at a time per writer.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// The most bytes a chunk holds: small chunks keep HDF5's buffers small when it reads them.
inline constexpr std::size_t kMaxChunkBytes = std::size_t{4} << 20;

/// The chunk shape of a non-empty array of `dims` elements of `element_bytes` each: the whole
/// array, halved (rounding up) along its largest axis while a chunk is over kMaxChunkBytes.
std::vector<hsize_t> checkpoint_chunk_shape(const std::vector<hsize_t>& dims,
                                            std::size_t element_bytes);

/// HDF5's Fletcher32 checksum of `bytes` (H5_checksum_fletcher32: the bytes as big-endian 16-bit
/// words, an odd last byte as the high half of one, both sums folded to 16 bits every 360 words).
std::uint32_t hdf5_fletcher32(std::span<const unsigned char> bytes);

/// Writes whole datasets chunk by chunk with H5Dwrite_chunk. Keeps one chunk-sized buffer
/// between calls. Not thread-safe.
class ChunkWriter {
 public:
  /// Writes `values` (row-major, `dims` elements of `element_bytes` each, already in the file's
  /// byte order) into `dataset`, which was created with chunks of `chunk` (one entry per
  /// dimension) and the Fletcher32 filter as its only filter. Chunks reaching past the array's
  /// end are padded with zero bytes, as HDF5 pads them. Throws std::runtime_error naming `what`
  /// (and HDF5's message) when HDF5 refuses a chunk.
  void write(hid_t dataset, const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
             std::size_t element_bytes, const void* values, const std::string& what);

 private:
  // Copies the chunk at `origin` into buffer_ (zero past the array's end).
  void gather(const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
              const std::vector<hsize_t>& origin, std::size_t element_bytes,
              const unsigned char* values);

  std::vector<unsigned char> buffer_;
};

}  // namespace tandem

TANDEM_INTERNAL_API_END
