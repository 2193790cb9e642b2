// Zip archives, read with minizip (zlib's unzip): NumPy's .npz files and Keras 3's .keras files
// are zips. A stored (uncompressed) member is located in the archive, so that a caller may map or
// read it in place; a deflated one is inflated into memory, its CRC checked.
// Stateless; any thread (each call opens the archive on its own and closes it before returning).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem {

/// One member of an archive: where its bytes are.
struct ZipMember {
  std::string name;                    // its name in the archive ("x.npy", "config.json")
  bool stored = false;                 // uncompressed: the bytes are [offset, offset + size)
  std::uint64_t offset = 0;            //   of the archive's file; stored only
  std::uint64_t size = 0;              // the member's bytes, uncompressed
  std::uint32_t crc = 0;               // their CRC-32, as the archive gives it
  std::vector<std::uint8_t> inflated;  // a deflated member's bytes
};

/// The names of `file`'s members, in archive order. DataError "cannot read '<file>': not a
/// <kind> (not a readable zip archive)" when it is none (`kind`: "a .npz file").
std::vector<std::string> zip_member_names(const std::string& file, const std::string& kind);

/// The member named `name`, nullopt when the archive has none. DataError naming the file and the
/// member as `what` says ("array 'x'"; default "member '<name>'") when it is there more than
/// once (readers disagree on which one is meant), encrypted,
/// compressed other than by deflate, or corrupt (a CRC or size mismatch), and as
/// zip_member_names when `file` is no archive. A deflated member is inflated in chunks, so a
/// directory promising more than the data holds fails having allocated no more than the data gave.
std::optional<ZipMember> find_zip_member(const std::string& file, const std::string& kind,
                                         const std::string& name, std::string what = "");

/// The bytes of `member` (found in `file`): its inflated bytes, or a stored member's read from
/// the file and checked against its CRC. DataError naming the file and the member when they
/// cannot be read whole or do not match it.
std::vector<std::uint8_t> zip_member_bytes(const std::string& file, ZipMember member);

}  // namespace tandem

TANDEM_INTERNAL_API_END
