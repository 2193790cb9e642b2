// NumPy's .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the header that describes
// an array, and its elements turned into floats. Only what NumPy writes for numbers is read:
// booleans, signed and unsigned integers of 1, 2, 4 and 8 bytes, floats of 2, 4 and 8 bytes,
// either byte order, C order. Object arrays, structured dtypes, strings, complex numbers and
// Fortran order are refused with the way out in the message. Stateless; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::data {

/// One element type, as the header's 'descr' names it ('<f4', '|u1', '>i8', '|b1').
struct NpyType {
  enum class Kind { boolean, signed_int, unsigned_int, floating };
  Kind kind = Kind::floating;
  int bytes = 4;
  bool big_endian = false;
};

struct NpyHeader {
  NpyType type;
  std::vector<std::int64_t> shape;  // () for a scalar
  std::size_t data_offset = 0;      // from the start of the .npy to the first element
  /// Elements (the product of shape) and their bytes; both checked against overflow.
  std::uint64_t elements = 0;
  std::uint64_t data_bytes = 0;
};

/// Longest header read: NumPy writes a few hundred bytes; version 2+ allows up to 4 GiB, which no
/// real array needs.
constexpr std::size_t kMaxNpyHeaderBytes = std::size_t{1} << 20;

/// Parses the header at the start of `bytes` (the file's first bytes: all of it, or at least the
/// header). Throws DataError starting with `where` when it is not a .npy header Tandem reads.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& where);

/// Converts `count` elements of `type` at `data` (unaligned, any byte order) to float.
void npy_to_float(const NpyType& type, const std::uint8_t* data, std::size_t count, float* out);

}  // namespace tandem::data

TANDEM_INTERNAL_API_END
